"""bandwidth: limit the stream to `rate` KB/s (Toxiproxy's: sleep len/rate ms per chunk, 100 ms slices)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class BandwidthToxic(Toxic):
    type = "bandwidth"
    rate: int = 0

    def validate(self) -> None:
        non_negative(self, "rate")

    def new_state(self) -> list[float]:
        return [0.0]  # sleep debt in seconds, carried across chunks like Toxiproxy's

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is None or self.rate <= 0:
            await forward(chunk)
            return
        debt = stub.state
        data = chunk.data
        slice_len = self.rate * 100  # bytes per 100 ms at `rate` KB/s
        debt[0] += len(data) / (self.rate * 1000.0)
        while len(data) > slice_len:
            if not await stub.sleep(0.1):
                break  # removed: flush the rest at once
            await forward(Chunk(data[:slice_len], chunk.ts))
            data = data[slice_len:]
            debt[0] -= 0.1
        start = time.monotonic()
        await stub.sleep(debt[0])
        debt[0] -= time.monotonic() - start
        await forward(Chunk(data, chunk.ts))
