"""One clock and one seeded RNG for the broker core.

Partition, purgatory, group, replica and controller logic take time, timers and randomness only from here, so a
later deterministic simulator can substitute a virtual clock and replay a failing chaos schedule exactly.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from collections.abc import Callable
from typing import Any


class Timer:
    """A cancellable timer handle (what ``call_later`` returns, for both clocks)."""

    def __init__(self, handle: Any = None) -> None:
        self._handle = handle
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self._handle is not None:
            self._handle.cancel()


class Clock:
    """Monotonic time for timeouts, wall time for record timestamps, timers on the running event loop."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (timeouts, purgatory deadlines)."""
        return time.monotonic()

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (LogAppendTime, ListOffsets by timestamp)."""
        return time.time_ns() // 1_000_000

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Run ``fn(*args)`` after ``delay_s`` seconds on the event loop (must be called on the loop)."""
        return Timer(asyncio.get_running_loop().call_later(max(delay_s, 0.0), fn, *args))

    async def sleep(self, delay_s: float) -> None:
        await asyncio.sleep(max(delay_s, 0.0))


class ManualClock(Clock):
    """A clock that moves only when told to: for tests and the future simulator. Timers fire in ``advance``."""

    def __init__(self, start_monotonic: float = 0.0, start_wall_ms: int = 1_700_000_000_000) -> None:
        self._mono = start_monotonic
        self._wall_ms = start_wall_ms
        self._timers: list[tuple[float, int, Timer, Callable[..., Any], tuple]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def wall_ms(self) -> int:
        return self._wall_ms + int(self._mono * 1000)

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Timer:
        t = Timer()
        heapq.heappush(self._timers, (self._mono + max(delay_s, 0.0), next(self._seq), t, fn, args))
        return t

    def advance(self, seconds: float) -> None:
        """Move time forward, firing due timers in deadline order (ties in the order they were set)."""
        end = self._mono + seconds
        while self._timers and self._timers[0][0] <= end:
            when, _, t, fn, args = heapq.heappop(self._timers)
            self._mono = max(self._mono, when)
            if not t.cancelled:
                fn(*args)
        self._mono = end


def make_rng(seed: int | None) -> random.Random:
    """The broker's single RNG; a seed makes ids (member ids, producer ids) reproducible."""
    return random.Random(seed)
