"""slicer: cut each chunk into pieces of about `average_size` bytes (+/- `size_variation`), `delay` us apart."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Chunk, Forward, Stub, Toxic, non_negative


@dataclass
class SlicerToxic(Toxic):
    type = "slicer"
    average_size: int = 0
    size_variation: int = 0
    delay: int = 0

    def validate(self) -> None:
        non_negative(self, "average_size", "size_variation", "delay")

    def cuts(self, start: int, end: int, stub: Stub) -> list[int]:
        """Toxiproxy's recursive halving; returns the slice boundaries (iterative, so no recursion limit)."""
        out: list[int] = []
        todo = [(start, end)]
        while todo:
            s, e = todo.pop()
            if (e - s) - self.average_size <= self.size_variation or self.average_size <= 0:
                out.append(e)
                continue
            mid = s + (e - s) // 2
            if self.size_variation > 0:
                mid += stub.rng.randrange(self.size_variation * 2) - self.size_variation
            mid = min(max(mid, s + 1), e - 1)
            todo.append((mid, e))
            todo.append((s, mid))
        return out

    async def pipe(self, chunk: Chunk | None, stub: Stub, forward: Forward) -> None:
        if chunk is None or not chunk.data:
            await forward(chunk)
            return
        data = chunk.data
        start = 0
        for end in self.cuts(0, len(data), stub):
            await forward(Chunk(data[start:end], chunk.ts))
            start = end
            if end < len(data) and not await stub.sleep(self.delay / 1e6):
                break
        if start < len(data):
            await forward(Chunk(data[start:], chunk.ts))  # removed mid-chunk: the rest in one piece
