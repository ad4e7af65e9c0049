"""ReplicaManager: the partitions one broker hosts, the reads and delayed operations on them, and their ISR upkeep.

Apache Kafka's ``ReplicaManager`` in small: it applies metadata changes (``applyDelta``: become leader, become
follower, stop and delete replicas), owns the fetch and produce purgatories (keyed by topic-partition), and is the
one home of the read path: ``fetch_messages`` (Kafka's ``fetchMessages``) reads every fetched partition through
``Partition.fetch_records`` (which records a follower's fetch position), decides whether to answer now or park a
DelayedFetch, and reads again when that completes; the Fetch handler only decodes and encodes. It is also the one
home of the write path: ``append_records`` (Kafka's ``appendRecords``) appends every entry through
``Partition.append_as_leader`` (``appendRecordsToLeader``: leadership and min.insync.replicas before the append,
origin CLIENT or COORDINATOR) and waits for acks=all in the produce purgatory (DelayedProduce); Produce,
WriteTxnMarkers and both coordinators' partition writer (``coordinator_writer.py``) all write through it. It shrinks the ISR
of followers that lag more than replica.lag.time.max.ms (``maybeShrinkIsr`` on a timer) and expands it when they
catch up — both through the controller with AlterPartition — and checkpoints the high watermarks
(``replication-offset-checkpoint``) so a restart keeps them.
Every producer.id.expiration.check.interval.ms it drops idle idempotent producers from each log's producer state
(Kafka's per-log PeriodicProducerExpirationCheck).

Threading rule: everything runs on the broker's event loop; timers come from the Clock.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from kafka import errors as E

from .clock import Clock, Timer
from .config import BrokerConfig
from .faults import Faults
from .log.base import Log
from .log.batch import BatchHeader
from .log.memory import MemoryLog
from .log.producer_state import ProducerStateConfig
from .metadata.image import Delta, MetadataImage, PartitionState
from .partition import AppendOrigin, FetchIsolation, MarkerAppend, Partition
from .purgatory import (
    DelayedFetch,
    DelayedProduce,
    FetchParams,
    FetchPartitionStatus,
    MinBytes,
    ProducePartitionStatus,
    Purgatory,
)
from .record_faults import FETCH_SWITCHES, apply_fetch_switches
from .topic_config import topic_setting

log = logging.getLogger("reference_broker.replica_manager")

HW_CHECKPOINT = "replication-offset-checkpoint"
# AlterPartition errors after which Kafka's leader waits for the metadata instead of retrying (UNKNOWN_TOPIC_OR_
# PARTITION, INVALID_REQUEST, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_ID, NEW_LEADER_ELECTED).
AWAIT_METADATA = frozenset({E.UnknownTopicOrPartitionError.errno, E.InvalidRequestError.errno,
                            E.FencedLeaderEpochError.errno, E.InvalidUpdateVersionError.errno,
                            E.UnknownTopicIdError.errno, E.NewLeaderElectedError.errno})
TP = tuple[str, int]
# (partition, new ISR) -> (error, committed PartitionState or None)
AlterIsr = Callable[[Partition, list[int]], Awaitable[tuple[int, "PartitionState | None"]]]


class LogReadResult(NamedTuple):
    """One partition of a Fetch answer, ready to encode (Kafka's LogReadResult): records or an error, the offsets
    to report (-1 with an error, as Kafka's createLogReadResult(e)), or the diverging epoch (KIP-320)."""

    status: FetchPartitionStatus
    error: int
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    aborted: list | None = None           # read_committed: [(producer id, first offset)] (Fetch v4+)


class AppendEntry(NamedTuple):
    """One partition's part of an append: a validated record batch with its header, or a transaction marker."""

    topic: str
    partition: int
    records: bytes = b""
    header: BatchHeader | None = None
    marker: MarkerAppend | None = None

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


class LogAppendResult(NamedTuple):
    """One partition's answer (Kafka's LogAppendResult / PartitionResponse): the error, the batch's first offset
    and the offset after it (what the HW must reach for acks=all), and an error message where there is one."""

    error: int
    base_offset: int = -1
    end_offset: int = -1
    message: str | None = None


class PendingAppend:
    """What ``append_records`` returns: ``results`` hold the local append's outcome at once (what a coordinator
    acts on at the append, as Kafka's callbacks do); ``await wait()`` answers acks=all once each partition's HW
    passed its batch (DelayedProduce), or REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS_AFTER_APPEND /
    NOT_LEADER_OR_FOLLOWER when it did not within the timeout."""

    def __init__(self, rm: ReplicaManager, results: dict[TP, LogAppendResult], acks: int, deadline: float) -> None:
        self.rm = rm
        self.results = results
        self.acks = acks
        self.deadline = deadline

    async def wait(self) -> dict[TP, LogAppendResult]:
        if self.acks != -1:
            return self.results
        waits = [ProducePartitionStatus(tp[0], tp[1], r.end_offset) for tp, r in self.results.items() if not r.error]
        if waits:
            await self.rm.wait_replicated(waits, max(0.0, self.deadline - self.rm.clock.monotonic()))
            for s in waits:
                tp = (s.topic, s.partition_index)
                self.results[tp] = self.results[tp]._replace(error=s.error, message=s.message or None)
        return self.results


class ReplicaManager:
    def __init__(self, node_id: int, config: BrokerConfig, clock: Clock, faults: Faults, data_dir: Path | None,
                 alter_isr: AlterIsr) -> None:
        self.node_id = node_id
        self.config = config
        self.clock = clock
        self.faults = faults
        self.data_dir = data_dir
        self.alter_isr = alter_isr
        self.partitions: dict[TP, Partition] = {}
        self.fetch_purgatory = Purgatory(clock)
        self.produce_purgatory = Purgatory(clock)
        self.image: MetadataImage | None = None
        self.on_leadership: Callable[[Partition, bool], None] = lambda p, leader: None
        self.on_follow: Callable[[], None] = lambda: None          # the follower set changed: fetchers re-plan
        self._hw_checkpoint = self._read_hw_checkpoint()
        self._timers: list[Timer] = []
        self._tasks: set[asyncio.Task] = set()

    # -- lookups ----------------------------------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition | None:
        """The local replica, if this broker hosts it."""
        return self.partitions.get((topic, index))

    def leaders(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def followed(self) -> dict[int, list[Partition]]:
        """Partitions this broker follows, by leader id (what the fetchers fetch)."""
        out: dict[int, list[Partition]] = {}
        for p in self.partitions.values():
            if not p.is_leader and p.leader_id >= 0 and not p.deleted:
                out.setdefault(p.leader_id, []).append(p)
        return out

    # -- delayed operations -----------------------------------------------------------------------------------

    def _on_change(self, p: Partition, kind: str) -> None:
        if kind != "append" or not self.faults.on("fetch.no_wake_on_append"):
            self.fetch_purgatory.check(p.tp)
        self.produce_purgatory.check(p.tp)

    # -- the read path (ReplicaManager.fetchMessages / readFromLocalLog) ---------------------------------------

    async def fetch_messages(self, params: FetchParams) -> list[LogReadResult]:
        """ReplicaManager.fetchMessages: read every partition now; answer at once when max_wait <= 0, the fetch
        names no partitions, min_bytes is met, or a partition failed or diverges; else park a DelayedFetch keyed by
        its partitions and read again when it completes early (Cases A–H) or max_wait passes."""
        faults = self.faults
        if faults.on("fetch.read_past_hw") and params.isolation != FetchIsolation.LOG_END:
            params.isolation = FetchIsolation.LOG_END
        reads = self.read_from_local_log(params)
        min_bytes = MinBytes(params.min_bytes, exclusive=faults.on("fetch.min_bytes_exclusive"),
                             per_partition=faults.on("fetch.min_bytes_per_partition"))
        readable = 0
        for r in reads:
            readable = min_bytes.add(readable, len(r.records))
        errored = any(r.error or r.diverging_epoch is not None for r in reads)
        zero_parks = params.max_wait_ms <= 0 and faults.on("fetch.zero_wait_parks")
        if (params.max_wait_ms <= 0 and not zero_parks) or not params.partitions or min_bytes.met(readable) or \
                errored or faults.on("fetch.ignore_max_wait"):
            return reads
        op = DelayedFetch(params, self.get, min_bytes, min_bytes_uncapped=faults.on("fetch.min_bytes_uncapped"))
        reason = await self.fetch_purgatory.park(op, 2.0 if zero_parks else params.max_wait_ms / 1000)
        return self.read_from_local_log(params, from_purgatory=True, expired=reason == "expired")

    def read_from_local_log(self, params: FetchParams, from_purgatory: bool = False,
                            expired: bool = False) -> list[LogReadResult]:
        """ReplicaManager.readFromLocalLog: partitions in request order with a byte budget that shrinks by what each
        returned, the first batch whole until some partition returned data (KIP-74). ``from_purgatory``: the read
        of a completed DelayedFetch, which does not record a follower's position again (Kafka's
        readFromPurgatory); ``expired``: it completed at max_wait (only the fetch.* fault switches care)."""
        faults = self.faults
        limit = params.max_bytes
        min_one = not faults.on("fetch.no_min_one")
        now_ms = self.clock.monotonic() * 1000
        out: list[LogReadResult] = []
        for st in params.partitions:
            p = self.get(st.topic, st.partition_index) if st.known else None
            if p is None:
                out.append(LogReadResult(st, self._missing_partition_error(st)))
                continue
            offset = st.fetch_offset
            if faults.on("fetch.serve_below_log_start") and offset < p.log.log_start_offset:
                offset = p.log.log_start_offset
            if expired and not params.is_from_follower and faults.on("fetch.expired_at_leo_oor") and \
                    offset == p.log.log_end_offset > p.log.log_start_offset:
                out.append(LogReadResult(st, E.OffsetOutOfRangeError.errno))
                continue
            cap = limit if faults.on("fetch.ignore_partition_max_bytes") else min(st.partition_max_bytes, limit)
            info = p.fetch_records(params.replica_id, offset, st.last_fetched_epoch, st.current_leader_epoch, cap,
                                   params.isolation, min_one, now_ms, update_fetch_state=not from_purgatory)
            if info.follower_updated:
                self._maybe_expand_isr(p, params.replica_id)
            if info.diverging_epoch is not None:
                out.append(LogReadResult(st, 0, b"", info.high_watermark, info.last_stable_offset,
                                         info.log_start_offset, info.diverging_epoch))
                continue
            if info.error == E.OffsetOutOfRangeError.errno and faults.on("fetch.oor_as_empty") and \
                    offset > p.log.log_end_offset:
                out.append(LogReadResult(st, 0, b"", p.hw, p.last_stable_offset, p.log.log_start_offset))
                continue
            if info.error:
                out.append(LogReadResult(st, info.error))
                continue
            records = info.records
            if not params.is_from_follower and faults.enabled & FETCH_SWITCHES:     # clients suite switches only
                records = apply_fetch_switches(faults, records, st.fetch_offset, lambda off, p=p, st=st, one=min_one: p.read(
                    off, st.partition_max_bytes, params.isolation, one, st.current_leader_epoch).records)
            if records:
                min_one = False
                if not faults.on("fetch.max_bytes_per_partition"):
                    limit = max(0, limit - len(records))
            out.append(LogReadResult(st, 0, records, info.high_watermark, info.last_stable_offset,
                                     info.log_start_offset, aborted=info.aborted))
        return out

    def _missing_partition_error(self, st: FetchPartitionStatus) -> int:
        """No local replica: unknown to the cluster (by id for v13+), else not hosted or not led here."""
        if not st.known or self.image is None or self.image.partition(st.topic, st.partition_index) is None:
            return E.UnknownTopicIdError.errno if st.topic_id is not None else E.UnknownTopicOrPartitionError.errno
        return E.NotLeaderForPartitionError.errno

    # -- the write path (ReplicaManager.appendRecords / appendToLocalLog) --------------------------------------

    def leader_or_error(self, topic: str, index: int) -> tuple[Partition | None, int]:
        """ReplicaManager.getPartitionOrException: (local leader replica, 0), else UNKNOWN_TOPIC_OR_PARTITION when
        the cluster has no such partition, NOT_LEADER_OR_FOLLOWER when this broker does not lead it."""
        if self.image is None or self.image.partition(topic, index) is None:
            return None, E.UnknownTopicOrPartitionError.errno
        p = self.get(topic, index)
        if p is None or not p.is_leader:
            return p, E.NotLeaderForPartitionError.errno
        return p, 0

    def append_records(self, entries: list[AppendEntry], acks: int, origin: AppendOrigin,
                       timeout_s: float) -> PendingAppend:
        """ReplicaManager.appendRecords, the one write path of leaders (Produce, the coordinators' partition
        writer, transaction markers): refuse invalid acks (INVALID_REQUIRED_ACKS) and a client's write to an
        internal topic (INVALID_TOPIC_EXCEPTION); append each entry through ``Partition.append_as_leader`` (which
        refuses a partition it does not lead, and acks=all below min.insync.replicas, before writing); with
        acks=all, ``wait()`` on the answer waits until each HW passed its batch, at most ``timeout_s`` from now.
        The appends happen now, synchronously: nothing else runs on the loop between two of them."""
        deadline = self.clock.monotonic() + max(timeout_s, 0.0)
        now_ms = self.clock.wall_ms()
        results: dict[TP, LogAppendResult] = {}
        for e in entries:
            results[e.tp] = self._append_one(e, acks, origin, now_ms)
        return PendingAppend(self, results, acks, deadline)

    def _append_one(self, e: AppendEntry, acks: int, origin: AppendOrigin, now_ms: int) -> LogAppendResult:
        if acks not in (-1, 0, 1):
            return LogAppendResult(E.InvalidRequiredAcksError.errno, message=f"acks={acks} must be -1, 0 or 1")
        if origin == AppendOrigin.CLIENT and self.image is not None and \
                getattr(self.image.topics.get(e.topic), "internal", False):
            return LogAppendResult(E.InvalidTopicError.errno, message=f"cannot append to internal topic {e.topic}")
        p, err = self.leader_or_error(e.topic, e.partition)
        if err:
            return LogAppendResult(err)
        res = p.append_as_leader(e.records, e.header, now_ms, origin, acks, e.marker)
        if res.error:
            return LogAppendResult(res.error, message=res.error_message)
        count = 1 if e.marker is not None else e.header.last_offset_delta + 1
        return LogAppendResult(0, res.base_offset, res.base_offset + count)

    async def wait_replicated(self, statuses: list[ProducePartitionStatus], timeout_s: float) -> None:
        """acks=all: park until each partition's HW passes its batch (DelayedProduce); fills each status' error."""
        op = DelayedProduce(statuses, self.get,
                            ok_after_shrink=self.faults.on("produce.acks_all_ok_after_shrink"))
        await self.produce_purgatory.park(op, timeout_s)

    async def wait_committed(self, topic: str, index: int, offset: int, timeout_s: float) -> int:
        """Wait until one partition's HW reaches ``offset``: 0 or the error (a coordinator's HW wait)."""
        status = ProducePartitionStatus(topic, index, offset)
        await self.wait_replicated([status], timeout_s)
        return status.error

    # -- metadata (ReplicaManager.applyDelta) -----------------------------------------------------------------

    def _open_log(self, topic: str, index: int) -> Log:
        producers = ProducerStateConfig.from_broker_config(
            self.config, load_on_open=not self.faults.on("produce.producer_state_not_loaded"))
        if self.data_dir is None:
            return MemoryLog(clock=self.clock, producer_state=producers)
        from .log.file import FileLog, FileLogConfig

        return FileLog(self.data_dir / f"{topic}-{index}", FileLogConfig.from_broker_config(self.config),
                       clock=self.clock, producer_state=producers)

    def apply_configs(self, image: MetadataImage) -> None:
        """Dynamic configs changed (ConfigRecords, IncrementalAlterConfigs): a topic's min.insync.replicas and the
        broker's log settings (log.segment.bytes, log.flush.*, log.index.interval.bytes) apply to the partitions
        already here at once, as Kafka's DynamicLogConfig / LogManager.updateTopicConfig do; a partition change
        is not needed for them to count."""
        log_config = None
        for (topic, _), p in self.partitions.items():
            t = image.topics.get(topic)
            p.min_isr = topic_setting(t.configs if t else {}, self.config, "min.insync.replicas")
            if self.data_dir is not None and hasattr(p.log, "config"):
                from .log.file import FileLogConfig
                log_config = log_config or FileLogConfig.from_broker_config(self.config)
                p.log.config = log_config

    def apply_delta(self, image: MetadataImage, delta: Delta) -> None:
        self.image = image
        now_ms = self.clock.monotonic() * 1000
        for t in delta.removed_topics:
            for st in t.partitions:
                p = self.partitions.pop((t.name, st.index), None)
                if p is not None:
                    p.mark_deleted()          # parked fetches complete with UNKNOWN_TOPIC_OR_PARTITION (Case C)
                    p.log.close()
                    if self.data_dir is not None:
                        shutil.rmtree(self.data_dir / f"{t.name}-{st.index}", ignore_errors=True)
                    self.on_leadership(p, False)
        for topic, index in sorted(delta.partitions):
            st = image.partition(topic, index)
            if st is None:
                continue
            t = image.topics[topic]
            p = self.partitions.get((topic, index))
            if self.node_id not in st.replicas:
                if p is not None:       # reassigned away (not produced by this controller; kept for safety)
                    self.partitions.pop((topic, index))
                    p.mark_deleted()
                    p.log.close()
                continue
            if p is None:
                lg = self._open_log(topic, index)
                hw = self._hw_checkpoint.get(f"{topic}-{index}")
                p = Partition(topic, index, st.topic_id, lg, node_id=self.node_id, replicas=st.replicas,
                              leader_id=-2, leader_epoch=-1, isr=st.isr, partition_epoch=-1, hw=hw)
                p.on_change = self._on_change
                p.hw_respects_min_isr = not self.faults.on("isr.hw_ignores_min_isr")
                p.hw_report = ("minus_one" if self.faults.on("fetch.hw_off_by_one") else
                               "read_end" if self.faults.on("fetch.hw_is_read_end") else "exact")
                p.fault_hw_is_leader_leo = self.faults.on("isr.hw_is_leader_leo")
                p.fault_truncate_to_hw = self.faults.on("replication.truncate_to_hw")
                p.fault_latest_is_leo = self.faults.on("list_offsets.latest_is_leo")
                if self.faults.on("produce.duplicate_window_one"):
                    p.duplicate_window = 1
                p.fault_truncation_forgets_producers = self.faults.on("replication.truncation_forgets_producers")
                p.fault_record_diverging = self.faults.on("replication.record_diverging_fetch")
                p.fault_keep_epoch_at_end = self.faults.on("replication.keep_epoch_at_log_end")
                p.fault_cap_start_at_end = self.faults.on("replication.cap_start_at_log_end")
                p.fault_unchecked_epoch = self.faults.on("fetch.last_fetched_epoch_unchecked")
                p.fault_min_isr_not_capped = self.faults.on("isr.min_isr_not_capped")
                p.fault_idle_follower_lags = self.faults.on("isr.idle_follower_lags")
                p.fault_lso_is_hw = self.faults.on("txn.lso_is_hw")
                p.fault_no_aborted_list = self.faults.on("txn.no_aborted_list")
                p.fault_markers_leader_only = self.faults.on("txn.markers_leader_only")
                p.fault_lso_below_log_start = self.faults.on("txn.lso_below_log_start")
                p.fault_tv2_marker_as_tv1 = self.faults.on("txn.tv2_marker_epoch_as_tv1")
                ps = lg.producer_state
                ps.fault_index_every_abort = self.faults.on("txn.abort_index_every_marker")
                ps.fault_plain_in_open_txn = self.faults.on("txn.produce_txn_checks_off")
                ps.fault_tv2_any_first_seq = self.faults.on("txn.tv2_any_first_sequence")
                ps.fault_coordinator_epoch_unchecked = self.faults.on("txn.coordinator_epoch_unchecked")
                p.fault_ignore_min_insync = self.faults.on("produce.ignore_min_insync")
                p.now_ms = lambda: self.clock.monotonic() * 1000
                p.lag_ms = self.config["replica.lag.time.max.ms"]
                p.isr_eligible = self._may_join
                self.partitions[(topic, index)] = p
            p.min_isr = topic_setting(t.configs, self.config, "min.insync.replicas")
            was_leader = p.is_leader
            if st.leader == self.node_id:
                if not was_leader or st.leader_epoch != p.leader_epoch:
                    p.make_leader(st.leader_epoch, st.isr, st.replicas, st.partition_epoch, now_ms)
                    self.on_leadership(p, True)
                elif st.partition_epoch > p.partition_epoch:
                    p.apply_isr(st.isr, st.partition_epoch)
            else:
                if was_leader or st.leader != p.leader_id or st.leader_epoch != p.leader_epoch:
                    p.make_follower(st.leader, st.leader_epoch, st.isr, st.replicas, st.partition_epoch)
                    if was_leader:
                        self.on_leadership(p, False)
                else:
                    p.isr, p.partition_epoch = list(st.isr), st.partition_epoch
        self.on_follow()

    # -- leader: follower fetches and the ISR ------------------------------------------------------------------

    def _maybe_expand_isr(self, p: Partition, replica_id: int) -> None:
        """A follower's fetch position was just recorded: add it to the ISR if it caught up (maybeExpandIsr)."""
        if (p.isr_expansion_candidate(replica_id) and self._may_join(replica_id)
                and not self.faults.on("isr.never_expand")):
            self._propose(p, sorted(set(p.isr) | {replica_id}), "expand")

    def _may_join(self, replica_id: int) -> bool:
        """A fenced broker, or one in controlled shutdown, cannot be added back (Partition.isReplicaIsrEligible)."""
        img = self.image
        return img is None or img.is_active(replica_id)

    def _propose(self, p: Partition, new_isr: list[int], why: str) -> None:
        """Send an AlterPartition for ``p`` (one in flight per partition, Kafka's PendingPartitionChange)."""
        if p.pending_isr is not None or new_isr == p.isr:
            return
        p.pending_isr = list(new_isr)
        log.info("%s-%d: proposing ISR %s -> %s (%s)", p.topic, p.index, p.isr, new_isr, why)
        task = asyncio.get_running_loop().create_task(self._send_alter(p, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_alter(self, p: Partition, new_isr: list[int]) -> None:
        try:
            err, st = await self.alter_isr(p, new_isr)
        except Exception as e:   # controller unreachable: forget the proposal, the next check retries
            log.info("%s-%d: AlterPartition failed: %s", p.topic, p.index, e)
            err, st = -1, None
        if p.pending_isr != new_isr:
            return
        if err == 0 and st is not None and st.leader == self.node_id and st.leader_epoch == p.leader_epoch:
            p.apply_isr(st.isr, st.partition_epoch)
        elif err in AWAIT_METADATA:
            # Partition.handleAlterPartitionError: the controller's state differs from ours; the proposal stays
            # pending (no other is sent) until the metadata brings the partition's new state, which clears it.
            log.info("%s-%d: AlterPartition %s answered %d; waiting for the metadata", p.topic, p.index, new_isr, err)
        else:
            # INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED (not applied: back to the committed state) and retriable
            # errors (the next check proposes again).
            p.pending_isr = None
            p.maybe_advance_hw()

    def shrink_isrs(self) -> None:
        """ReplicaManager.maybeShrinkIsr: drop followers not caught up within replica.lag.time.max.ms."""
        lag = self.config["replica.lag.time.max.ms"]
        if self.faults.on("isr.shrink_early"):
            lag //= 4
        now_ms = self.clock.monotonic() * 1000
        for p in list(self.partitions.values()):
            out = p.out_of_sync_replicas(now_ms, lag)
            if out:
                if self.faults.on("isr.never_shrink"):
                    continue
                self._propose(p, [r for r in p.isr if r not in out], f"out of sync: {out}")

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> None:
        lag_s = self.config["replica.lag.time.max.ms"] / 1000
        if self.faults.on("isr.shrink_early"):
            lag_s /= 4

        def shrink_tick() -> None:
            self.shrink_isrs()
            self._timers[0] = self.clock.call_later(lag_s / 2, shrink_tick)

        def checkpoint_tick() -> None:
            self.checkpoint_hws()
            self._timers[1] = self.clock.call_later(1.0, checkpoint_tick)

        expire_s = self.config["producer.id.expiration.check.interval.ms"] / 1000

        def expire_tick() -> None:
            self.remove_expired_producers()
            self._timers[2] = self.clock.call_later(expire_s, expire_tick)

        self._timers = [self.clock.call_later(lag_s / 2, shrink_tick), self.clock.call_later(1.0, checkpoint_tick),
                        self.clock.call_later(expire_s, expire_tick)]

    def remove_expired_producers(self) -> None:
        """Drop producers idle for producer.id.expiration.ms from every log (UnifiedLog.removeExpiredProducers)."""
        now = self.clock.wall_ms()
        for p in list(self.partitions.values()):
            if not p.deleted:
                p.log.producer_state.remove_expired(now)

    # -- high watermark checkpoint ----------------------------------------------------------------------------

    def _read_hw_checkpoint(self) -> dict[str, int]:
        if self.data_dir is None:
            return {}
        path = self.data_dir / HW_CHECKPOINT
        try:
            return {k: int(v) for k, v in json.loads(path.read_text()).items()}
        except FileNotFoundError:
            return {}
        except (ValueError, AttributeError):
            log.warning("%s is unreadable; high watermarks start at 0", path)
            return {}

    def checkpoint_hws(self) -> None:
        if self.data_dir is None:
            return
        doc = {f"{t}-{i}": p.hw for (t, i), p in sorted(self.partitions.items())}
        tmp = self.data_dir / (HW_CHECKPOINT + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.data_dir / HW_CHECKPOINT)

    def maybe_flush(self) -> None:
        for p in list(self.partitions.values()):
            maybe = getattr(p.log, "maybe_flush", None)
            if maybe is not None and not p.deleted:
                maybe()

    def close(self) -> None:
        for t in self._timers:
            t.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.checkpoint_hws()
        for p in self.partitions.values():
            p.log.flush()
            p.log.close()
