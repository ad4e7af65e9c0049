"""The replicated log as KafkaRaftClient sees it (ReplicatedLog): epoch-tagged entries and the leader-epoch cache.

Every entry carries the epoch of the leader that appended it; ``end_offset_for_epoch`` answers KIP-595's divergence
question ("where does your epoch E end?") from the cache of (epoch, start offset) pairs, as Kafka's
LeaderEpochFileCache does for partitions. Appends here are durable on return (the simulation keeps the object across
a crash, as a disk would); the core still calls ``flush`` where Kafka does (leader before counting its own offset,
voter before acknowledging by its next fetch), for the file-backed log of the integration.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class LogEntry:
    """One record of the metadata log. ``control`` marks Kafka's LeaderChangeMessage (the no-op a leader writes)."""
    offset: int
    epoch: int
    data: Any
    control: bool = False


class RaftLog(Protocol):
    """What the Raft core needs from a log (Kafka: ReplicatedLog)."""

    def end_offset(self) -> int: ...
    def last_fetched_epoch(self) -> int: ...
    def append_as_leader(self, epoch: int, data: Any, control: bool = False) -> int: ...
    def append_as_follower(self, entries: tuple[LogEntry, ...]) -> None: ...
    def truncate_to(self, offset: int) -> None: ...
    def read(self, start: int, max_entries: int) -> tuple[LogEntry, ...]: ...
    def entry(self, offset: int) -> LogEntry | None: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...
    def flush(self) -> None: ...


class MemoryRaftLog:
    """An in-memory RaftLog with a leader-epoch cache. ``truncations`` counts truncations, so a checker can tell
    that the prefix it already verified may have changed."""

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.epoch_cache: list[tuple[int, int]] = []  # (epoch, start offset), epochs strictly increasing
        self.truncations = 0

    def end_offset(self) -> int:
        return len(self.entries)

    def last_fetched_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def _assign_epoch(self, epoch: int, offset: int) -> None:
        if not self.epoch_cache or self.epoch_cache[-1][0] < epoch:
            self.epoch_cache.append((epoch, offset))
        elif self.epoch_cache[-1][0] > epoch:
            raise ValueError(f"append at epoch {epoch} after epoch {self.epoch_cache[-1][0]}")

    def append_as_leader(self, epoch: int, data: Any, control: bool = False) -> int:
        offset = len(self.entries)
        self._assign_epoch(epoch, offset)
        self.entries.append(LogEntry(offset, epoch, data, control))
        return offset

    def append_as_follower(self, entries: tuple[LogEntry, ...]) -> None:
        for e in entries:
            if e.offset != len(self.entries):
                raise ValueError(f"non-contiguous append at {e.offset}, end offset {len(self.entries)}")
            self._assign_epoch(e.epoch, e.offset)
            self.entries.append(e)

    def truncate_to(self, offset: int) -> None:
        """Drop entries at and above ``offset`` (a divergent suffix) and the cache entries that start there."""
        if offset >= len(self.entries):
            return
        del self.entries[offset:]
        while self.epoch_cache and self.epoch_cache[-1][1] >= offset:
            self.epoch_cache.pop()
        self.truncations += 1

    def read(self, start: int, max_entries: int) -> tuple[LogEntry, ...]:
        return tuple(self.entries[start:start + max_entries])

    def flush(self) -> None:
        """Durable on append already (the object is the disk); a file-backed log fsyncs here."""

    def entry(self, offset: int) -> LogEntry | None:
        return self.entries[offset] if 0 <= offset < len(self.entries) else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch`` in this log, the offset where it ends): Kafka's endOffsetForEpoch.
        (0, 0) when the log has no entry of an epoch that old."""
        found = None
        for i, (e, _start) in enumerate(self.epoch_cache):
            if e > epoch:
                break
            found = i
        if found is None:
            return (0, 0)
        nxt = self.epoch_cache[found + 1][1] if found + 1 < len(self.epoch_cache) else len(self.entries)
        return (self.epoch_cache[found][0], nxt)
