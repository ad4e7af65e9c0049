"""Cluster view: bootstrap, Metadata, leader per partition, one :class:`Connection` per broker.

Why separate from producer/consumer: both need the same "who leads this partition, and give me a
negotiated connection to it" and the same refresh-on-error rule. This class holds no retry policy itself;
callers decide when metadata is stale (``kafka.errors`` ``invalid_metadata`` flag) and call
:meth:`Cluster.refresh_metadata`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence

import kafka.errors as Errors
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import MetadataRequest

from .protocol import DEFAULT_CLIENT_ID, Connection, Response
from .types import BrokerMetadata, PartitionMetadata, TopicMetadata, TopicPartition

__all__ = ["Cluster", "parse_bootstrap"]

METADATA = 3


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2"`` or a list of ``"h:p"`` -> [(host, port), ...]."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"empty bootstrap: {bootstrap!r}")
    return out


def _live(conn: Connection | None) -> bool:
    return conn is not None and not conn.closed


class Cluster:
    """Metadata and connections for one cluster. Use ``async with Cluster(...) as c`` or start()/close()."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = DEFAULT_CLIENT_ID,
        request_timeout: float = 30.0,
        metadata_version: int | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.metadata_version = metadata_version
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self._conns: dict[int, Connection] = {}
        self._bootstrap_conn: Connection | None = None
        self._lock = asyncio.Lock()
        # one opening at a time per broker (key: node id, or None for bootstrap): tasks that find no connection
        # at once must share the one that gets opened, as Java's NetworkClient keeps one per node. Each opening
        # its own once closed a connection with a Produce on it, and the retry wrote the records twice.
        self._opening: dict[int | None, asyncio.Lock] = {}

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the first reachable bootstrap server and load metadata for all topics."""
        await self.refresh_metadata()

    async def close(self) -> None:
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for c in conns:
            with contextlib.suppress(Exception):
                await c.close()

    # -- connections ---------------------------------------------------------------------------------------

    async def _open(self, host: str, port: int) -> Connection:
        conn = await Connection.connect(host, port, client_id=self.client_id, timeout=self.request_timeout)
        try:
            await conn.api_versions(timeout=self.request_timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def connection(self, node_id: int) -> Connection:
        """A negotiated connection to broker ``node_id`` (opened on first use, reopened if it was closed)."""
        conn = self._conns.get(node_id)
        if _live(conn):
            return conn
        async with self._opening.setdefault(node_id, asyncio.Lock()):
            conn = self._conns.get(node_id)
            if _live(conn):
                return conn  # another task opened it while we waited
            broker = self.brokers.get(node_id)
            if broker is None:
                raise Errors.KafkaConnectionError(f"unknown broker id {node_id}")
            conn = await self._open(broker.host, broker.port)
            old = self._conns.get(node_id)
            self._conns[node_id] = conn
            if old is not None:  # closed already (else it was returned above): release its resources
                with contextlib.suppress(Exception):
                    await old.close()
            return conn

    async def any_connection(self) -> Connection:
        """Some live connection: a known broker's, else a bootstrap server's."""
        for node_id in sorted(self._conns):
            if not self._conns[node_id].closed:
                return self._conns[node_id]
        for node_id in sorted(self.brokers):
            with contextlib.suppress(OSError, Errors.KafkaError, TimeoutError):
                return await self.connection(node_id)
        async with self._opening.setdefault(None, asyncio.Lock()):
            if _live(self._bootstrap_conn):
                return self._bootstrap_conn
            last: BaseException | None = None
            for host, port in self.bootstrap:
                try:
                    self._bootstrap_conn = await self._open(host, port)
                    return self._bootstrap_conn
                except (OSError, Errors.KafkaError, TimeoutError) as exc:
                    last = exc
            raise Errors.NoBrokersAvailable(f"no bootstrap server reachable: {self.bootstrap}: {last!r}")

    async def send(self, node_id: int, request: ApiMessage, version: int | None = None) -> Response:
        """Send to a broker by id with its negotiated version (unless ``version`` is given)."""
        conn = await self.connection(node_id)
        return await conn.request(request, version, self.request_timeout)

    async def send_any(self, request: ApiMessage, version: int | None = None) -> Response:
        conn = await self.any_connection()
        return await conn.request(request, version, self.request_timeout)

    # -- metadata ------------------------------------------------------------------------------------------

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, allow_auto_topic_creation: bool = False
    ) -> object:
        """Fetch Metadata (all topics when ``topics`` is None) and merge it into this view; returns the body."""
        async with self._lock:
            conn = await self.any_connection()
            version = self.metadata_version if self.metadata_version is not None else conn.versions.get(METADATA)
            if version is None:
                raise Errors.UnsupportedVersionError("broker supports no Metadata version we know")
            names = None if topics is None else list(topics)
            req_topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
            kwargs: dict[str, object] = {"topics": req_topics}
            if version >= 4:
                kwargs["allow_auto_topic_creation"] = allow_auto_topic_creation
            resp = await conn.request(MetadataRequest(**kwargs), version, self.request_timeout)
            self._merge(resp.body, full=names is None)
            return resp.body

    def _merge(self, body: object, full: bool) -> None:
        self.brokers = {
            b.node_id: BrokerMetadata(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in body.brokers
        }
        self.cluster_id = getattr(body, "cluster_id", None)
        self.controller_id = getattr(body, "controller_id", -1)
        if full:
            self.topics = {}
        for t in body.topics:
            if t.error_code != 0:
                # UNKNOWN_TOPIC_OR_PARTITION & co: forget what we knew, keep the error visible
                self.topics[t.name] = TopicMetadata(t.name, getattr(t, "topic_id", None), {}, False, t.error_code)
                continue
            parts = {
                p.partition_index: PartitionMetadata(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=getattr(p, "leader_epoch", -1),
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(getattr(p, "offline_replicas", []) or []),
                    error_code=p.error_code,
                )
                for p in t.partitions
            }
            self.topics[t.name] = TopicMetadata(
                t.name, getattr(t, "topic_id", None), parts, getattr(t, "is_internal", False), 0
            )

    def partitions_for(self, topic: str) -> list[int]:
        """Sorted partition ids of a topic as last seen (empty if unknown)."""
        t = self.topics.get(topic)
        return sorted(t.partitions) if t else []

    def leader_for(self, tp: TopicPartition) -> int | None:
        """Leader broker id, or None if unknown / leaderless (-1)."""
        t = self.topics.get(tp.topic)
        if t is None or tp.partition not in t.partitions:
            return None
        leader = t.partitions[tp.partition].leader
        return leader if leader >= 0 else None

    def topic_id(self, topic: str) -> object:
        t = self.topics.get(topic)
        return t.topic_id if t else None

    def topic_name_for_id(self, topic_id: object) -> str | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t.name
        return None

    async def wait_for_topic(self, topic: str, timeout: float = 10.0) -> TopicMetadata:
        """Poll Metadata until ``topic`` has a leader for every partition (topic creation is asynchronous)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await self.refresh_metadata([topic])
            t = self.topics.get(topic)
            if t and t.error_code == 0 and t.partitions and all(p.leader >= 0 for p in t.partitions.values()):
                return t
            if loop.time() >= deadline:
                raise Errors.KafkaTimeoutError(f"topic {topic!r} has no leaders after {timeout}s: {t}")
            await asyncio.sleep(0.05)
