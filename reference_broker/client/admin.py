"""Admin client: create/delete topics, list offsets, delete records, describe topics, list transactions,
describe producers.

Thin on purpose: each method is one request type (grouped per leader where Kafka requires the leader),
errors are ``kafka.errors`` classes raised as they come, so a conformance check can assert on the exact
Kafka error a broker returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import kafka.errors as Errors
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeProducersRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest

from .cluster import Cluster
from .protocol import DEFAULT_CLIENT_ID
from .types import OffsetAndTimestamp, TopicMetadata, TopicPartition

__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "Admin", "NewTopic", "ProducerState", "TransactionListing",
           "list_offsets"]

#: ListOffsets timestamp specs (Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP etc.)
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

LIST_OFFSETS = 2
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


def _raise_for(code: int, what: str, message: str | None = None) -> None:
    if code:
        cls = Errors.for_code(code)
        raise cls(f"{what}: {message}" if message else what)


async def list_offsets(
    cluster: Cluster, specs: Mapping[TopicPartition, int], isolation_level: int = 0, retries: int = 3
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """ListOffsets per partition leader. ``specs`` maps tp -> timestamp ms, or EARLIEST/LATEST/MAX_TIMESTAMP.

    Shared by Admin and Consumer (offset reset). Retries invalid-metadata errors after a metadata refresh.
    """
    result: dict[TopicPartition, OffsetAndTimestamp] = {}
    todo = dict(specs)
    for attempt in range(retries + 1):
        if any(cluster.leader_for(tp) is None for tp in todo):
            await cluster.refresh_metadata({tp.topic for tp in todo})
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in todo.items():
            leader = cluster.leader_for(tp)
            if leader is None:
                if attempt == retries:
                    raise Errors.LeaderNotAvailableError(f"no leader for {tp}")
                continue
            by_leader.setdefault(leader, {})[tp] = ts
        replies = await asyncio.gather(
            *(_list_offsets_one(cluster, node, part, isolation_level) for node, part in by_leader.items())
        )
        retry: dict[TopicPartition, int] = {}
        for reply in replies:
            for tp, (code, value) in reply.items():
                if code == 0:
                    result[tp] = value
                    continue
                err = Errors.for_code(code)
                if err.retriable and attempt < retries:
                    retry[tp] = todo[tp]
                else:
                    raise err(f"ListOffsets {tp}")
        retry.update({tp: ts for tp, ts in todo.items() if tp not in result and tp not in retry})
        if not retry:
            return result
        todo = retry
        await cluster.refresh_metadata({tp.topic for tp in todo})
        await asyncio.sleep(0.05 * (attempt + 1))
    raise Errors.KafkaTimeoutError(f"ListOffsets did not complete for {sorted(todo)}")


async def _list_offsets_one(
    cluster: Cluster, node: int, specs: dict[TopicPartition, int], isolation_level: int
) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]]:
    conn = await cluster.connection(node)
    version = conn.versions.get(LIST_OFFSETS)
    if version is None:
        raise Errors.UnsupportedVersionError("ListOffsets")
    topics: dict[str, list] = {}
    for tp, ts in specs.items():
        topics.setdefault(tp.topic, []).append(
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=tp.partition, timestamp=ts, max_num_offsets=1, current_leader_epoch=-1
            )
        )
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=n, partitions=ps) for n, ps in topics.items()],
        timeout_ms=int(cluster.request_timeout * 1000),
    )
    resp = await conn.request(req, version, cluster.request_timeout)
    out: dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]] = {}
    for t in resp.body.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                out[tp] = (p.error_code, None)
            elif version == 0:
                offs = p.old_style_offsets
                out[tp] = (0, OffsetAndTimestamp(offs[0] if offs else -1, -1))
            else:
                out[tp] = (0, OffsetAndTimestamp(p.offset, p.timestamp, getattr(p, "leader_epoch", -1)))
    return out


LIST_TRANSACTIONS, DESCRIBE_PRODUCERS = 66, 61


@dataclass(frozen=True)
class TransactionListing:
    """One ListTransactions entry (Java's TransactionListing)."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ProducerState:
    """One producer of a partition's log as DescribeProducers shows it (Java's ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class Admin:
    """Admin operations over a :class:`Cluster` (owns it when built from a bootstrap string)."""

    def __init__(
        self, bootstrap: str | Sequence[str] | Cluster, *, client_id: str = DEFAULT_CLIENT_ID, request_timeout: float = 30.0
    ) -> None:
        if isinstance(bootstrap, Cluster):
            self.cluster, self._owns = bootstrap, False
        else:
            self.cluster = Cluster(bootstrap, client_id=client_id, request_timeout=request_timeout)
            self._owns = True

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._owns:
            await self.cluster.start()

    async def close(self) -> None:
        if self._owns:
            await self.cluster.close()

    async def _controller_conn(self):
        c = self.cluster
        if c.controller_id >= 0 and c.controller_id in c.brokers:
            return await c.connection(c.controller_id)
        return await c.any_connection()

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        timeout_ms: int = 30000,
        validate_only: bool = False,
        exist_ok: bool = False,
        wait: bool = True,
    ) -> dict[str, int]:
        """Create topics; returns name -> error code (0 ok). Raises the first error unless it is
        TOPIC_ALREADY_EXISTS with ``exist_ok``. With ``wait`` it polls Metadata until leaders exist."""
        topics = list(topics)
        conn = await self._controller_conn()
        version = conn.versions.get(CREATE_TOPICS)
        if version is None:
            raise Errors.UnsupportedVersionError("CreateTopics")
        req = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[],
                    configs=[
                        CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                        for k, v in t.configs.items()
                    ],
                )
                for t in topics
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )
        resp = await conn.request(req, version, self.cluster.request_timeout)
        codes = {t.name: t.error_code for t in resp.body.topics}
        for t in resp.body.topics:
            if t.error_code == Errors.TopicAlreadyExistsError.errno and exist_ok:
                continue
            _raise_for(t.error_code, f"CreateTopics {t.name}", getattr(t, "error_message", None))
        if wait and not validate_only:
            for t in topics:
                await self.cluster.wait_for_topic(t.name, timeout=timeout_ms / 1000)
        return codes

    async def create_topic(
        self, name: str, num_partitions: int = 1, replication_factor: int = 1, configs: dict[str, str] | None = None
    ) -> None:
        """Create one topic and wait until every partition has a leader."""
        await self.create_topics([NewTopic(name, num_partitions, replication_factor, dict(configs or {}))])

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30000) -> dict[str, int]:
        """Delete topics by name; returns name -> error code, raising the first error."""
        names = list(names)
        conn = await self._controller_conn()
        version = conn.versions.get(DELETE_TOPICS)
        if version is None:
            raise Errors.UnsupportedVersionError("DeleteTopics")
        if version >= 6:
            req = DeleteTopicsRequest(
                topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names], timeout_ms=timeout_ms
            )
        else:
            req = DeleteTopicsRequest(topic_names=names, timeout_ms=timeout_ms)
        resp = await conn.request(req, version, self.cluster.request_timeout)
        codes = {r.name: r.error_code for r in resp.body.responses}
        for r in resp.body.responses:
            _raise_for(r.error_code, f"DeleteTopics {r.name}", getattr(r, "error_message", None))
        for n in names:
            self.cluster.topics.pop(n, None)
        return codes

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by spec per partition: EARLIEST, LATEST, MAX_TIMESTAMP or a timestamp in ms."""
        return await list_offsets(self.cluster, specs, isolation_level)

    async def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self.list_offsets({tp: EARLIEST for tp in tps})
        return {tp: v.offset for tp, v in r.items()}

    async def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self.list_offsets({tp: LATEST for tp in tps})
        return {tp: v.offset for tp, v in r.items()}

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int = 30000
    ) -> dict[TopicPartition, int]:
        """DeleteRecords (advance log start offset) at each leader; returns tp -> new low watermark."""
        c = self.cluster
        if any(c.leader_for(tp) is None for tp in before):
            await c.refresh_metadata({tp.topic for tp in before})
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, off in before.items():
            leader = c.leader_for(tp)
            if leader is None:
                raise Errors.LeaderNotAvailableError(f"no leader for {tp}")
            by_leader.setdefault(leader, {})[tp] = off
        out: dict[TopicPartition, int] = {}
        for node, parts in by_leader.items():
            conn = await c.connection(node)
            version = conn.versions.get(DELETE_RECORDS)
            if version is None:
                raise Errors.UnsupportedVersionError("DeleteRecords")
            topics: dict[str, list] = {}
            for tp, off in parts.items():
                topics.setdefault(tp.topic, []).append(
                    DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=tp.partition, offset=off)
                )
            req = DeleteRecordsRequest(
                topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=n, partitions=ps) for n, ps in topics.items()],
                timeout_ms=timeout_ms,
            )
            resp = await conn.request(req, version, c.request_timeout)
            for t in resp.body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    _raise_for(p.error_code, f"DeleteRecords {tp}")
                    out[tp] = p.low_watermark
        return out

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicMetadata]:
        """Metadata for the named topics (all when None). Unknown topics come back with their error_code."""
        names_list = None if names is None else list(names)
        await self.cluster.refresh_metadata(names_list)
        if names_list is None:
            return dict(self.cluster.topics)
        return {n: self.cluster.topics[n] for n in names_list if n in self.cluster.topics}

    async def list_topics(self) -> list[str]:
        """Names of all non-internal topics."""
        topics = await self.describe_topics(None)
        return sorted(n for n, t in topics.items() if not t.is_internal)

    async def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                duration_ms: int = -1, pattern: str | None = None) -> list[TransactionListing]:
        """ListTransactions to every broker (each lists the transactional ids it coordinates), as Java's
        Admin.listTransactions; filters as the request's (KIP-664, KIP-994 duration v1+, KIP-1152 pattern v2+).
        A broker too old for a filter asked for raises UnsupportedVersionError; a broker's error is raised."""
        c = self.cluster
        await c.refresh_metadata([])
        need = 2 if pattern else 1 if duration_ms >= 0 else 0
        out: list[TransactionListing] = []
        for node in sorted(c.brokers):
            conn = await c.connection(node)
            version = conn.versions.get(LIST_TRANSACTIONS)
            if version is None or version < need:
                raise Errors.UnsupportedVersionError(f"ListTransactions v{need} on broker {node}")
            req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                          duration_filter=duration_ms, transactional_id_pattern=pattern)
            body = (await conn.request(req, version, c.request_timeout)).body
            _raise_for(body.error_code, f"ListTransactions on broker {node}")
            out += [TransactionListing(s.transactional_id, s.producer_id, s.transaction_state)
                    for s in body.transaction_states]
        return sorted(out, key=lambda t: t.transactional_id)

    async def describe_producers(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, list[ProducerState]]:
        """DescribeProducers at each partition's leader (Java's Admin.describeProducers): the producers of its log,
        sorted by producer id; a partition's error is raised."""
        c = self.cluster
        tps = list(tps)
        if any(c.leader_for(tp) is None for tp in tps):
            await c.refresh_metadata({tp.topic for tp in tps})
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            leader = c.leader_for(tp)
            if leader is None:
                raise Errors.LeaderNotAvailableError(f"no leader for {tp}")
            by_leader.setdefault(leader, []).append(tp)
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node, parts in by_leader.items():
            conn = await c.connection(node)
            version = conn.versions.get(DESCRIBE_PRODUCERS)
            if version is None:
                raise Errors.UnsupportedVersionError("DescribeProducers")
            topics: dict[str, list[int]] = {}
            for tp in parts:
                topics.setdefault(tp.topic, []).append(tp.partition)
            req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=n, partition_indexes=ps)
                                                   for n, ps in topics.items()])
            body = (await conn.request(req, version, c.request_timeout)).body
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    _raise_for(p.error_code, f"DescribeProducers {tp}", p.error_message)
                    out[tp] = sorted((ProducerState(s.producer_id, s.producer_epoch, s.last_sequence,
                                                    s.last_timestamp, s.coordinator_epoch,
                                                    s.current_txn_start_offset) for s in p.active_producers),
                                     key=lambda s: s.producer_id)
        return out
