"""slow_close: when the stream ends, wait `delay` ms before closing the other side."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class SlowCloseToxic(Toxic):
    type = "slow_close"
    delay: int = 0

    def validate(self) -> None:
        non_negative(self, "delay")

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is None:
            await stub.sleep(self.delay / 1000.0)
        await forward(chunk)
