"""A partition's state on one broker: its log, leadership, ISR, high watermark and idempotent-producer state.

Kafka's rules this models (names from Apache Kafka's ``Partition`` and ``UnifiedLog``):
- HW = min LEO over the ISR (``Partition.maybeIncrementLeaderHW``); it never moves backwards on a leader.
- Consumers read up to the HW, followers up to the LEO (``FetchIsolation``).
- A read below the log start offset or above the LEO is OFFSET_OUT_OF_RANGE; between HW and LEO it is empty.
- When the readable end moves, parked fetches are tried (``Partition.tryCompleteDelayedRequests``).

Threading rule: used only on the broker's event loop.
"""
from __future__ import annotations

import asyncio
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from kafka import errors as E

from .log import batch as B
from .log.base import Log, ReadResult
from .log.file import RecordBatchTooLarge
from .purgatory import FetchIsolation

if TYPE_CHECKING:
    from .purgatory import DelayedFetch, FetchPartitionStatus


class ProduceResult(NamedTuple):
    error: int
    base_offset: int = -1
    log_append_time: int = -1
    error_message: str | None = None


@dataclass
class ProducerEntry:
    """Idempotent producer state: epoch and the last few batches' sequences (Kafka's ProducerStateEntry)."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=5))   # (first_seq, last_seq, base, last_offset)


class ReadInfo(NamedTuple):
    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log, *, node_id: int,
                 replicas: list[int], leader_id: int, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.replicas = list(replicas)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr: set[int] = set(replicas)
        self.replica_leos: dict[int, int] = {}
        # A restarted single leader's log is all committed; a replicated partition re-derives HW from followers.
        self.hw = log.log_end_offset if replicas == [node_id] else min(log.log_end_offset, 0)
        self.watchers: set[DelayedFetch] = set()
        self.hw_waiters: list[tuple[int, asyncio.Future]] = []
        self.producers: dict[int, ProducerEntry] = {}
        self.deleted = False
        self.wake_on_append = True          # False only under the fetch.no_wake_on_append fault switch
        self.fault_latest_is_leo = False    # True only under the list_offsets.latest_is_leo fault switch

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id and not self.deleted

    def end_offset_for(self, isolation: FetchIsolation) -> int:
        if isolation == FetchIsolation.LOG_END:
            return self.log.log_end_offset
        return self.hw  # no transactions: the last stable offset equals the HW

    def diverging_epoch(self, st: FetchPartitionStatus) -> tuple[int, int] | None:
        """(epoch, end offset) when a follower's last fetched epoch disagrees with our log (KIP-320/KIP-595)."""
        epoch, end = self.log.end_offset_for_epoch(st.last_fetched_epoch)
        if epoch != st.last_fetched_epoch or end < st.fetch_offset:
            return (epoch, end)
        return None

    def _notify(self) -> None:
        """The readable end moved (or the partition went away): try parked fetches and acks=all produces."""
        for w in list(self.watchers):
            w.try_complete()
        if self.hw_waiters:
            still = []
            for offset, fut in self.hw_waiters:
                if fut.done():
                    continue
                if self.hw >= offset or self.deleted:
                    fut.set_result(self.hw)
                else:
                    still.append((offset, fut))
            self.hw_waiters = still

    def _wake_hw_waiters_only(self) -> None:
        watchers, self.watchers = self.watchers, set()
        self._notify()
        self.watchers = watchers

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR; never backwards (Partition.maybeIncrementLeaderHW)."""
        leos = [self.log.log_end_offset if r == self.node_id else self.replica_leos.get(r, 0) for r in self.isr]
        new = min(leos) if leos else self.log.log_end_offset
        if new > self.hw:
            self.hw = new
            return True
        return False

    def delete_records_before(self, offset: int) -> None:
        """Move the log start offset forward (DeleteRecords); parked fetches below it must answer at once."""
        if offset > self.log.log_start_offset:
            self.log.delete_records_before(offset)
            self._notify()

    def mark_deleted(self) -> None:
        self.deleted = True
        self._notify()

    async def wait_for_hw(self, offset: int, timeout_s: float) -> bool:
        """acks=all: wait until the HW reaches ``offset`` (Kafka's DelayedProduce); False on timeout."""
        if self.hw >= offset:
            return True
        fut = asyncio.get_running_loop().create_future()
        self.hw_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        return self.hw >= offset and not self.deleted

    # -- produce ----------------------------------------------------------------------------------------------

    def append_as_leader(self, data: bytes, header: B.BatchHeader, now_ms: int) -> ProduceResult:
        """Append one validated batch; enforce idempotent sequences; advance the HW; wake watchers."""
        if not self.is_leader:
            return ProduceResult(E.NotLeaderForPartitionError.errno)
        pid = header.producer_id
        entry = None
        if pid >= 0:
            entry = self.producers.get(pid)
            first_seq = header.base_sequence
            last_seq = first_seq + header.last_offset_delta
            if entry is not None:
                if header.producer_epoch < entry.epoch:
                    return ProduceResult(E.InvalidProducerEpochError.errno,
                                         error_message=f"epoch {header.producer_epoch} < current {entry.epoch}")
                if header.producer_epoch > entry.epoch:
                    if first_seq != 0:
                        return ProduceResult(E.OutOfOrderSequenceNumberError.errno,
                                             error_message=f"new epoch must start at sequence 0, got {first_seq}")
                    entry = None
                else:
                    for f, last, base, _lo in entry.batches:
                        if f == first_seq and last == last_seq:   # a retry of a batch already written
                            return ProduceResult(E.NoError.errno, base)
                    expected = (entry.batches[-1][1] + 1) & 0x7FFFFFFF if entry.batches else first_seq
                    if first_seq != expected:
                        return ProduceResult(E.OutOfOrderSequenceNumberError.errno,
                                             error_message=f"expected sequence {expected}, got {first_seq}")
        try:
            info = self.log.append(data, self.leader_epoch)
        except RecordBatchTooLarge as e:     # larger than a whole segment can hold
            return ProduceResult(E.RecordListTooLargeError.errno, error_message=str(e))
        if pid >= 0:
            if entry is None:
                entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
            entry.batches.append((header.base_sequence, header.base_sequence + header.last_offset_delta,
                                  info.base_offset, info.last_offset))
        self.replica_leos[self.node_id] = self.log.log_end_offset
        self.maybe_advance_hw()
        if self.wake_on_append:
            self._notify()
        else:
            self._wake_hw_waiters_only()
        return ProduceResult(E.NoError.errno, info.base_offset)

    # -- read -------------------------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        """KIP-320: a request's epoch older than ours is FENCED, newer is UNKNOWN (we have not seen it yet)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return E.NoError.errno
        if current_leader_epoch < self.leader_epoch:
            return E.FencedLeaderEpochError.errno
        return E.UnknownLeaderEpochError.errno

    def read(self, fetch_offset: int, max_bytes: int, isolation: FetchIsolation, min_one: bool,
             current_leader_epoch: int = -1) -> ReadInfo:
        if self.deleted:
            return ReadInfo(E.UnknownTopicOrPartitionError.errno)
        if not self.is_leader:
            return ReadInfo(E.NotLeaderForPartitionError.errno)
        err = self.check_leader_epoch(current_leader_epoch)
        if err:
            return ReadInfo(err)
        log = self.log
        common = dict(high_watermark=self.hw, log_start_offset=log.log_start_offset, last_stable_offset=self.hw)
        if fetch_offset < log.log_start_offset or fetch_offset > log.log_end_offset:
            return ReadInfo(E.OffsetOutOfRangeError.errno, **common)
        end = self.end_offset_for(isolation)
        if fetch_offset >= end:
            return ReadInfo(E.NoError.errno, **common)
        res: ReadResult = log.read(fetch_offset, max_bytes, end, min_one)
        return ReadInfo(E.NoError.errno, res.data, **common)
