"""The toxic interface: one core method, `pipe`, plus optional capabilities a toxic may define.

A toxic sits on one direction of a connection ("upstream" = client -> server, "downstream" = server -> client)
and sees the stream as chunks in order. `pipe(chunk, stub, forward)` gets one chunk (None = end of stream) and
passes what should go on with `await forward(chunk)`; not calling forward drops the bytes (only toxics whose
purpose is dropping do that). Every wait goes through `stub.sleep`, which returns early when the toxic is
removed, so removing a toxic never strands data (Toxiproxy's "flush in-flight data on interrupt").

Optional capabilities (duck-typed, like Toxiproxy's StatefulToxic / CleanupToxic):
  new_state()      -> per-connection state, kept in stub.state
  on_attach(stub)  called when the toxic starts applying to a connection (timers start here)
  cleanup(stub)    -> bytes still held (forwarded on) when the toxic is removed from a live connection
  validate()       raise ValueError for bad attribute values (-> 400 "bad request body: ...")
  watches_requests = True  (class attribute) the connection records each request's API key and version by
                   correlation id (connection.watch_requests()), so a downstream toxic knows what a response answers
Config attributes are plain dataclass fields named exactly as Toxiproxy's JSON names them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..frames import FrameCounter, RequestTap


class ConnectionView(Protocol):
    """What a toxic may do to its connection (server.Connection provides it; toxics never import the server)."""

    no_response_requests: int

    def close(self) -> None: ...

    def reset(self) -> None: ...

    def requests_expecting_response(self) -> int: ...

    def inject_response(self, after: int, frame: bytes) -> None: ...

    def watch_requests(self) -> RequestTap: ...


class LinkView(Protocol):
    """What a toxic sees of one direction of a connection (server.Link provides it)."""

    tracker: FrameCounter

    @property
    def connection(self) -> ConnectionView: ...

    def close_output(self) -> None: ...


@dataclass(slots=True)
class Chunk:
    """Bytes read from one side, stamped with the monotonic time they were read (latency counts from there)."""

    data: bytes
    ts: float


Forward = Callable[["Chunk | None"], Awaitable[None]]


class Stub:
    """One toxic's view of one connection direction: its state, interruptible sleep, and the link to close."""

    __slots__ = ("link", "state", "interrupted", "rng", "tasks", "enabled", "generation")

    def __init__(self, link: LinkView, state: Any, rng: random.Random, enabled: bool) -> None:
        self.link = link
        self.state = state
        self.rng = rng
        self.enabled = enabled  # the toxicity roll for this connection
        self.interrupted = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.generation = 0

    async def sleep(self, seconds: float) -> bool:
        """Sleep, returning False early if the toxic was removed meanwhile (so the caller flushes and stops)."""
        if self.interrupted.is_set():
            return False
        if seconds <= 0:
            return True
        try:
            await asyncio.wait_for(self.interrupted.wait(), seconds)
            return False
        except TimeoutError:
            return True

    def spawn(self, coro: Awaitable[None]) -> None:
        """A background task (e.g. a timer) that is cancelled when the toxic is removed or the link ends."""
        self.tasks.append(asyncio.ensure_future(coro))

    def stop(self) -> None:
        self.interrupted.set()
        for t in self.tasks:
            t.cancel()


class Toxic:
    """Base of every toxic; subclasses are dataclasses whose fields are the toxic's JSON attributes."""

    type: ClassVar[str] = ""
    # Toxiproxy's default stream when the JSON omits it.
    default_stream: ClassVar[str] = "downstream"

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        await forward(chunk)

    def validate(self) -> None:
        """Raise ValueError for attribute values that make no sense (negative times, sizes)."""

    def attributes(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def non_negative(toxic: Toxic, *names: str) -> None:
    """Shared validate() helper: the named attributes must be >= 0."""
    for name in names:
        if getattr(toxic, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(toxic, name)}")
