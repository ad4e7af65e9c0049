"""latency: delay every chunk by `latency` ms (+/- `jitter` ms), counted from when it was read (Toxiproxy's)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class LatencyToxic(Toxic):
    type = "latency"
    latency: int = 0
    jitter: int = 0

    def validate(self) -> None:
        non_negative(self, "latency", "jitter")

    def delay(self, stub: Stub) -> float:
        ms = self.latency
        if self.jitter > 0:
            ms += stub.rng.randrange(self.jitter * 2) - self.jitter
        return ms / 1000.0

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is not None:
            # Chunks pipeline: each waits only what is left of its own delay since it was read.
            await stub.sleep(self.delay(stub) - (time.monotonic() - chunk.ts))
        await forward(chunk)
