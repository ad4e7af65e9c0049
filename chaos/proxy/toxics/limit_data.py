"""limit_data: let `bytes` bytes through (per connection direction), then close the connection."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class LimitDataToxic(Toxic):
    type = "limit_data"
    bytes: int = 0

    def validate(self) -> None:
        non_negative(self, "bytes")

    def new_state(self) -> list[int]:
        return [0]  # bytes transmitted; survives attribute updates like Toxiproxy's state

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is None:
            await forward(None)
            return
        sent = stub.state
        remaining = max(self.bytes - sent[0], 0)
        data = chunk.data[:remaining]
        if data:
            sent[0] += len(data)
            await forward(Chunk(data, chunk.ts))
        if self.bytes - sent[0] <= 0:
            stub.link.close_output()
