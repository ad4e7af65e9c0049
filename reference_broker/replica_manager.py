"""ReplicaManager: the partitions one broker hosts, the delayed operations on them, and their ISR upkeep.

Apache Kafka's ``ReplicaManager`` in small: it applies metadata changes (``applyDelta``: become leader, become
follower, stop and delete replicas), owns the fetch and produce purgatories (keyed by topic-partition), records
follower fetches on led partitions, shrinks the ISR of followers that lag more than replica.lag.time.max.ms
(``maybeShrinkIsr`` on a timer) and expands it when they catch up — both through the controller with
AlterPartition — and checkpoints the high watermarks (``replication-offset-checkpoint``) so a restart keeps them.
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

from .clock import Clock, Timer
from .config import BrokerConfig
from .faults import Faults
from .log.base import Log
from .log.memory import MemoryLog
from .log.producer_state import ProducerStateConfig
from .metadata.image import Delta, MetadataImage, PartitionState
from .partition import Partition
from .purgatory import (
    DelayedFetch,
    DelayedProduce,
    FetchPartitionStatus,
    ProducePartitionStatus,
    Purgatory,
)
from .topic_config import topic_setting

log = logging.getLogger("reference_broker.replica_manager")

HW_CHECKPOINT = "replication-offset-checkpoint"
TP = tuple[str, int]
# (partition, new ISR) -> (error, committed PartitionState or None)
AlterIsr = Callable[[Partition, list[int]], Awaitable[tuple[int, "PartitionState | None"]]]


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

    async def park_fetch(self, statuses: list[FetchPartitionStatus], min_bytes: int, isolation, is_follower: bool,
                         max_wait_s: float) -> str:
        op = DelayedFetch(statuses, self.get, min_bytes, isolation, is_follower,
                          min_bytes_exclusive=self.faults.on("fetch.min_bytes_exclusive"),
                          min_bytes_per_partition=self.faults.on("fetch.min_bytes_per_partition"),
                          min_bytes_uncapped=self.faults.on("fetch.min_bytes_uncapped"))
        return await self.fetch_purgatory.park(op, max_wait_s)

    async def wait_replicated(self, statuses: list[ProducePartitionStatus], timeout_s: float) -> None:
        """acks=all: park until each partition's HW passes its batch (DelayedProduce); fills each status' error."""
        op = DelayedProduce(statuses, self.get,
                            ok_after_shrink=self.faults.on("produce.acks_all_ok_after_shrink"))
        await self.produce_purgatory.park(op, timeout_s)

    # -- metadata (ReplicaManager.applyDelta) -----------------------------------------------------------------

    def _open_log(self, topic: str, index: int) -> Log:
        producers = ProducerStateConfig.from_broker_config(
            self.config, load_on_open=not self.faults.on("produce.producer_state_not_loaded"))
        if self.data_dir is None:
            return MemoryLog(clock=self.clock, producer_state=producers)
        from .log.file import FileLog, FileLogConfig

        return FileLog(self.data_dir / f"{topic}-{index}", FileLogConfig.from_broker_config(self.config),
                       clock=self.clock, producer_state=producers)

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

    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched at ``fetch_offset`` (its LEO): note it, then maybe add it to the ISR."""
        p.update_follower_fetch(replica_id, fetch_offset, self.clock.monotonic() * 1000)
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
        else:
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
