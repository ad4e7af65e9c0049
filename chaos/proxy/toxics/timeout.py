"""timeout: stop all data; close the connection after `timeout` ms (0 = never). Removing it closes the link.

Data stopped by this toxic is lost on purpose (Toxiproxy's semantics), so its cleanup closes the connection
rather than resuming a stream with a hole in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class TimeoutToxic(Toxic):
    type = "timeout"
    timeout: int = 0

    def validate(self) -> None:
        non_negative(self, "timeout")

    def on_attach(self, stub: Stub) -> None:
        if self.timeout > 0:
            stub.spawn(self._close_later(stub))

    async def _close_later(self, stub: Stub) -> None:
        if await stub.sleep(self.timeout / 1000.0):
            stub.link.close_output()

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is None:
            await forward(None)
        # data: swallowed

    def cleanup(self, stub: Stub) -> bytes:
        stub.link.close_output()
        return b""
