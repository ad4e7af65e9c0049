"""Kafka frame counting on a passing byte stream: O(frames), no copies, always on.

Both directions of every connection are counted so that a Kafka-aware toxic added to a live connection knows
where the next request starts, and so a synthetic response can be slotted in exactly after the responses to the
requests sent before it (Kafka answers a connection's requests in order and kafka-python insists on it).
Non-Kafka traffic is counted too; the numbers are then meaningless and unused.
"""

from __future__ import annotations


class FrameCounter:
    """Counts size-prefixed (int32 big-endian) frames as bytes pass; `completed` is the number seen whole."""

    __slots__ = ("completed", "_remaining", "_head")

    def __init__(self) -> None:
        self.completed = 0
        self._remaining = 0  # bytes left in the current frame's body
        self._head = b""  # a size prefix split across chunks

    @property
    def at_boundary(self) -> bool:
        """True between frames (not inside a size prefix or a body)."""
        return self._remaining == 0 and not self._head

    @property
    def remaining(self) -> int | None:
        """Bytes until the current frame ends (0 at a boundary; None inside a split size prefix)."""
        return None if self._head else self._remaining

    def feed(self, data: bytes, want_ends: bool = False) -> list[int] | None:
        """Count the frames `data` completes; with want_ends, return the offsets in `data` where frames end."""
        ends: list[int] | None = [] if want_ends else None
        pos, n = 0, len(data)
        while pos < n:
            if self._remaining:
                take = min(self._remaining, n - pos)
                self._remaining -= take
                pos += take
                if self._remaining == 0:
                    self.completed += 1
                    if ends is not None:
                        ends.append(pos)
                continue
            need = 4 - len(self._head)
            self._head += data[pos:pos + need]
            pos = min(pos + need, n)
            if len(self._head) == 4:
                size = int.from_bytes(self._head, "big", signed=True)
                self._head = b""
                if size > 0:
                    self._remaining = size
                else:  # an empty (or garbage negative) frame ends at its prefix
                    self.completed += 1
                    if ends is not None:
                        ends.append(pos)
        return ends
