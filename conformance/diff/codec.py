"""Kafka messages as plain trees: what the differential mode stores, replays and compares.

Why trees: a conversation is kept as JSON (so it can be saved, read and replayed against any pair of targets) and
answers are compared field by field, so both directions are needed — a ``kafka.protocol`` request → a tree →
JSON → the same request again, and a decoded answer → a tree whose leaves are the protocol's fields. The schema
(``kafka.protocol``'s copy of Kafka's JSON message definitions) says what each field is: its ``entityType``
(``topicName``, ``groupId``, ``brokerId``, ``producerId``, ``transactionalId``) drives which request values are names
and which answer values are node ids, without a hand-kept list of field names.

A ``records`` field is shown decoded (batches with their header fields and records with offset, timestamp, key,
value, headers; ``kafka.record`` does the decoding), so a difference is named by the batch field it is in rather
than "these bytes differ". A trailing partial batch a broker may cut (KIP-74) is kept as ``{"partial_bytes": n}``.
"""
from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from reference_broker.client.protocol import request_class, response_class

# API key → Kafka's name (the keys any suite, machine or client sends; others show as "ApiKey<n>")
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch", 32: "DescribeConfigs",
    42: "DeleteGroups", 43: "ElectLeaders", 47: "OffsetDelete", 55: "DescribeQuorum", 57: "UpdateFeatures",
    60: "DescribeCluster", 75: "DescribeTopicPartitions",
}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"ApiKey{api_key}")


# ------------------------------------------------------------------------------------------------ JSON of trees
def to_json(value: Any) -> Any:
    """A tree with bytes and UUIDs as JSON: ``{"$b": base64}``, ``{"$uuid": "..."}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def from_json(value: Any) -> Any:
    """Inverse of :func:`to_json` (other ``$`` objects, e.g. references, are left for the caller)."""
    if isinstance(value, dict):
        if set(value) == {"$b"}:
            return base64.b64decode(value["$b"])
        if set(value) == {"$uuid"}:
            return uuid.UUID(value["$uuid"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------------ requests
def request_tree(request: Any) -> dict[str, Any]:
    """Every field of a request object (bytes and UUIDs kept as such)."""
    return _plain(request.to_dict(json=False))


def _plain(value: Any) -> Any:
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def build_request(api_key: int, tree: dict[str, Any]) -> Any:
    """The ``kafka.protocol`` request for ``api_key`` with the fields of ``tree`` (nested structs rebuilt)."""
    cls = request_class(api_key)
    return cls(**_kwargs(cls._struct, tree))


def _kwargs(struct: Any, tree: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in tree.items():
        f = struct.fields.get(name)
        if f is None:
            raise ValueError(f"{struct.name} has no field {name!r}")
        if value is not None and f.is_struct_array():
            out[name] = [f.data_class(**_kwargs(f.array_of, v)) if isinstance(v, dict) else v for v in value]
        elif value is not None and f.is_struct():
            out[name] = f.data_class(**_kwargs(f, value))
        else:
            out[name] = value
    return out


def entity_fields(api_key: int, *, request: bool) -> dict[str, str]:
    """{schema path: entityType} of a message, e.g. ``{"topics[].partitions[].leader_id": "brokerId"}``."""
    cls = request_class(api_key) if request else response_class(api_key)
    out: dict[str, str] = {}

    def walk(struct: Any, prefix: str) -> None:
        for f in struct._fields:
            path = prefix + f.name
            et = f._json.get("entityType")
            if et:
                out[path] = et
            if f.is_struct_array():
                walk(f.array_of, path + "[].")
            elif f.is_struct():
                walk(f, path + ".")

    walk(cls._struct, "")
    return out


def map_keys(api_key: int, *, request: bool) -> dict[str, str]:
    """{array path: the field its elements are keyed by} for the arrays the schema declares maps (``mapKey``)."""
    cls = request_class(api_key) if request else response_class(api_key)
    out: dict[str, str] = {}

    def walk(struct: Any, prefix: str) -> None:
        for f in struct._fields:
            path = prefix + f.name
            if f.is_struct_array():
                keys = [g.name for g in f.array_of._fields if g._json.get("mapKey")]
                if keys:
                    out[path] = keys[0]
                walk(f.array_of, path + "[].")
            elif f.is_struct():
                walk(f, path + ".")

    walk(cls._struct, "")
    return out


def iter_entities(tree: Any, entities: dict[str, str], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(entityType, value) of every entity-typed leaf of a tree (arrays of ids yield each id)."""
    if not isinstance(tree, dict):
        return
    for k, v in tree.items():
        path = prefix + k
        et = entities.get(path)
        if et is not None:
            for x in v if isinstance(v, list) else [v]:
                if not isinstance(x, (dict, list)):
                    yield et, x
        elif isinstance(v, list):
            for item in v:
                yield from iter_entities(item, entities, path + "[].")
        elif isinstance(v, dict):
            yield from iter_entities(v, entities, path + ".")


# ------------------------------------------------------------------------------------------------ answers
def response_tree(body: Any) -> dict[str, Any]:
    """A decoded answer as a tree; every ``records`` field decoded into batches (see the module docstring)."""
    return _decode_records(_plain(body.to_dict(json=False)))


def _decode_records(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (decode_record_batches(v) if k == "records" and isinstance(v, bytes) else _decode_records(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_records(v) for v in value]
    return value


def decode_record_batches(data: bytes | None) -> list[dict[str, Any]] | None:
    """The batches of a records field, header fields and records each (v2 batches; older magic shown raw)."""
    if data is None:
        return None
    out: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        if pos + 17 > len(data):
            out.append({"partial_bytes": len(data) - pos})
            break
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
        magic = data[pos + 16]
        if pos + size > len(data):
            out.append({"partial_bytes": len(data) - pos})
            break
        chunk = bytes(data[pos:pos + size])
        pos += size
        if magic != 2:
            out.append({"magic": magic, "raw": chunk})
            continue
        b = DefaultRecordBatch(chunk)
        recs = [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                 "headers": [[k, v] for k, v in r.headers]} for r in b]
        out.append({"base_offset": b.base_offset, "batch_length": size - 12,
                    "partition_leader_epoch": int.from_bytes(chunk[12:16], "big", signed=True), "magic": magic,
                    "crc": b.crc, "attributes": int.from_bytes(chunk[21:23], "big"),
                    "last_offset_delta": b.last_offset_delta, "base_timestamp": b.first_timestamp,
                    "max_timestamp": b.max_timestamp, "producer_id": b.producer_id,
                    "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence, "records": recs})
    return out
