"""kafka_rewrite: a Kafka-aware toxic that rewrites the broker's answers (downstream stream only).

Why: a conformance suite has teeth only if it fails against a broker that breaks a rule. This toxic turns a
correct broker into a wrong one at the protocol level, per API key, without touching the broker: a mutant.

For responses to requests of API key `api_key` (any version), every field named `field`, wherever it sits in
the response (top level or inside topics/partitions/groups; optionally only under `topic` and/or `partition`),
is rewritten by `op`:
  op "set"            the field becomes `value` (int for integer fields, string for string fields; a string is
                      UTF-8 encoded for bytes fields, so "" empties a SyncGroup assignment);
  op "add"            `value` (an int) is added to an integer field (high_watermark +1, offset -1, ...);
  op "drop_batches"   a records field loses its last `value` record batches (all of them if value >= the count).
`match` (optional) restricts the rewrite to fields whose current value equals it (error_code 27 -> 0: a
Heartbeat that says NONE instead of REBALANCE_IN_PROGRESS). `count` > 0 limits it to the first `count` responses
rewritten through this toxic (all connections together); `probability` rewrites each matching response with that
chance; `toxicity` still decides per connection. Responses the toxic cannot decode pass untouched.

How: the connection records (api_key, version) per correlation id from the requests it forwards
(server.Connection.watch_requests); each whole response frame of the chosen key is decoded with kafka-python's
`kafka.protocol` classes, rewritten, re-encoded, and sent with its original response header (kafka-python 3.0.12
cannot encode a response header). One response frame in, one out, so the frame counts the Kafka toxic relies on
stay right. Record batches are cut at their v2 length prefix (baseOffset int64, batchLength int32).

Limits: a Fetch v13+ names topics by id, so `topic` does not match it (partition filters still do). Requests in
flight when the toxic attaches are not rewritten.
"""

from __future__ import annotations

import io
import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.api_key import ApiKey

from .. import errors as E
from .. import kafka_wire as wire
from .base import Chunk, Forward, Stub
from .framed import FramedToxic, FrameState

log = logging.getLogger("chaos.proxy.kafka_rewrite")

OPS = ("set", "add", "drop_batches")
_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_BATCH_HEAD = struct.Struct(">qi")  # a record batch's baseOffset and batchLength


def response_fields(api_key: int) -> dict[str, set[str]]:
    """Every field name of `api_key`'s response schema (all versions, any depth) -> its type names."""
    out: dict[str, set[str]] = {}

    def walk(fields: dict[str, Any]) -> None:
        for name, f in fields.items():
            out.setdefault(name, set()).add(f._type_str)
            if f.is_struct_array() or f.is_struct():
                walk(f.fields)

    walk(wire.RESPONSES[api_key]._struct.fields)
    return out


def _kind(type_str: str) -> str:
    if type_str in _INT_RANGES:
        return "int"
    if type_str in ("string", "bytes", "records"):
        return type_str
    return "other"


@dataclass
class KafkaRewriteToxic(FramedToxic):
    type = "kafka_rewrite"
    default_stream = "downstream"
    watches_requests = True  # the server records request headers for it from a connection's first byte
    api_key: int = -1
    field: str = ""
    op: str = "set"
    value: int | str | None = None
    match: int | str | None = None
    topic: str | None = None
    partition: int = -1
    count: int = 0
    probability: float = 1.0

    def validate(self) -> None:
        if self.api_key not in set(ApiKey):
            raise ValueError(f"api_key {self.api_key} is not a Kafka API key")
        if self.api_key not in wire.RESPONSES:
            raise ValueError(f"api_key {self.api_key}: kafka-python has no response schema for it")
        if self.op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, got {self.op!r}")
        known = response_fields(self.api_key)
        name = wire.RESPONSES[self.api_key].__name__
        if self.field not in known:
            raise ValueError(f"field {self.field!r} is not in {name} (fields: {', '.join(sorted(known))})")
        kinds = {_kind(t) for t in known[self.field]}
        if len(kinds) != 1 or "other" in kinds:
            raise ValueError(f"field {self.field!r} of {name} has type {'/'.join(sorted(known[self.field]))}: "
                             "only integer, string, bytes and records fields can be rewritten")
        (kind,) = kinds
        if self.op == "add" and (kind != "int" or not isinstance(self.value, int)):
            raise ValueError(f"op add needs an integer field and an integer value ({self.field!r} is {kind})")
        if self.op == "drop_batches" and (kind != "records" or not isinstance(self.value, int) or self.value < 1):
            raise ValueError(f"op drop_batches needs a records field and a value >= 1 ({self.field!r} is {kind})")
        if self.op == "set":
            self._check_value(self.value, kind, known[self.field], "value")
        if self.match is not None:
            self._check_value(self.match, kind, known[self.field], "match")
        if self.count < 0 or self.partition < -1:
            raise ValueError("count must be >= 0, partition >= -1")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be within 0..1")

    def _check_value(self, value: Any, kind: str, types: set[str], what: str) -> None:
        if kind == "int":
            bits = max(_INT_RANGES[t] for t in types)
            if not isinstance(value, int) or not -(1 << bits - 1) <= value < (1 << bits - 1):
                raise ValueError(f"{what} for {self.field!r} must be an int{bits}, got {value!r}")
        elif kind in ("string", "bytes"):
            if not isinstance(value, str) and value is not None:
                raise ValueError(f"{what} for {self.field!r} must be a string (or null), got {value!r}")
        elif what == "value":
            raise ValueError(f"op set cannot set a records field ({self.field!r}): use op drop_batches")

    def check_stream(self, stream: str) -> None:
        if stream != "downstream":
            raise E.INVALID_STREAM.joined("the kafka_rewrite toxic rewrites responses: use stream downstream")

    def on_attach(self, stub: Stub) -> None:
        stub.state.tap = stub.link.connection.watch_requests()
        super().on_attach(stub)  # where does the next response start? every byte sent down was counted

    async def on_frames(self, frames: list[bytes], raw: bytes, stub: Stub, forward: Forward, ts: float) -> None:
        out = b"".join(self._maybe_rewrite(f, stub.state, stub) for f in frames) + raw
        if out:
            await forward(Chunk(out, ts))

    def _maybe_rewrite(self, frame: bytes, state: FrameState, stub: Stub) -> bytes:
        if len(frame) < 8 or state.tap is None:
            return frame
        corr = int.from_bytes(frame[4:8], "big", signed=True)
        request = state.tap.lookup(corr)
        if request is None or request[0] != self.api_key:
            return frame
        if self.count and self._hits[0] >= self.count:
            return frame
        if self.probability < 1.0 and stub.rng.random() >= self.probability:
            return frame
        try:
            rewritten = self._rewrite(frame, *request)
        except Exception:  # noqa: BLE001 - a version or corner kafka-python cannot decode: pass it untouched
            log.exception("kafka_rewrite: cannot rewrite api_key %s v%s", *request)
            return frame
        if rewritten is None:
            return frame
        self._hits[0] += 1
        self._log.append((time.monotonic(), self.api_key, corr))
        return rewritten

    def _rewrite(self, frame: bytes, api_key: int, version: int) -> bytes | None:
        """The frame with the field rewritten, or None if nothing in it matched."""
        cls = wire.RESPONSES[api_key]
        body_start = 4
        bio = io.BytesIO(frame[body_start:])
        ResponseHeader.decode(bio, flexible=cls.flexible_version_q(version) and api_key != wire.API_VERSIONS)
        head_len = bio.tell()
        response = cls.decode(memoryview(frame)[body_start + head_len:], version=version)
        if not self._walk(response, version, None, None):
            return None
        response._header = None  # decoded without one; encode(version=...) reads it
        body = bytes(response.encode(version=version))
        header = frame[body_start:body_start + head_len]
        return struct.pack(">i", len(header) + len(body)) + header + body

    def _walk(self, obj: Any, version: int, topic: str | None, partition: int | None) -> bool:
        fields = obj._struct.fields
        topic = _first(obj, fields, version, ("name", "topic"), str, topic)
        partition = _first(obj, fields, version, ("partition_index", "partition"), int, partition)
        changed = False
        for name, f in fields.items():
            if not f.for_version_q(version):
                continue
            if name == self.field and self._in_scope(topic, partition):
                changed |= self._apply(obj, name, f)
            elif f.is_struct_array():
                for item in getattr(obj, name) or []:
                    changed |= self._walk(item, version, topic, partition)
            elif f.is_struct() and getattr(obj, name) is not None:
                changed |= self._walk(getattr(obj, name), version, topic, partition)
        return changed

    def _in_scope(self, topic: str | None, partition: int | None) -> bool:
        if self.topic is not None and topic != self.topic:
            return False
        return self.partition == -1 or partition == self.partition

    def _apply(self, obj: Any, name: str, f: Any) -> bool:
        current = getattr(obj, name)
        kind = _kind(f._type_str)
        if self.match is not None:
            want = self.match.encode() if kind == "bytes" and isinstance(self.match, str) else self.match
            if current != want:
                return False
        if self.op == "add":
            if current is None:
                return False
            setattr(obj, name, current + int(self.value))  # type: ignore[arg-type]
        elif self.op == "drop_batches":
            if not current:
                return False
            setattr(obj, name, drop_last_batches(bytes(current), int(self.value)))  # type: ignore[arg-type]
        else:
            value = self.value.encode() if kind == "bytes" and isinstance(self.value, str) else self.value
            if current == value:
                return False
            setattr(obj, name, value)
        return True


def _first(obj: Any, fields: dict[str, Any], version: int, names: tuple[str, ...], kind: type,
           default: Any) -> Any:
    for n in names:
        f = fields.get(n)
        if f is not None and f.for_version_q(version) and not f.is_array():
            value = getattr(obj, n, None)
            if isinstance(value, kind):
                return value
    return default


def drop_last_batches(records: bytes, n: int) -> bytes:
    """`records` without its last `n` whole batches (a partial trailing batch, as Fetch may send, goes too)."""
    starts: list[int] = []
    pos = 0
    while pos + _BATCH_HEAD.size <= len(records):
        _, length = _BATCH_HEAD.unpack_from(records, pos)
        end = pos + _BATCH_HEAD.size + length
        if length < 0 or end > len(records):
            break
        starts.append(pos)
        pos = end
    keep = starts[-n] if len(starts) >= n else 0
    return records[:keep]
