"""A partition replica on one broker: its log, leadership, ISR, high watermark, follower states.

Kafka's rules this models (names from Apache Kafka's ``Partition``, ``Replica`` and ``UnifiedLog``):
- Leader: HW = min LEO over the (maximal) ISR, never backwards (``Partition.maybeIncrementLeaderHW``), and not
  advanced while the ISR is smaller than min.insync.replicas (KAFKA-15583).
- Leader: each follower's fetch records its LEO and caught-up time (``Replica.updateFetchStateOrThrow``); a
  follower not caught up for replica.lag.time.max.ms leaves the ISR (``maybeShrinkIsr``/``getOutOfSyncReplicas``),
  one that reaches the HW in the current epoch joins it (``maybeExpandIsr``/``isFollowerInSync``); both changes go
  through the controller (AlterPartition) and apply when it answers.
- Follower: appends the leader's batches as they are, HW = min(leader HW, own LEO); truncates by leader epoch.
- Consumers read up to the HW (read_uncommitted) or the last stable offset (read_committed: min(HW, the first
  offset of the earliest open or not yet replicated transaction), UnifiedLog.lastStableOffset), followers up to
  the LEO (``FetchIsolation``); a read below the log start or above the LEO is OFFSET_OUT_OF_RANGE; between the
  readable end and the LEO it is empty. A read_committed read carries the aborted transactions overlapping it.
- Transaction markers (control batches) are appended as leader by WriteTxnMarkers (``write_marker``); the log's
  producer state completes the transaction (``log/producer_state.py``).
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


class AppendOrigin(IntEnum):
    """Who appends (Kafka's AppendOrigin): a client's Produce, a coordinator (group or transaction state, markers),
    or a follower copying its leader (``append_as_follower``)."""

    CLIENT = 0
    COORDINATOR = 1
    REPLICATION = 2


class MarkerAppend(NamedTuple):
    """A COMMIT/ABORT marker to append as leader (``write_marker``'s arguments but the clock)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int = 0     # WriteTxnMarkers v2 (KIP-1228): 2 for a transaction version 2 marker


class ProduceResult(NamedTuple):
    error: int
    base_offset: int = -1
    log_append_time: int = -1
    error_message: str | None = None


class ReadInfo(NamedTuple):
    """One partition's read (Kafka's LogReadInfo): records or an error, the offsets to report, and for a fetch
    whose last fetched epoch disagrees with this log the (epoch, end offset) to truncate to instead of records."""

    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    follower_updated: bool = False        # a follower's fetch position was recorded (updateFollowerFetchState)
    aborted: list | None = None           # read_committed: [(producer id, first offset)]; None otherwise


@dataclass
class ReplicaState:
    """The leader's view of one follower (Kafka's ``Replica``/``ReplicaState``)."""

    leo: int = -1                  # -1: unknown until the follower's first fetch to this leader
    last_fetch_ms: float = 0.0
    last_caught_up_ms: float = 0.0
    last_fetch_leader_leo: int = 0

    def is_caught_up(self, leader_leo: int, now_ms: float, lag_ms: float) -> bool:
        """ReplicaState.isCaughtUp: at the leader's log end (an idle follower is caught up however long ago it
        fetched), or caught up within replica.lag.time.max.ms."""
        return self.leo == leader_leo or now_ms - self.last_caught_up_ms <= lag_ms


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
        self.leader_epoch_start_offset: int | None = None   # the LEO when this replica became leader (makeLeader)
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
        self.fault_record_diverging = False     # replication.record_diverging_fetch fault switch
        self.fault_keep_epoch_at_end = False    # replication.keep_epoch_at_log_end fault switch
        self.fault_cap_start_at_end = False     # replication.cap_start_at_log_end fault switch
        self.fault_unchecked_epoch = False      # fetch.last_fetched_epoch_unchecked fault switch
        self.fault_min_isr_not_capped = False   # isr.min_isr_not_capped fault switch
        self.fault_idle_follower_lags = False   # isr.idle_follower_lags fault switch
        self.fault_lso_is_hw = False            # txn.lso_is_hw fault switch
        self.fault_no_aborted_list = False      # txn.no_aborted_list fault switch
        self.fault_markers_leader_only = False  # txn.markers_leader_only fault switch
        self.fault_lso_below_log_start = False  # txn.lso_below_log_start fault switch
        self.fault_tv2_marker_as_tv1 = False    # txn.tv2_marker_epoch_as_tv1 fault switch
        self.fault_ignore_min_insync = False    # produce.ignore_min_insync fault switch (client appends only)
        # Set by the replica manager: the clock, replica.lag.time.max.ms and whether a broker may join the ISR
        # (registered and unfenced), for the HW's wait on followers about to join the ISR.
        self.now_ms: Callable[[], float] = lambda: 0.0
        self.lag_ms: float = 30_000
        self.isr_eligible: Callable[[int], bool] = lambda r: True

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

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, replication factor): a min ISR the replicas could never reach counts as all of
        them (Kafka >= 3.7, Partition.effectiveMinIsr, KAFKA-15583); under the isr.min_isr_not_capped switch the
        setting as it is."""
        return self.min_isr if self.fault_min_isr_not_capped else min(self.min_isr, len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        """Partition.isUnderMinIsr: the committed ISR (not the maximal one) is below the effective min ISR."""
        return len(self.isr) < self.effective_min_isr

    @property
    def hw_behind_epoch_start(self) -> bool:
        """A fresh leader whose HW has not yet reached the start of its epoch: the offsets it would answer a client
        may be below ones the previous leader already answered (Partition.fetchOffsetForTimestamp)."""
        start = self.leader_epoch_start_offset
        return self.is_leader and start is not None and start > self.hw

    def end_offset_for(self, isolation: FetchIsolation) -> int:
        if isolation == FetchIsolation.LOG_END:
            return self.log.log_end_offset
        if isolation == FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.hw

    @property
    def last_stable_offset(self) -> int:
        """UnifiedLog.lastStableOffset: the first offset of the earliest transaction that is open or whose marker the
        HW has not passed, never above the HW; the HW when there is none. Never below the log start either
        (maybeIncrementFirstUnstableOffset): DeleteRecords may remove an open transaction's first records, and an
        LSO below the log start is an offset no consumer can fetch."""
        if self.fault_lso_is_hw:
            return self.hw
        first = self.log.producer_state.first_unstable_offset(self.hw)
        if first is None:
            return self.hw
        if not self.fault_lso_below_log_start:
            first = max(first, self.log.log_start_offset)
        return min(first, self.hw)

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) when a fetch's last fetched epoch disagrees with our log (KIP-320/KIP-595): the
        largest epoch we know <= it ended before the fetch offset, or is older. (-1, -1) when we cannot place it
        (above every epoch we know: Kafka's UNDEFINED epoch end offset), which a fetch answers OFFSET_OUT_OF_RANGE."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            return (-1, -1)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return (epoch, end)
        return None

    def _changed(self, kind: str = "state") -> None:
        self.on_change(self, kind)

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the maximal ISR and the caught-up followers about to join it; never backwards
        (Partition.maybeIncrementLeaderHW); held while the committed ISR is below the effective min ISR
        (KAFKA-15583: isUnderMinIsr)."""
        if not self.is_leader:
            return False
        isr = self.maximal_isr
        if self.hw_respects_min_isr and self.under_min_isr:
            return False
        leader_leo = self.log.log_end_offset
        leos = [leader_leo if r == self.node_id or self.fault_hw_is_leader_leo
                else self.remote.get(r, ReplicaState()).leo for r in isr]
        if not self.fault_hw_is_leader_leo:
            # shouldWaitForReplicaToJoinIsr: a caught-up, eligible follower outside the ISR is about to join it;
            # the HW waits for it too, so it does not join with records below the HW it lacks.
            now = self.now_ms()
            leos += [st.leo for r, st in sorted(self.remote.items()) if r not in isr
                     and st.is_caught_up(leader_leo, now, self.lag_ms) and self.isr_eligible(r)]
        new = min(leos) if leos else leader_leo
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
            # A new leader knows nothing of its followers yet (LEO unknown): those in the ISR count as caught up
            # now, the others as never caught up, so they hold no HW back (Replica.resetReplicaState).
            self.remote = {r: ReplicaState(-1, 0.0, now_ms if r in isr else 0.0, -1)
                           for r in replicas if r != self.node_id}
            self.leader_epoch_start_offset = self.log.log_end_offset
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
        self.leader_epoch_start_offset = None
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
        """Partition.getOutOfSyncReplicas: ISR followers neither at the leader's log end nor caught up within
        replica.lag.time.max.ms (isFollowerOutOfSync)."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        leader_leo = self.log.log_end_offset
        return [r for r in self.isr if r != self.node_id
                and not self.remote.get(r, ReplicaState(-1, now_ms, now_ms)).is_caught_up(
                    -2 if self.fault_idle_follower_lags else leader_leo, now_ms, lag_ms)]

    # -- follower ---------------------------------------------------------------------------------------------

    def append_as_follower(self, data: bytes, leader_hw: int, leader_log_start: int) -> None:
        """Append the leader's batches as they are (Partition.appendRecordsToFollowerOrFutureReplica); then HW =
        min(leader HW, own LEO), up or down (ReplicaFetcherThread.processPartitionData)."""
        if data:
            self._maybe_start_at_batch(data)
            self.log.producer_state.skip_markers = self.fault_markers_leader_only
            try:
                self.log.append_replica(data)      # the log keeps producer state from these batches too
            finally:
                self.log.producer_state.skip_markers = False
        if self.log.log_start_offset < leader_log_start <= self.log.log_end_offset:
            self.log.delete_records_before(leader_log_start)
        # UnifiedLog.maybeUpdateHighWatermark: the leader's HW within [log start, LEO], even when that is lower
        # than ours (a new leader's HW may lag the old one's).
        new_hw = max(min(leader_hw, self.log.log_end_offset), self.log.log_start_offset)
        moved = new_hw != self.hw
        if moved:
            self.hw = new_hw
        if moved or data:
            self._changed()

    def _maybe_start_at_batch(self, data: bytes) -> None:
        """An empty log whose start is inside the leader's first batch (DeleteRecords cut the leader's log mid-batch;
        the leader serves the whole batch) starts at that batch's base instead, keeping its log start (Kafka's
        doAppendRecordsToFollowerOrFutureReplica on UnexpectedAppendOffsetException: truncateFullyAndStartAt the
        batch's first offset with the current log start)."""
        start, end = self.log.log_start_offset, self.log.log_end_offset
        first = next(B.iter_batches(data, strict=False), None)
        if start == end and first is not None and first[1].base_offset < end < first[1].next_offset:
            self.log.truncate_fully_and_start_at(first[1].base_offset, log_start=start)

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (truncation by leader epoch, KIP-101/KIP-279); the log rebuilds
        its producer state as of ``offset``. Always through the log, as Kafka's Partition.truncateTo: at or past
        the LEO the log still drops an epoch-cache entry at its end."""
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
            if self.fault_truncation_forgets_producers:       # the old bug, on purpose
                self.log.producer_state.truncate_fully_and_start_at(offset)
            self.hw = min(self.hw, offset)
            self._changed()
        elif not self.fault_keep_epoch_at_end:
            self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The follower's log ends below the leader's log start: everything here is stale, start over empty at
        ``offset`` with the HW there (Kafka's Partition/UnifiedLog.truncateFullyAndStartAt)."""
        if self.fault_cap_start_at_end:          # the defect of issue 18 item 3, on purpose
            self.log.delete_records_before(offset)
            self.hw = offset
            return
        self.log.truncate_fully_and_start_at(offset)          # producer state included
        self.hw = offset
        self._changed()

    # -- produce ----------------------------------------------------------------------------------------------

    def append_as_leader(self, data: bytes, header: B.BatchHeader | None, now_ms: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT, required_acks: int = 1,
                         marker: MarkerAppend | None = None) -> ProduceResult:
        """Partition.appendRecordsToLeader: append one validated batch (or, with ``marker``, a transaction marker)
        as leader; advance the HW; wake watchers. Refused before anything is written: not the leader
        (NOT_LEADER_OR_FOLLOWER), or acks=all with an ISR below the effective min.insync.replicas
        (NOT_ENOUGH_REPLICAS: Kafka checks this for every origin that appends as leader, CLIENT and COORDINATOR).
        ``origin`` (Kafka's AppendOrigin): CLIENT batches are checked against the producer's sequences (a duplicate
        answers its original offset); COORDINATOR batches (a transactional offset commit, a marker) only by the
        producer epoch."""
        if not self.is_leader:
            return ProduceResult(E.NotLeaderForPartitionError.errno)
        if required_acks == -1 and self.under_min_isr and \
                not (origin == AppendOrigin.CLIENT and self.fault_ignore_min_insync):
            return ProduceResult(E.NotEnoughReplicasError.errno, error_message=(
                f"ISR {sorted(self.isr)} smaller than min.insync.replicas {self.effective_min_isr}"))
        if marker is not None:
            return self.write_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                     marker.commit, now_ms, marker.transaction_version)
        assert header is not None, "a batch append needs its validated header"
        if origin == AppendOrigin.COORDINATOR and header.producer_id >= 0:
            err = self.log.producer_state.check_marker(header.producer_id, header.producer_epoch)
            if err:
                return ProduceResult(err)
        elif header.producer_id >= 0:
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

    def fetch_records(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, current_leader_epoch: int,
                      max_bytes: int, isolation: FetchIsolation, min_one: bool, now_ms: float,
                      update_fetch_state: bool = True) -> ReadInfo:
        """Kafka's Partition.fetchRecords: the leader's read for one fetched partition. A follower (replica id >= 0)
        must be a replica of this partition. A last fetched epoch (v12+, from a consumer or a follower) is checked
        against this log first (readRecords): one this log cannot place (above every epoch it knows) is
        OFFSET_OUT_OF_RANGE, as is a fetch below the log start; a diverging one is answered with the diverging
        epoch instead of records (KIP-320). Only a follower read that
        succeeded without a diverging epoch records its fetch offset as its LEO (``updateFetchState &&
        !divergingEpoch.isPresent``); the read a completed DelayedFetch makes does not (``update_fetch_state``
        False: Kafka's readFromPurgatory). The caller decides about the ISR when ``follower_updated``."""
        if self.deleted:
            return ReadInfo(E.UnknownTopicOrPartitionError.errno)
        err = self.check_leader_epoch(current_leader_epoch)
        if err:
            return ReadInfo(err)
        if not self.is_leader:
            return ReadInfo(E.NotLeaderForPartitionError.errno)
        if replica_id >= 0 and (replica_id not in self.replicas or replica_id == self.node_id):
            # followerReplicaOrThrow: not a replica in this epoch (yet); the follower retries.
            return ReadInfo(E.UnknownLeaderEpochError.errno if current_leader_epoch >= 0
                            else E.NotLeaderForPartitionError.errno)
        # readRecords: a last fetched epoch (v12+, consumers and followers alike) is checked before reading.
        div = None
        if last_fetched_epoch >= 0 and not (replica_id < 0 and self.fault_unchecked_epoch):
            div = self.diverging_epoch(fetch_offset, last_fetched_epoch)
            if not self.fault_unchecked_epoch and (div == (-1, -1) or fetch_offset < self.log.log_start_offset):
                # an epoch this log cannot place (UNDEFINED end offset), or an offset below the log start
                return ReadInfo(E.OffsetOutOfRangeError.errno)
        if div is not None:
            recorded = (replica_id >= 0 and self.fault_record_diverging and update_fetch_state
                        and 0 <= fetch_offset <= self.log.log_end_offset)
            if recorded:
                self.update_follower_fetch(replica_id, fetch_offset, now_ms)
            return ReadInfo(E.NoError.errno, b"", self.hw, self.log.log_start_offset, self.last_stable_offset, div,
                            recorded)
        info = self.read(fetch_offset, max_bytes, isolation, min_one, current_leader_epoch)
        if replica_id < 0 or info.error or not update_fetch_state:
            return info
        self.update_follower_fetch(replica_id, fetch_offset, now_ms)
        return info._replace(follower_updated=True)

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
        lso = self.last_stable_offset
        common = dict(high_watermark=self.hw, log_start_offset=log.log_start_offset, last_stable_offset=lso)
        if fetch_offset < log.log_start_offset or fetch_offset > log.log_end_offset:
            return ReadInfo(E.OffsetOutOfRangeError.errno, **common)
        committed = isolation == FetchIsolation.TXN_COMMITTED
        end = self.end_offset_for(isolation)
        if fetch_offset >= end:
            if self.hw_report != "exact":
                common["high_watermark"] = self._faulty_hw(b"", fetch_offset)
            return ReadInfo(E.NoError.errno, aborted=[] if committed else None, **common)
        res: ReadResult = log.read(fetch_offset, max_bytes, end, min_one)
        if self.hw_report != "exact":
            common["high_watermark"] = self._faulty_hw(res.data, fetch_offset)
        aborted = None
        if committed:
            aborted = [] if self.fault_no_aborted_list else self.aborted_between(fetch_offset, res.data)
        return ReadInfo(E.NoError.errno, res.data, aborted=aborted, **common)

    def aborted_between(self, fetch_offset: int, data: bytes) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping a read from ``fetch_offset`` up to
        the end of the batches it returned (LocalLog.addAbortedTransactions: upper bound = the offset after them)."""
        upper = self.log.log_end_offset
        for _pos, h in B.iter_batches(data, strict=False):
            upper = h.next_offset
        return [(a.producer_id, a.first_offset)
                for a in self.log.producer_state.collect_aborted(fetch_offset, upper)]

    def write_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                     now_ms: int, transaction_version: int = 0) -> ProduceResult:
        """Append a COMMIT/ABORT marker as leader (ReplicaManager.appendRecords with origin COORDINATOR and the
        marker's transaction version): an epoch older than the producer's here is INVALID_PRODUCER_EPOCH, and with
        transaction version 2 an equal one too while a transaction is open here (KIP-1228: the marker of a
        transaction ending now carries a bumped epoch); a coordinator epoch older than the producer's last marker's
        here is TRANSACTION_COORDINATOR_FENCED; the log's producer state completes the transaction, which may move
        the LSO (parked read_committed fetches are woken)."""
        if not self.is_leader:
            return ProduceResult(E.NotLeaderForPartitionError.errno)
        if self.fault_tv2_marker_as_tv1:
            transaction_version = 0
        err = self.log.producer_state.check_marker(producer_id, producer_epoch, transaction_version,
                                                   coordinator_epoch)
        if err:
            return ProduceResult(err)
        data = B.build_control_batch(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
        info = self.log.append(data, self.leader_epoch)
        self.maybe_advance_hw()
        self._changed("append")
        return ProduceResult(E.NoError.errno, info.base_offset)

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
