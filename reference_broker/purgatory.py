"""DelayedFetch: fetches parked until enough bytes are readable, an error appears, or max_wait passes.

Mirrors Apache Kafka's ``ReplicaManager.fetchMessages`` (answer at once or park) and ``DelayedFetch.tryComplete``
(when a parked fetch completes early). A parked fetch watches each of its partitions; a partition calls
``try_complete`` on its watchers when its readable end moves (high watermark for consumers, log end offset for
followers) or when it goes away, so an append that makes bytes readable wakes the fetch at once — no polling.
A fetch fires once and unregisters everywhere.

Threading rule: everything here runs on the broker's event loop.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .partition import Partition


class FetchIsolation(IntEnum):
    """How far a fetch may read (Kafka's FetchIsolation)."""

    LOG_END = 0          # followers read to the LEO
    HIGH_WATERMARK = 1   # consumers, read_uncommitted
    TXN_COMMITTED = 2    # consumers, read_committed: the last stable offset


@dataclass
class FetchPartitionStatus:
    """One partition of a fetch: where it reads from and how much it may take."""

    topic: str
    partition_index: int
    partition: Partition | None          # None: unknown to this broker
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    topic_id: object = None               # uuid.UUID for Fetch v13+ (topics named by id)


@dataclass(eq=False)  # identity hash: a fetch is watched in sets
class DelayedFetch:
    partitions: list[FetchPartitionStatus]
    min_bytes: int
    isolation: FetchIsolation
    is_follower: bool
    min_bytes_exclusive: bool = False     # test-only fault switch (faults.py)
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    completed: bool = False
    reason: str = ""
    _timer: asyncio.TimerHandle | None = None

    def try_complete(self) -> bool:
        """Kafka's DelayedFetch.tryComplete: complete when any case A–H holds, else keep waiting."""
        if self.completed:
            return True
        accumulated = 0
        for st in self.partitions:
            p = st.partition
            if p is None or p.deleted:
                return self.force_complete("Case C: partition unknown or deleted")
            if not p.is_leader:
                return self.force_complete("Case A: no longer the leader")
            if st.current_leader_epoch >= 0 and st.current_leader_epoch != p.leader_epoch:
                return self.force_complete("Case E: requested leader epoch is fenced")
            end = p.end_offset_for(self.isolation)
            if end != st.fetch_offset:
                if end < st.fetch_offset:
                    # The end moved below the fetch offset: the leader truncated (Case F's older-segment branch).
                    return self.force_complete("Case F: fetch offset beyond the readable end after truncation")
                if p.log.log_start_offset > st.fetch_offset:
                    return self.force_complete("Case F: fetch offset no longer in the log")
                accumulated += min(p.log.bytes_between(st.fetch_offset, end), st.partition_max_bytes)
            if self.is_follower and st.last_fetched_epoch >= 0 and p.diverging_epoch(st) is not None:
                return self.force_complete("Case H: diverging epoch")
        if accumulated > self.min_bytes or (accumulated == self.min_bytes and not self.min_bytes_exclusive):
            return self.force_complete(f"Case G: {accumulated} bytes >= min_bytes {self.min_bytes}")
        return False

    def force_complete(self, reason: str) -> bool:
        """Fire once: unregister from every partition, cancel the timer, release the parked request."""
        if self.completed:
            return True
        self.completed = True
        self.reason = reason
        for st in self.partitions:
            if st.partition is not None:
                st.partition.watchers.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        if not self.future.done():
            self.future.set_result(reason)
        return True

    async def park(self, max_wait_s: float) -> str:
        """Watch every partition; wait until completed early or the max_wait timer expires (Kafka's onExpiration)."""
        for st in self.partitions:
            if st.partition is not None:
                st.partition.watchers.add(self)
        # tryCompleteElseWatch: a change may have landed between the first read and the watch.
        if not self.try_complete():
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max_wait_s, self.force_complete, "expired: max_wait reached")
        try:
            return await self.future
        finally:
            self.force_complete("cancelled")
