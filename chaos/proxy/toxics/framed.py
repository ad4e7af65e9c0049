"""The framing shared by the Kafka-aware toxics: whole Kafka frames out of a byte stream, wherever it attached.

Why one place: a toxic that acts per request (``kafka``) or per response (``kafka_rewrite``) must first finish the
frame that was in flight when it attached (the link's tracker counted every byte already sent), then buffer bytes
until a frame is whole, and pass on anything that is not Kafka framing rather than hold it forever. Subclasses get
whole frames in ``on_frames``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..frames import FrameCounter
from .base import Chunk, Forward, Stub, Toxic


class FrameState:
    __slots__ = ("sync", "buf", "tap")

    def __init__(self) -> None:
        self.sync: FrameCounter | None = None  # until the first whole frame: where the current one ends
        self.buf = bytearray()
        self.tap: Any = None  # the connection's RequestTap (toxics that read responses)


def split_frames(buf: bytearray) -> tuple[list[bytes], bytes]:
    """Pop the whole frames off ``buf``; a negative size means not Kafka framing: those bytes come back as the
    second item (to pass on) and ``buf`` is emptied."""
    frames: list[bytes] = []
    while len(buf) >= 4:
        size = int.from_bytes(buf[:4], "big", signed=True)
        if size < 0:
            rest = bytes(buf)
            buf.clear()
            return frames, rest
        if len(buf) < 4 + size:
            break
        frames.append(bytes(buf[:4 + size]))
        del buf[:4 + size]
    return frames, b""


@dataclass
class FramedToxic(Toxic):
    """A toxic that sees whole Kafka frames (requests upstream, responses downstream), and counts what it acted on:
    ``hits`` and the latest ``acted`` (monotonic time, api_key, correlation id), shared by updated copies of it."""

    _hits: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)
    _log: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=1000), repr=False,
                                                 compare=False)

    def attributes(self) -> dict[str, Any]:
        out = super().attributes()
        out.pop("_hits")
        out.pop("_log")
        return out

    @property
    def hits(self) -> int:
        """How many frames this toxic acted on (shared by updated copies of it)."""
        return self._hits[0]

    @property
    def acted(self) -> list[tuple[float, int, int]]:
        """(monotonic time, api_key, correlation id) of the latest frames acted on (at most 1000)."""
        return list(self._log)

    def new_state(self) -> FrameState:
        return FrameState()

    def on_attach(self, stub: Stub) -> None:
        tracker = stub.link.tracker
        if not tracker.at_boundary and stub.state.sync is None:
            sync = FrameCounter()
            sync._remaining, sync._head = tracker._remaining, tracker._head
            stub.state.sync = sync

    def cleanup(self, stub: Stub) -> bytes:
        held = bytes(stub.state.buf)  # a partial frame: pass it on untouched
        stub.state.buf.clear()
        return held

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        state: FrameState = stub.state
        if chunk is None:
            if state.buf:
                await forward(Chunk(bytes(state.buf), 0.0))
                state.buf.clear()
            await forward(None)
            return
        data = chunk.data
        if state.sync is not None:  # finish the frame that was in flight when this toxic attached
            ends = state.sync.feed(data, want_ends=True) or []
            cut = ends[0] if ends else len(data)
            await forward(Chunk(data[:cut], chunk.ts))
            data = data[cut:]
            if not ends:
                return
            state.sync = None
        state.buf += data
        frames, raw = split_frames(state.buf)
        await self.on_frames(frames, raw, stub, forward, chunk.ts)

    async def on_frames(self, frames: list[bytes], raw: bytes, stub: Stub, forward: Forward, ts: float) -> None:
        """Act on whole ``frames`` (in order), then pass ``raw`` (bytes that are not Kafka framing) on."""
        raise NotImplementedError
