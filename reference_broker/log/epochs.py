"""The leader epoch cache shared by the memory and file logs (Kafka's LeaderEpochFileCache, minus the file).

Entries are (epoch, first offset written in that epoch), both strictly ascending. The file log persists the
entries itself; this class only keeps Kafka's rules for how they change.
"""
from __future__ import annotations

from collections.abc import Iterable

from .base import EpochEntry


class LeaderEpochCache:
    """Kafka's assign / truncateFromEnd / truncateFromStart; each returns True when the entries changed."""

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = [EpochEntry(int(e), int(o)) for e, o in entries]

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Only a newer epoch adds an entry (as Kafka's
        LogSegment.recover does); negative epochs (no partition leader epoch) are never cached."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._entries and epoch <= self._entries[-1].epoch:
            return False
        # Kafka's maybeTruncateNonMonotonicEntries: an entry may not start at or after the new one.
        while self._entries and self._entries[-1].start_offset >= start_offset:
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after ``end_offset`` (log truncation)."""
        n = len(self._entries)
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        return len(self._entries) != n

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved to ``start_offset``: entries wholly before it go, and the last of them stays with
        its start moved to ``start_offset`` (Kafka's truncateFromStart), so its epoch is still answerable."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
            return False
        keep = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *keep]
        return True

    def clear(self) -> bool:
        changed = bool(self._entries)
        self._entries = []
        return changed
