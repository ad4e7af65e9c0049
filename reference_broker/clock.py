"""One clock and one seeded RNG for the broker core.

Partition, purgatory, group and controller logic take time and randomness only from here, so a later
deterministic simulator can substitute a virtual clock and replay a failing chaos schedule exactly.
"""
from __future__ import annotations

import random
import time


class Clock:
    """Monotonic time for timeouts, wall time for record timestamps."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (timeouts, purgatory deadlines)."""
        return time.monotonic()

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (LogAppendTime, ListOffsets by timestamp)."""
        return time.time_ns() // 1_000_000


class ManualClock(Clock):
    """A clock that moves only when told to: for tests and the future simulator."""

    def __init__(self, start_monotonic: float = 0.0, start_wall_ms: int = 1_700_000_000_000) -> None:
        self._mono = start_monotonic
        self._wall_ms = start_wall_ms

    def monotonic(self) -> float:
        return self._mono

    def wall_ms(self) -> int:
        return self._wall_ms + int(self._mono * 1000)

    def advance(self, seconds: float) -> None:
        self._mono += seconds


def make_rng(seed: int | None) -> random.Random:
    """The broker's single RNG; a seed makes ids (member ids, producer ids) reproducible."""
    return random.Random(seed)
