"""The contract every partition log implements (memory and durable file logs).

Offsets: ``log_start_offset`` <= every stored offset < ``log_end_offset`` (the LEO). The log stores record batches
v2 as bytes; it assigns offsets on ``append`` (leader) or keeps them on ``append_replica`` (follower).
Reads return whole batches, as Kafka's FileRecords slices do: a read at an offset inside a batch starts at that
batch, and the consumer skips records below its fetch offset.

Every log owns its idempotent producer state (``producer_state``, Kafka's ProducerStateManager held by UnifiedLog):
each append updates it, a truncation rebuilds it up to the new end, and a durable log rebuilds it on open from its
snapshots and the batches after them (``producer_state.py``).

Threading rule: a log is used only from the broker's event loop (no locks).
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .producer_state import ProducerStateManager


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


class ReadResult(NamedTuple):
    data: bytes               # whole batches, possibly empty
    first_offset: int         # base offset of the first batch returned (or the fetch offset when empty)


class TimestampOffset(NamedTuple):
    offset: int
    timestamp: int


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class Log(abc.ABC):
    """A partition's log; see the module docstring for the offset rules."""

    producer_state: ProducerStateManager

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    @abc.abstractmethod
    def append(self, batch: bytes | bytearray | memoryview, leader_epoch: int, timestamp_ms: int | None = None) -> AppendInfo:
        """Append one validated v2 batch as leader: its base offset becomes the LEO, its partition leader epoch
        ``leader_epoch``. ``timestamp_ms`` set means LogAppendTime: max timestamp is overwritten (CRC recomputed)."""

    @abc.abstractmethod
    def append_replica(self, batches: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches fetched from a leader, offsets and epochs as they are (follower path)."""

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int, max_offset: int, min_one: bool = True) -> ReadResult:
        """Whole batches holding offsets in [offset, max_offset), starting with the batch that contains ``offset``,
        stopping before a batch that would take the total above ``max_bytes`` — except that with ``min_one`` the
        first batch is returned whole even when larger (KIP-74). Caller checks ``offset`` is within range."""

    @abc.abstractmethod
    def bytes_between(self, start: int, end: int) -> int:
        """Bytes of the batches from the one containing ``start`` up to (not including) the one at ``end``:
        the position difference Kafka's DelayedFetch counts (LogOffsetMetadata.positionDiff)."""

    @abc.abstractmethod
    def delete_records_before(self, offset: int) -> None:
        """Move the log start offset to ``offset`` (DeleteRecords); whole segments below it may be dropped."""

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (follower truncation). ``offset`` must be a batch boundary."""

    @abc.abstractmethod
    def truncate_fully_and_start_at(self, offset: int, log_start: int | None = None) -> None:
        """Drop every batch and epoch entry; the log ends at ``offset`` and starts there, or at ``log_start`` when
        given (Kafka's UnifiedLog.truncateFullyAndStartAt(newOffset, logStartOffsetOpt): a follower whose log
        ends below the leader's log start; with ``log_start`` above ``offset`` the next append must cover it)."""

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """Earliest offset whose batch max timestamp is >= ``timestamp_ms`` (ListOffsets by time), or None."""

    @abc.abstractmethod
    def max_timestamp(self) -> TimestampOffset | None:
        """Largest timestamp in the log and its batch's last offset (ListOffsets MAX_TIMESTAMP, KIP-734)."""

    @abc.abstractmethod
    def epoch_entries(self) -> list[EpochEntry]:
        """Leader epoch cache: (epoch, first offset with that epoch), ascending (OffsetForLeaderEpoch)."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers (Kafka's LeaderEpochFileCache.endOffsetFor):
        the LEO for the latest epoch; else the largest known epoch <= ``epoch`` with the start offset of the
        first larger one; ``epoch`` itself with the first entry's start when it is below every known epoch;
        (-1, -1) when ``epoch`` is -1 or above every known epoch."""
        entries = self.epoch_entries()
        if epoch < 0 or not entries or epoch > entries[-1].epoch:
            return (-1, -1)
        if epoch == entries[-1].epoch:
            return (epoch, self.log_end_offset)
        floor = None
        for e in entries:
            if e.epoch > epoch:
                return (floor.epoch if floor is not None else epoch, e.start_offset)
            floor = e
        raise AssertionError("unreachable: epoch < latest epoch has a higher entry")

    def assign_epoch(self, epoch: int, start_offset: int) -> None:  # noqa: B027 - logs without a cache ignore it
        """A new leader epoch starts at ``start_offset`` (Kafka's maybeAssignEpochStartOffset at makeLeader), so
        OffsetForLeaderEpoch answers for it before the first append in that epoch."""

    def flush(self) -> None:  # noqa: B027 - optional hook, a no-op for memory
        """Make appended data durable (no-op for memory)."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op for memory
        """Release files; the log is unusable afterwards."""
