"""Follower replication: one fetcher per leader broker, fetching with the real Fetch API (Kafka's
``ReplicaFetcherThread`` / ``AbstractFetcherThread``).

Each fetcher sends Fetch v12 with ``replica_id`` = this broker, ``fetch_offset`` = the local LEO and
``last_fetched_epoch`` = the epoch of the last local batch, for every partition it follows from that leader. The
leader answers up to its LEO with its HW; the follower appends the batches as they are and sets its HW to
min(leader HW, own LEO). Every change to the local replica goes through ``Partition`` (append, truncation,
starting over), as Kafka's fetcher goes through ``Partition.appendRecordsToFollowerOrFutureReplica`` /
``truncateTo`` / ``truncateFullyAndStartAt``; the fetcher only reads the log's offsets and epochs. When the leader says the epochs diverge (KIP-320 ``diverging_epoch``), the follower
truncates to the end of that epoch as both logs agree on it (``truncateOnFetchResponse``; KIP-101/KIP-279),
never blindly to the HW. OFFSET_OUT_OF_RANGE asks the leader's LEO and log start (ListOffsets as a replica):
a log ending past the leader's is truncated to it, one ending below the leader's log start (DeleteRecords moved
it while this broker was away) is truncated fully and starts there. Leadership errors, and an out-of-range
partition the leader cannot place, back off for replica.fetch.backoff.ms.

Threading rule: runs on the broker's event loop; sleeps and backoffs go through the Clock.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafka import errors as E
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from .aio import cancel_and_wait
from .client.protocol import Connection
from .clock import Clock
from .config import BrokerConfig
from .partition import Partition

log = logging.getLogger("reference_broker.replica_fetcher")

FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 4
LATEST, EARLIEST = -1, -2
Address = Callable[[int], "tuple[str, int] | None"]


def last_fetched_epoch(p: Partition) -> int:
    entries = p.log.epoch_entries()
    return entries[-1].epoch if entries else -1


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, node_id: int, leader_id: int, address: Address, partitions: Callable[[], list[Partition]],
                 config: BrokerConfig, clock: Clock, on_fetched: Callable[[], None] = lambda: None) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self.address = address
        self.partitions = partitions
        self.config = config
        self.clock = clock
        self.on_fetched = on_fetched
        self.conn: Connection | None = None
        self.backoff_until: dict[tuple[str, int], float] = {}
        self.task: asyncio.Task | None = None
        self.ignore_divergence = False     # test-only fault switch replication.ignore_diverging_epoch

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{self.leader_id}")

    async def stop(self) -> None:
        if self.task is not None:
            await cancel_and_wait([self.task])
        await self._drop_conn()

    async def _drop_conn(self) -> None:
        if self.conn is not None:
            try:
                await self.conn.close()
            except Exception:
                pass
            self.conn = None

    async def _connect(self) -> Connection | None:
        if self.conn is not None and not self.conn.closed:
            return self.conn
        addr = self.address(self.leader_id)
        if addr is None:
            return None
        try:
            self.conn = await Connection.connect(addr[0], addr[1], client_id=f"replica-{self.node_id}",
                                                 timeout=3.0)
        except (OSError, TimeoutError):
            self.conn = None
        return self.conn

    async def _run(self) -> None:
        backoff = self.config["replica.fetch.backoff.ms"] / 1000
        while True:
            try:
                fetched = await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:          # connection lost, timeout, leader gone: reconnect after a backoff
                log.debug("fetcher %d<-%d: %s", self.node_id, self.leader_id, e)
                await self._drop_conn()
                fetched = False
            if not fetched:
                await self.clock.sleep(backoff)

    async def _fetch_once(self) -> bool:
        now = self.clock.monotonic()
        parts = [p for p in self.partitions() if self.backoff_until.get(p.tp, 0) <= now]
        if not parts:
            return False
        conn = await self._connect()
        if conn is None:
            return False
        by_topic: dict[str, list] = {}
        for p in parts:
            by_topic.setdefault(p.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=p.index, current_leader_epoch=p.leader_epoch, fetch_offset=p.log.log_end_offset,
                last_fetched_epoch=-1 if self.ignore_divergence else last_fetched_epoch(p), log_start_offset=p.log.log_start_offset,
                partition_max_bytes=self.config["replica.fetch.max.bytes"]))
        req = FetchRequest(replica_id=self.node_id, max_wait_ms=self.config["replica.fetch.wait.max.ms"],
                           min_bytes=self.config["replica.fetch.min.bytes"], max_bytes=self.config["replica.fetch.response.max.bytes"],
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                           forgotten_topics_data=[], rack_id="")
        timeout = self.config["replica.fetch.wait.max.ms"] / 1000 + self.config["replica.socket.timeout.ms"] / 1000
        resp = await conn.request(req, FETCH_VERSION, timeout=timeout)
        local = {p.tp: p for p in parts}
        for t in resp.body.responses:
            for pd in t.partitions:
                p = local.get((t.topic, pd.partition_index))
                if p is None or p.deleted or p.is_leader or p.leader_id != self.leader_id:
                    continue           # the metadata moved it meanwhile
                await self._handle(conn, p, pd)
        self.on_fetched()
        return True

    async def _handle(self, conn: Connection, p: Partition, pd) -> None:
        err = pd.error_code
        if err == 0:
            div = getattr(pd, "diverging_epoch", None)
            if div is not None and div.epoch >= 0 and div.end_offset >= 0 and not self.ignore_divergence:
                self._truncate_on_divergence(p, div.epoch, div.end_offset)
                return
            p.append_as_follower(bytes(pd.records) if pd.records else b"", pd.high_watermark, pd.log_start_offset)
        elif err == E.OffsetOutOfRangeError.errno:
            await self._handle_out_of_range(conn, p)
        else:
            # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC...: wait for the metadata to move
            self._backoff(p)

    def _truncate_on_divergence(self, p: Partition, leader_epoch: int, leader_end: int) -> None:
        """AbstractFetcherThread.truncateOnFetchResponse: truncate to the end of the diverging epoch as both
        logs know it."""
        epoch, end = p.log.end_offset_for_epoch(leader_epoch)
        if end < 0:
            target = min(leader_end, p.log.log_end_offset)
        elif epoch != leader_epoch:
            target = min(end, p.log.log_end_offset)
        else:
            target = min(leader_end, end)
        log.info("%s-%d: diverging epoch %d (leader end %d): truncating %d -> %d", p.topic, p.index, leader_epoch,
                 leader_end, p.log.log_end_offset, target)
        p.truncate_to(max(target, p.log.log_start_offset))

    async def _handle_out_of_range(self, conn: Connection, p: Partition) -> None:
        """AbstractFetcherThread.handleOutOfRangeError / fetchOffsetAndTruncate: ahead of the leader's log end →
        truncate to it; behind the leader's log start → everything here is stale: truncate fully and start at
        the leader's log start; otherwise fetch again from the log end. When the leader cannot say, back off.
        The answers take two round trips: if meanwhile the metadata moved the partition (this replica leads now,
        follows another leader or epoch, or the partition is gone), its log is left alone — Kafka's fetcher only
        truncates a partition it still fetches in the same state."""
        epoch = p.leader_epoch
        leo = await self._leader_offset(conn, p, LATEST)
        if not self._still_fetching(p, epoch):
            return
        if leo is None:
            self._backoff(p)
            return
        if leo < p.log.log_end_offset:
            log.info("%s-%d: log end %d past the leader's %d: truncating", p.topic, p.index, p.log.log_end_offset,
                     leo)
            p.truncate_to(leo)
            return
        start = await self._leader_offset(conn, p, EARLIEST)
        if not self._still_fetching(p, epoch):
            return
        if start is None:
            self._backoff(p)
            return
        if start > p.log.log_end_offset:
            log.info("%s-%d: log end %d below the leader's log start %d: truncating fully, starting there",
                     p.topic, p.index, p.log.log_end_offset, start)
            p.truncate_fully_and_start_at(start)
        else:
            # Nothing to truncate, so the next fetch would be the same one: wait a backoff before it (Kafka fetches
            # again at once; here a replica the leader cannot place, e.g. by its last fetched epoch, would spin).
            self._backoff(p)

    def _still_fetching(self, p: Partition, epoch: int) -> bool:
        """The partition is still one this fetcher fetches, at the leader epoch it had."""
        return not p.deleted and not p.is_leader and p.leader_id == self.leader_id and p.leader_epoch == epoch

    def _backoff(self, p: Partition) -> None:
        """Leave the partition out of fetches for replica.fetch.backoff.ms (Kafka's delayPartitions)."""
        self.backoff_until[p.tp] = self.clock.monotonic() + self.config["replica.fetch.backoff.ms"] / 1000

    async def _leader_offset(self, conn: Connection, p: Partition, ts: int) -> int | None:
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=self.node_id, isolation_level=0, topics=[T(name=p.topic, partitions=[
            T.ListOffsetsPartition(partition_index=p.index, current_leader_epoch=p.leader_epoch, timestamp=ts)])])
        resp = await conn.request(req, LIST_OFFSETS_VERSION, timeout=5.0)
        part = resp.body.topics[0].partitions[0]
        return part.offset if part.error_code == 0 else None


class ReplicaFetcherManager:
    """Keeps one fetcher per leader this broker follows partitions from (Kafka's ReplicaFetcherManager)."""

    def __init__(self, node_id: int, address: Address, followed: Callable[[], dict[int, list[Partition]]],
                 config: BrokerConfig, clock: Clock, ignore_divergence: bool = False) -> None:
        self.node_id = node_id
        self.address = address
        self.followed = followed
        self.ignore_divergence = ignore_divergence
        self.config = config
        self.clock = clock
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def update(self) -> None:
        """Start fetchers for new leaders, stop those with nothing left to fetch."""
        leaders = set(self.followed())
        for leader in sorted(leaders - set(self.fetchers)):
            f = ReplicaFetcher(self.node_id, leader, self.address,
                               lambda leader=leader: self.followed().get(leader, []), self.config, self.clock)
            f.ignore_divergence = self.ignore_divergence
            self.fetchers[leader] = f
            f.start()
        for leader in sorted(set(self.fetchers) - leaders):
            f = self.fetchers.pop(leader)
            asyncio.get_running_loop().create_task(f.stop())

    async def stop(self) -> None:
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
