"""Delayed operations: fetches parked until enough bytes are readable, produces parked until the HW passes them.

Mirrors Apache Kafka's ``DelayedOperationPurgatory`` with ``DelayedFetch`` (``ReplicaManager.fetchMessages`` /
``DelayedFetch.tryComplete``) and ``DelayedProduce`` (``Partition.checkEnoughReplicasReachOffset``). Operations
are watched by topic-partition key, not by object identity, and tried in the order they were parked, so a
deterministic simulator sees the same completions every run. A partition's change (append, HW move, ISR change,
leadership change, deletion) calls :meth:`Purgatory.check` with its key — no polling. An operation fires once and
unregisters everywhere. Partitions are looked up by key at completion time through the replica manager's lookup.

Threading rule: everything here runs on the broker's event loop; timers come from the Clock.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka import errors as E

from .clock import Clock, Timer
from .partition import FetchIsolation, Partition

TP = tuple[str, int]
Lookup = Callable[[str, int], "Partition | None"]


class DelayedOperation:
    """One parked request: ``try_complete`` decides, ``force_complete`` fires once and releases it."""

    keys: list[TP]

    def __init__(self) -> None:
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.completed = False
        self.reason = ""
        self._timer: Timer | None = None
        self._purgatory: Purgatory | None = None
        self.id = -1

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_expiration(self) -> None:  # noqa: B027 - optional hook
        """Called once when max_wait / timeout passes before completion."""

    def force_complete(self, reason: str) -> bool:
        if self.completed:
            return True
        self.completed = True
        self.reason = reason
        if self._purgatory is not None:
            self._purgatory.unwatch(self)
        if self._timer is not None:
            self._timer.cancel()
        if not self.future.done():
            self.future.set_result(reason)
        return True

    def _expire(self) -> None:
        if not self.completed:
            self.on_expiration()
            self.force_complete("expired")


class Purgatory:
    """Watchers by topic-partition; insertion-ordered so completion order is deterministic."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._watchers: dict[TP, dict[int, DelayedOperation]] = {}
        self._ids = itertools.count()

    def unwatch(self, op: DelayedOperation) -> None:
        for key in op.keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(op.id, None)
                if not ops:
                    del self._watchers[key]

    def check(self, key: TP) -> None:
        """Try every operation watching ``key`` (Kafka's checkAndComplete)."""
        ops = self._watchers.get(key)
        if ops:
            for op in list(ops.values()):
                op.try_complete()

    async def park(self, op: DelayedOperation, timeout_s: float) -> str:
        """tryCompleteElseWatch, then wait until completed early or the timer expires."""
        op.id = next(self._ids)
        op._purgatory = self
        for key in op.keys:
            self._watchers.setdefault(key, {})[op.id] = op
        # A change may have landed between the first attempt and the watch.
        if not op.try_complete():
            op._timer = self.clock.call_later(timeout_s, op._expire)
        try:
            return await op.future
        finally:
            op.force_complete("cancelled")


@dataclass
class FetchPartitionStatus:
    """One partition of a fetch: where it reads from and how much it may take."""

    topic: str
    partition_index: int
    known: bool                           # False: unknown to this broker
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    topic_id: object = None               # uuid.UUID for Fetch v13+ (topics named by id)


@dataclass
class FetchParams:
    """What a Fetch asks, decoded (Kafka's FetchParams): who asks, how long it may wait, how much it wants."""

    replica_id: int                       # >= 0: a follower broker; -1: a consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int                        # already capped by fetch.max.bytes
    isolation: FetchIsolation
    partitions: list[FetchPartitionStatus]

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True)
class MinBytes:
    """The one "enough bytes?" formula. Kafka compares min_bytes twice — ReplicaManager.fetchMessages (answer at
    once when bytesReadable >= minBytes) and DelayedFetch.tryComplete Case G (accumulatedSize >= minBytes) — with
    the same comparison; both go through here, so a fault switch changes both decisions at once."""

    min_bytes: int
    exclusive: bool = False               # fetch.min_bytes_exclusive fault switch: > instead of >=
    per_partition: bool = False           # fetch.min_bytes_per_partition fault switch: max instead of sum

    def add(self, accumulated: int, partition_bytes: int) -> int:
        return max(accumulated, partition_bytes) if self.per_partition else accumulated + partition_bytes

    def met(self, accumulated: int) -> bool:
        return accumulated > self.min_bytes if self.exclusive else accumulated >= self.min_bytes


class DelayedFetch(DelayedOperation):
    def __init__(self, params: FetchParams, lookup: Lookup, min_bytes: MinBytes,
                 min_bytes_uncapped: bool = False) -> None:
        super().__init__()
        self.params = params
        self.lookup = lookup
        self.min_bytes = min_bytes
        self.min_bytes_uncapped = min_bytes_uncapped               # fetch.min_bytes_uncapped fault switch
        self.keys = [(st.topic, st.partition_index) for st in params.partitions if st.known]

    def try_complete(self) -> bool:
        """Kafka's DelayedFetch.tryComplete: complete when any case A–H holds, else keep waiting."""
        if self.completed:
            return True
        accumulated = 0
        for st in self.params.partitions:
            p = self.lookup(st.topic, st.partition_index) if st.known else None
            if p is None or p.deleted:
                return self.force_complete("Case C: partition unknown or deleted")
            if not p.is_leader:
                return self.force_complete("Case A: no longer the leader")
            if st.current_leader_epoch >= 0 and st.current_leader_epoch != p.leader_epoch:
                return self.force_complete("Case E: requested leader epoch is fenced")
            end = p.end_offset_for(self.params.isolation)
            if end != st.fetch_offset:
                if end < st.fetch_offset:
                    # The end moved below the fetch offset: the leader truncated (Case F's older-segment branch).
                    return self.force_complete("Case F: fetch offset beyond the readable end after truncation")
                if p.log.log_start_offset > st.fetch_offset:
                    return self.force_complete("Case F: fetch offset no longer in the log")
                got = p.log.bytes_between(st.fetch_offset, end)
                if not self.min_bytes_uncapped:
                    got = min(got, st.partition_max_bytes)
                accumulated = self.min_bytes.add(accumulated, got)
            if p.diverging_epoch(st.fetch_offset, st.last_fetched_epoch) is not None:
                # Case H: the log changed under a fetch's last fetched epoch (or it can no longer be placed)
                return self.force_complete("Case H: diverging epoch")
        if self.min_bytes.met(accumulated):
            return self.force_complete(f"Case G: {accumulated} bytes >= min_bytes {self.min_bytes.min_bytes}")
        return False


@dataclass
class ProducePartitionStatus:
    """An acks=all batch waiting for replication: done once the HW reaches ``required_offset``."""

    topic: str
    partition_index: int
    required_offset: int
    error: int = -1          # -1 while pending
    message: str | None = field(default=None)


class DelayedProduce(DelayedOperation):
    """Kafka's DelayedProduce: complete when every partition's HW passed its batch, or it lost leadership; a
    partition whose ISR is below min.insync.replicas when the HW passes gets NOT_ENOUGH_REPLICAS_AFTER_APPEND;
    what is still pending at the request timeout gets REQUEST_TIMED_OUT."""

    def __init__(self, statuses: list[ProducePartitionStatus], lookup: Lookup, ok_after_shrink: bool = False) -> None:
        super().__init__()
        self.statuses = statuses
        self.lookup = lookup
        self.ok_after_shrink = ok_after_shrink       # test-only fault switch produce.acks_all_ok_after_shrink
        self.keys = [(s.topic, s.partition_index) for s in statuses]

    def try_complete(self) -> bool:
        if self.completed:
            return True
        for s in self.statuses:
            if s.error >= 0:
                continue
            p = self.lookup(s.topic, s.partition_index)
            if p is None or p.deleted:
                s.error = E.UnknownTopicOrPartitionError.errno
            elif not p.is_leader:
                s.error = E.NotLeaderForPartitionError.errno
            elif self.ok_after_shrink and len(p.isr) < p.effective_min_isr:
                s.error = 0
            elif p.hw >= s.required_offset:
                if len(p.maximal_isr) < p.effective_min_isr:
                    s.error = E.NotEnoughReplicasAfterAppendError.errno
                    s.message = (f"ISR {p.maximal_isr} shrank below min.insync.replicas {p.effective_min_isr} after "
                                 "the append")
                else:
                    s.error = 0
        if all(s.error >= 0 for s in self.statuses):
            return self.force_complete("all partitions done")
        return False

    def on_expiration(self) -> None:
        for s in self.statuses:
            if s.error < 0:
                s.error = E.RequestTimedOutError.errno
