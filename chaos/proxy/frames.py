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


class RequestTap:
    """Reads (api_key, api_version) per correlation id off a connection's request stream, as the bytes pass.

    Why: a response header carries only the correlation id, so a toxic rewriting responses needs this map from
    the requests sent on the same connection. Started mid-stream it resumes from the connection's frame counter
    (the request in flight then goes unrecorded: its response passes untouched). Several toxics may read one
    entry, so nothing is removed on lookup; the map keeps the latest LIMIT requests (oldest forgotten first),
    far more than any client keeps in flight.
    """

    LIMIT = 4096
    __slots__ = ("pending", "_remaining", "_head", "_body")

    def __init__(self, counter: FrameCounter | None = None) -> None:
        self.pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api_key, api_version)
        self._remaining = counter._remaining if counter is not None else 0
        self._head = counter._head if counter is not None else b""
        self._body: bytes | None = None  # the first bytes of the current body, until its 8-byte header is read

    def feed(self, data: bytes) -> None:
        pos, n = 0, len(data)
        while pos < n:
            if self._remaining:
                take = min(self._remaining, n - pos)
                if self._body is not None:
                    self._body += data[pos:pos + min(take, 8 - len(self._body))]
                    if len(self._body) >= 8:
                        self._record(self._body)
                        self._body = None
                self._remaining -= take
                pos += take
                if self._remaining == 0:
                    self._body = None
                continue
            need = 4 - len(self._head)
            self._head += data[pos:pos + need]
            pos = min(pos + need, n)
            if len(self._head) == 4:
                size = int.from_bytes(self._head, "big", signed=True)
                self._head = b""
                if size > 0:
                    self._remaining = size
                    self._body = b"" if size >= 8 else None

    def _record(self, header: bytes) -> None:
        api_key = int.from_bytes(header[0:2], "big", signed=True)
        version = int.from_bytes(header[2:4], "big", signed=True)
        corr = int.from_bytes(header[4:8], "big", signed=True)
        self.pending.pop(corr, None)  # a reused id moves to the newest end
        if len(self.pending) >= self.LIMIT:
            self.pending.pop(next(iter(self.pending)))
        self.pending[corr] = (api_key, version)

    def lookup(self, correlation_id: int) -> tuple[int, int] | None:
        """(api_key, version) of the request a response with this correlation id answers."""
        return self.pending.get(correlation_id)
