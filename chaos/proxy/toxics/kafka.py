"""kafka: a Kafka-aware toxic (Toxiproxy sees bytes; this one sees requests). Upstream stream only.

For requests of API key `api_key` (any version; optionally only those naming `topic` and/or `partition`):
  action "error"  answer with a real response of that key/version carrying `error_code` in every error field,
                  without the broker seeing the request (slotted in after the responses to earlier requests);
  action "drop"   swallow the request (the client waits for an answer that never comes: a timeout);
  action "delay"  hold the request `delay` ms (and everything behind it on that connection, keeping order);
  action "close"  close the connection.
`count` > 0 limits it to the first `count` matching requests through this toxic (all connections together);
`probability` applies it to each matching request with that chance. `toxicity` still decides per connection.

Limits: a Fetch v13+ names topics by id, so `topic` does not match it (partition filters still do).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from kafka.errors import NotLeaderForPartitionError
from kafka.protocol.api_key import ApiKey

from .. import errors as E
from .. import kafka_wire as wire
from .base import Chunk, Forward, Stub
from .framed import FramedToxic

log = logging.getLogger("chaos.proxy.kafka")

ACTIONS = ("error", "drop", "delay", "close")
NOT_LEADER_OR_FOLLOWER = NotLeaderForPartitionError.errno


@dataclass
class KafkaToxic(FramedToxic):
    type = "kafka"
    default_stream = "upstream"
    api_key: int = -1
    action: str = "error"
    error_code: int = NOT_LEADER_OR_FOLLOWER
    delay: int = 0
    topic: str | None = None
    partition: int = -1
    count: int = 0
    probability: float = 1.0

    def validate(self) -> None:
        if self.api_key not in set(ApiKey) and self.api_key != -1:
            raise ValueError(f"api_key {self.api_key} is not a Kafka API key")
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {self.action!r}")
        if not -32768 <= self.error_code <= 32767:
            raise ValueError("error_code must fit an int16")
        if self.delay < 0 or self.count < 0 or self.partition < -1:
            raise ValueError("delay and count must be >= 0, partition >= -1")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be within 0..1")
        if self.action == "error" and self.api_key not in wire.RESPONSES:
            raise ValueError("action error needs an api_key whose response kafka-python can build")

    def check_stream(self, stream: str) -> None:
        if stream != "upstream":
            raise E.INVALID_STREAM.joined("the kafka toxic reads requests: use stream upstream")

    async def on_frames(self, frames: list[bytes], raw: bytes, stub: Stub, forward: Forward, ts: float) -> None:
        passthrough = bytearray()
        for frame in frames:
            if not self._matches_key(frame):
                if frame[4:6] == b"\x00\x00":  # Produce: acks=0 ones get no answer; keep the count right
                    decoded = wire.decode_request(frame[4:])
                    if not wire.expects_response(0, decoded[1] if decoded else None):
                        stub.link.connection.no_response_requests += 1
                passthrough += frame
                continue
            if passthrough:
                await forward(Chunk(bytes(passthrough), ts))
                passthrough.clear()
            await self._on_request(frame, stub, forward, ts)
        passthrough += raw  # not Kafka framing: pass the bytes on rather than hold them forever
        if passthrough:
            await forward(Chunk(bytes(passthrough), ts))

    def _matches_key(self, frame: bytes) -> bool:
        head = wire.peek(frame[4:])
        return head is not None and (self.api_key == -1 or head[0] == self.api_key)

    async def _on_request(self, frame: bytes, stub: Stub, forward: Forward, ts: float) -> None:
        body = frame[4:]
        api_key, version, corr = wire.peek(body) or (-1, -1, -1)
        decoded = wire.decode_request(body)
        request = decoded[1] if decoded else None
        if not self._selected(request, stub):
            await self._forward_request(frame, api_key, request, stub, forward, ts)
            return
        self._hits[0] += 1
        self._log.append((time.monotonic(), api_key, corr))
        conn = stub.link.connection
        if self.action == "drop":
            return
        if self.action == "close":
            conn.close()
            return
        if self.action == "delay":
            await stub.sleep(self.delay / 1000.0)
            await self._forward_request(frame, api_key, request, stub, forward, ts)
            return
        if request is None or not wire.expects_response(api_key, request):
            log.warning("kafka toxic: cannot answer api_key %s v%s (undecodable or acks=0): dropped",
                        api_key, version)
            return
        try:
            answer = wire.error_response(api_key, version, corr, request, self.error_code)
        except Exception:  # noqa: BLE001 - a schema corner we cannot fill: let the broker answer instead
            log.exception("kafka toxic: cannot build a response for api_key %s v%s", api_key, version)
            await self._forward_request(frame, api_key, request, stub, forward, ts)
            return
        conn.inject_response(conn.requests_expecting_response(), answer)

    def _selected(self, request: Any, stub: Stub) -> bool:
        if self.topic is not None or self.partition != -1:
            if request is None:
                return False
            named = wire.topic_partitions(request)
            if not any((self.topic is None or t == self.topic) and
                       (self.partition == -1 or p == self.partition) for t, p in named):
                return False
        if self.count and self._hits[0] >= self.count:
            return False
        return self.probability >= 1.0 or stub.rng.random() < self.probability

    @staticmethod
    async def _forward_request(frame: bytes, api_key: int, request: Any, stub: Stub, forward: Forward,
                               ts: float) -> None:
        if not wire.expects_response(api_key, request):
            stub.link.connection.no_response_requests += 1
        with contextlib.suppress(ConnectionError):
            await forward(Chunk(frame, ts))
