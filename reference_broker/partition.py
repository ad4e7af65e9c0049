"""A partition replica on one broker: its log, leadership, ISR, high watermark, follower states.

Kafka's rules this models (names from Apache Kafka's ``Partition``, ``Replica`` and ``UnifiedLog``):
- Leader: HW = min LEO over the (maximal) ISR, never backwards (``Partition.maybeIncrementLeaderHW``), and not
  advanced while the ISR is smaller than min.insync.replicas (KAFKA-15583).
- Leader: each follower's fetch records its LEO and caught-up time (``Replica.updateFetchStateOrThrow``); a
  follower not caught up for replica.lag.time.max.ms leaves the ISR (``maybeShrinkIsr``/``getOutOfSyncReplicas``),
  one that reaches the HW in the current epoch joins it (``maybeExpandIsr``/``isFollowerInSync``); both changes go
  through the controller (AlterPartition) and apply when it answers.
- Follower: appends the leader's batches as they are, HW = min(leader HW, own LEO); truncates by leader epoch.
- Consumers read up to the HW, followers up to the LEO (``FetchIsolation``); a read below the log start or above
  the LEO is OFFSET_OUT_OF_RANGE; between HW and LEO it is empty.
- When the readable end or the ISR moves, parked fetches and acks=all produces keyed by this topic-partition are
  tried (``Partition.tryCompleteDelayedRequests``), through the ``on_change`` callback the replica manager gives.
- Idempotent producers: the log owns their state (``log.producer_state``, Kafka's ProducerStateManager in
  UnifiedLog), so appends as leader or follower, truncation and restarts keep it; the leader checks a client batch
  against it before appending (a duplicate answers its original offset, UnifiedLog.analyzeAndValidateProducerState).

Threading rule: used only on the broker's event loop.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from kafka import errors as E

from .log import batch as B
from .log.base import Log, ReadResult
from .log.file import RecordBatchTooLarge
from .log.producer_state import NUM_BATCHES_TO_RETAIN, ProducerStateError


class FetchIsolation(IntEnum):
    """How far a fetch may read (Kafka's FetchIsolation)."""

    LOG_END = 0          # followers read to the LEO
    HIGH_WATERMARK = 1   # consumers, read_uncommitted
    TXN_COMMITTED = 2    # consumers, read_committed: the last stable offset


class ProduceResult(NamedTuple):
    error: int
    base_offset: int = -1
    log_append_time: int = -1
    error_message: str | None = None


class ReadInfo(NamedTuple):
    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclass
class ReplicaState:
    """The leader's view of one follower (Kafka's ``Replica``/``ReplicaState``)."""

    leo: int = 0
    last_fetch_ms: float = 0.0
    last_caught_up_ms: float = 0.0
    last_fetch_leader_leo: int = 0


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log, *, node_id: int,
                 replicas: list[int], leader_id: int, leader_epoch: int = 0, isr: list[int] | None = None,
                 partition_epoch: int = 0, hw: int | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.replicas = list(replicas)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr: list[int] = list(replicas if isr is None else isr)
        self.pending_isr: list[int] | None = None     # an AlterPartition in flight (Kafka's PendingPartitionChange)
        self.remote: dict[int, ReplicaState] = {}
        # A single-replica log is all committed; otherwise the checkpointed HW (bounded by the LEO), else 0.
        if hw is None:
            hw = log.log_end_offset if self.replicas == [node_id] else 0
        self.hw = min(hw, log.log_end_offset)
        self.min_isr = 1                               # the topic's min.insync.replicas (set by the replica manager)
        self.deleted = False
        # Wakes the delayed fetches and produces keyed by this partition; ``kind`` is "append" for a leader append
        # (the fetch.no_wake_on_append fault switch skips those), else "state".
        self.on_change: Callable[[Partition, str], None] = lambda p, kind: None
        self.hw_respects_min_isr = True     # False only under the isr.hw_ignores_min_isr fault switch
        self.hw_report = "exact"            # "minus_one" / "read_end" only under fetch.hw_off_by_one / hw_is_read_end
        self.fault_hw_is_leader_leo = False      # isr.hw_is_leader_leo fault switch
        self.fault_truncate_to_hw = False        # replication.truncate_to_hw fault switch
        self.fault_latest_is_leo = False    # True only under the list_offsets.latest_is_leo fault switch
        self.duplicate_window = NUM_BATCHES_TO_RETAIN   # 1 only under the produce.duplicate_window_one fault switch
        self.fault_truncation_forgets_producers = False  # replication.truncation_forgets_producers fault switch

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.index)

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id and not self.deleted

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW waits for: the committed ISR plus pending additions (Kafka's maximalIsr)."""
        if self.pending_isr is None:
            return self.isr
        return sorted(set(self.isr) | set(self.pending_isr))

    def end_offset_for(self, isolation: FetchIsolation) -> int:
        if isolation == FetchIsolation.LOG_END:
            return self.log.log_end_offset
        return self.hw  # no transactions: the last stable offset equals the HW

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) when a follower's last fetched epoch disagrees with our log (KIP-320/KIP-595)."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch != last_fetched_epoch or end < fetch_offset:
            return (epoch, end)
        return None

    def _changed(self, kind: str = "state") -> None:
        self.on_change(self, kind)

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the maximal ISR; never backwards (Partition.maybeIncrementLeaderHW); held while the
        ISR is below min.insync.replicas and the replicas could satisfy it (KAFKA-15583)."""
        if not self.is_leader:
            return False
        isr = self.maximal_isr
        if (self.hw_respects_min_isr and len(isr) < self.min_isr <= len(self.replicas)):
            return False
        leos = [self.log.log_end_offset if r == self.node_id or self.fault_hw_is_leader_leo
                else self.remote.get(r, ReplicaState()).leo for r in isr]
        new = min(leos) if leos else self.log.log_end_offset
        if new > self.hw:
            self.hw = new
            return True
        return False

    def delete_records_before(self, offset: int) -> None:
        """Move the log start offset forward (DeleteRecords); parked fetches below it must answer at once."""
        if offset > self.log.log_start_offset:
            self.log.delete_records_before(offset)
            self._changed()

    def mark_deleted(self) -> None:
        self.deleted = True
        self._changed()

    # -- leadership changes (Partition.makeLeader / makeFollower) ---------------------------------------------

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
                    now_ms: float) -> None:
        new_epoch = leader_epoch != self.leader_epoch or self.leader_id != self.node_id
        was_follower = self.leader_id not in (self.node_id, -2)
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        if new_epoch and self.fault_truncate_to_hw and was_follower and self.hw < self.log.log_end_offset:
            self.log.truncate_to(self.hw)          # the pre-KIP-101 bug, on purpose
        if new_epoch:
            # A new leader knows nothing of its followers yet: they count as caught up now, at LEO unknown (0).
            self.remote = {r: ReplicaState(0, now_ms, now_ms, 0) for r in replicas if r != self.node_id}
            self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        self.maybe_advance_hw()
        self._changed()

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.remote = {}
        self.hw = min(self.hw, self.log.log_end_offset)
        self._changed()          # parked consumer fetches and produces here must learn we no longer lead

    def apply_isr(self, isr: list[int], partition_epoch: int) -> None:
        """The controller committed an ISR change (AlterPartition answer or a metadata record)."""
        if partition_epoch < self.partition_epoch:
            return
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.maybe_advance_hw()
        self._changed()

    # -- leader: follower fetch state and the ISR -------------------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> None:
        """Replica.updateFetchStateOrThrow: the fetch offset is the follower's LEO; it is caught up if it reached
        the leader's LEO now, or the LEO the leader had at its previous fetch."""
        st = self.remote.setdefault(replica_id, ReplicaState(0, now_ms, now_ms, 0))
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, now_ms)
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.leo = fetch_offset
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms
        if self.maybe_advance_hw():
            self._changed()

    def isr_expansion_candidate(self, replica_id: int) -> bool:
        """Partition.isFollowerInSync: not in the ISR, LEO at or past the HW and the current epoch's start."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return False
        st = self.remote.get(replica_id)
        if st is None or replica_id not in self.replicas:
            return False
        epoch_start = next((e.start_offset for e in reversed(self.log.epoch_entries())
                            if e.epoch == self.leader_epoch), 0)
        return st.leo >= self.hw and st.leo >= epoch_start

    def out_of_sync_replicas(self, now_ms: float, lag_ms: int) -> list[int]:
        """Partition.getOutOfSyncReplicas: ISR followers not caught up within replica.lag.time.max.ms."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        return [r for r in self.isr if r != self.node_id
                and now_ms - self.remote.get(r, ReplicaState(0, now_ms, now_ms)).last_caught_up_ms > lag_ms]

    # -- follower ---------------------------------------------------------------------------------------------

    def append_as_follower(self, data: bytes, leader_hw: int, leader_log_start: int) -> None:
        """Append the leader's batches as they are; HW = min(leader HW, own LEO) (Partition.appendRecordsToFollower)."""
        if data:
            self.log.append_replica(data)          # the log keeps producer state from these batches too
        if self.log.log_start_offset < leader_log_start <= self.log.log_end_offset:
            self.log.delete_records_before(leader_log_start)
        new_hw = min(leader_hw, self.log.log_end_offset)
        moved = new_hw > self.hw
        if moved:
            self.hw = new_hw
        if moved or data:
            self._changed()

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (truncation by leader epoch, KIP-101/KIP-279); the log rebuilds
        its producer state as of ``offset``."""
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
            if self.fault_truncation_forgets_producers:       # the old bug, on purpose
                self.log.producer_state.truncate_fully_and_start_at(offset)
            self.hw = min(self.hw, offset)
            self._changed()

    # -- produce ----------------------------------------------------------------------------------------------

    def append_as_leader(self, data: bytes, header: B.BatchHeader, now_ms: int) -> ProduceResult:
        """Append one validated batch; enforce idempotent sequences; advance the HW; wake watchers."""
        if not self.is_leader:
            return ProduceResult(E.NotLeaderForPartitionError.errno)
        if header.producer_id >= 0:
            try:
                duplicate = self.log.producer_state.check_client_batch(header, self.duplicate_window)
            except ProducerStateError as e:
                return ProduceResult(e.errno, error_message=str(e))
            if duplicate is not None:        # a retry of a batch already written: its original offset, no append
                return ProduceResult(E.NoError.errno, duplicate.first_offset)
        try:
            info = self.log.append(data, self.leader_epoch)
        except RecordBatchTooLarge as e:     # larger than a whole segment can hold
            return ProduceResult(E.RecordListTooLargeError.errno, error_message=str(e))
        self.maybe_advance_hw()
        self._changed("append")
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
        err = self.check_leader_epoch(current_leader_epoch)
        if err:
            return ReadInfo(err)
        if not self.is_leader:
            return ReadInfo(E.NotLeaderForPartitionError.errno)
        log = self.log
        common = dict(high_watermark=self.hw, log_start_offset=log.log_start_offset, last_stable_offset=self.hw)
        if fetch_offset < log.log_start_offset or fetch_offset > log.log_end_offset:
            return ReadInfo(E.OffsetOutOfRangeError.errno, **common)
        end = self.end_offset_for(isolation)
        if fetch_offset >= end:
            if self.hw_report != "exact":
                common["high_watermark"] = self._faulty_hw(b"", fetch_offset)
            return ReadInfo(E.NoError.errno, **common)
        res: ReadResult = log.read(fetch_offset, max_bytes, end, min_one)
        if self.hw_report != "exact":
            common["high_watermark"] = self._faulty_hw(res.data, fetch_offset)
        return ReadInfo(E.NoError.errno, res.data, **common)

    def _faulty_hw(self, data: bytes, fetch_offset: int) -> int:
        """The HW a Fetch reports under a fault switch: off by one (the last committed offset instead of the next),
        or the end of the batches this read returned (it then depends on the fetch offset and max bytes)."""
        if self.hw_report == "minus_one":
            return max(0, self.hw - 1)
        end, pos = fetch_offset, 0
        while pos + 27 <= len(data):               # v2 batch: base offset @0, length @8, last offset delta @23
            base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
            end = base + int.from_bytes(data[pos + 23:pos + 27], "big", signed=True) + 1
            pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        return end
