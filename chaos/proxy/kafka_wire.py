"""Kafka wire helpers for the Kafka-aware toxic: request header peeking, request decoding, error responses.

Wire format comes from kafka-python 3's `kafka.protocol` (Kafka's JSON schemas). The error response is a real
response of the request's API key and version, with the chosen error code in every `error_code` field (top level
and per topic/partition) and the request's topics/partitions mirrored, so a client handles it exactly as if the
broker had answered it.
"""

from __future__ import annotations

import struct
from typing import Any

import kafka.protocol.admin  # noqa: F401  (importing registers the message classes)
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage

_PREFIX = struct.Struct(">hhi")
PRODUCE = 0
API_VERSIONS = 18
# Identity fields copied from a request element into the matching response element (name in the response ->
# names it may have in the request). Everything else in the response takes its schema default.
_IDENTITY = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index"),
    "group_id": ("group_id",),
    "key": ("key",),
}


def _classes() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None) is not None:
            (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    return requests, responses


REQUESTS, RESPONSES = _classes()


def peek(frame_body: bytes) -> tuple[int, int, int] | None:
    """(api_key, api_version, correlation_id) of a request frame body (size prefix excluded), or None."""
    if len(frame_body) < _PREFIX.size:
        return None
    return _PREFIX.unpack_from(frame_body)


def decode_request(frame_body: bytes) -> tuple[RequestHeader, ApiMessage] | None:
    """Header and body of a request, or None if kafka-python cannot decode it (unknown key or version)."""
    head = peek(frame_body)
    if head is None or head[0] not in REQUESTS:
        return None
    cls = REQUESTS[head[0]]
    try:
        flexible = cls.flexible_version_q(head[1])
        import io

        bio = io.BytesIO(frame_body)
        header = RequestHeader.decode(bio, flexible=flexible)
        body = cls.decode(memoryview(frame_body)[bio.tell():], version=head[1])
    except Exception:  # noqa: BLE001 - the codec raises many types on bytes it does not understand
        return None
    return header, body


def expects_response(api_key: int, request: ApiMessage | None) -> bool:
    """False only for Produce with acks=0 (the one request Kafka never answers)."""
    return not (api_key == PRODUCE and request is not None and getattr(request, "acks", 1) == 0)


def topic_partitions(request: ApiMessage) -> set[tuple[str | None, int | None]]:
    """(topic, partition) pairs a request names; partition None when the request names whole topics."""
    out: set[tuple[str | None, int | None]] = set()
    version = request.API_VERSION
    for fname, field in request._struct.fields.items():
        if not (field.is_struct_array() and field.for_version_q(version)):
            continue
        for item in getattr(request, fname) or []:
            topic = getattr(item, "name", None) or getattr(item, "topic", None)
            if not isinstance(topic, str):
                continue
            parts: list[int] = []
            for sub_name, sub in item._struct.fields.items():
                if not sub.for_version_q(version):
                    continue
                value = getattr(item, sub_name, None) or []
                if sub.is_struct_array() and "partition" in sub_name:
                    for p in value:
                        idx = getattr(p, "partition_index", None)
                        idx = getattr(p, "partition", None) if idx is None else idx
                        if isinstance(idx, int):
                            parts.append(idx)
                elif sub.is_array() and "partition" in sub_name and all(isinstance(v, int) for v in value):
                    parts.extend(value)
            out.update((topic, p) for p in parts) if parts else out.add((topic, None))
    return out


def _matching_array(name: str, request: Any, version: int) -> list[Any]:
    if request is None or isinstance(request, int):
        return []
    candidates = [(n, f) for n, f in request._struct.fields.items()
                  if f.is_array() and f.for_version_q(version) and getattr(request, n, None)]
    for n, _ in candidates:
        if n == name:
            return list(getattr(request, n))
    want_partition = "partition" in name
    for n, f in candidates:
        if ("partition" in n) == want_partition and (f.is_struct_array() or "partition" in n):
            return list(getattr(request, n))
    return []


def _fill(fields: dict[str, Any], data_class: Any, request: Any, version: int, code: int) -> Any:
    values: dict[str, Any] = {}
    if isinstance(request, int):  # an int array in the request (e.g. OffsetFetch partition_indexes)
        request = None
        values_from_int = True
    else:
        values_from_int = False
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        if name == "error_code":
            values[name] = code
        elif field.is_struct_array():
            items = _matching_array(name, request, version)
            values[name] = [_element(field, item, version, code) for item in items]
        elif request is not None and not field.is_array() and not field.is_struct():
            for alias in _IDENTITY.get(name, ()):
                rf = request._struct.fields.get(alias)
                if rf is not None and rf.for_version_q(version) and not rf.is_array():
                    values[name] = getattr(request, alias)
                    break
    del values_from_int
    return data_class(version=version, **values)


def _element(field: Any, item: Any, version: int, code: int) -> Any:
    out = _fill(field.fields, field.data_class, None if isinstance(item, int) else item, version, code)
    if isinstance(item, int):
        for key in ("partition_index", "partition"):
            if key in field.fields:
                setattr(out, key, item)
                break
    return out


def error_response(api_key: int, version: int, correlation_id: int, request: ApiMessage, code: int) -> bytes:
    """A framed response (size prefix, header, body) to `request` carrying `code` in every error field."""
    cls = RESPONSES[api_key]
    response = _fill(cls._struct.fields, cls, request, version, code)
    body = bytes(response.encode(version=version))
    flexible = cls.flexible_version_q(version) and api_key != API_VERSIONS  # KIP-511: v0 header
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body
