"""reset_peer: on the first data (or end of stream), wait `timeout` ms, then reset both sides (TCP RST)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class ResetPeerToxic(Toxic):
    type = "reset_peer"
    timeout: int = 0

    def validate(self) -> None:
        non_negative(self, "timeout")

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        # The chunk is dropped, as in Toxiproxy: a reset discards unsent data (SO_LINGER 0).
        if await stub.sleep(self.timeout / 1000.0):
            stub.link.connection.reset()
