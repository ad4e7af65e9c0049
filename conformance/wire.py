"""``Wire``: the suites' protocol-level client — exact requests, exact error codes, exact timings, all recorded.

Why not a normal client: a conformance check must send precisely the request its rule talks about (a Fetch with
this max_wait_ms and that partition_max_bytes) and see precisely what came back (error code, high watermark,
batch boundaries, round-trip time). ``Wire`` wraps one ``reference_broker.client.protocol.Connection`` and adds:

- request builders with every knob exposed and versions pinned (``VERSIONS``; lowered to the broker's maximum);
- a summary of each exchange in the check's :class:`~conformance.evidence.Evidence`;
- history recording (``send``/``fetch``/``list_offsets``/``delete_records``/``commit``/``fetch_offsets``);
- broker misbehaviour as :class:`TargetDiverged` (an ``AssertionError``): a closed connection or no answer is
  the target breaking the protocol, so the results call it a *divergence*, not a harness error.

Single-broker targets answer everything on the bootstrap broker. For clusters, ``Wire.leader(topic, partition)``
and ``Wire.coordinator(group)`` open a ``Wire`` to the right broker (same evidence and history).

This is the one request layer: the suites, the property machines (through the plain-tuple views in
``conformance.properties.ops``) and chaos workloads all send through ``Wire``, so every exchange is recorded the
same way (evidence when the Wire has one, history when it has one).
"""
from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import errors as E
from kafka.errors import KafkaProtocolError
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeQuorumRequest,
    ElectLeadersRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from history.schema import key_of
from reference_broker.client.protocol import Connection, ConnectionClosedError, Response

from .evidence import Evidence
from .recording import Op, SessionHistory, decode_value, encode_value

# Pinned versions: what the checks were written against (all within Kafka 3.x/4.x, Tansu and the reference).
VERSIONS: dict[str, int] = {
    "Produce": 9, "Fetch": 12, "ListOffsets": 7, "Metadata": 9, "OffsetCommit": 8, "OffsetFetch": 7,
    "FindCoordinator": 3, "JoinGroup": 7, "Heartbeat": 4, "LeaveGroup": 4, "SyncGroup": 5, "CreateTopics": 7,
    "DeleteRecords": 2, "OffsetForLeaderEpoch": 4, "DescribeGroups": 5, "DescribeConfigs": 4, "ElectLeaders": 2,
    "InitProducerId": 4,
    # KIP-966 partitions with their eligible leader replicas, paginated; KIP-584 feature updates (suites/test_elr.py)
    "DescribeTopicPartitions": 0, "UpdateFeatures": 2,
    # transactions (conformance/txn.py): the classic protocol a transactional producer speaks (KIP-98, KIP-447,
    # KIP-890 part 1): AddPartitionsToTxn v4+ is broker-to-broker only, EndTxn v5 / TxnOffsetCommit v5 opt into
    # transaction protocol version 2 (KIP-890 part 2)
    "AddPartitionsToTxn": 3, "AddOffsetsToTxn": 3, "EndTxn": 4, "TxnOffsetCommit": 3, "DescribeTransactions": 0,
    "ListTransactions": 0,
    "DescribeQuorum": 2,     # KIP-595; v1 adds fetch/caught-up timestamps, v2 directory ids and the voters' nodes
}
API_KEYS = {"DescribeTopicPartitions": 75, "UpdateFeatures": 57,
            "Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
            "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
            "CreateTopics": 19, "DeleteRecords": 21, "OffsetForLeaderEpoch": 23, "DescribeGroups": 15,
            "DescribeConfigs": 32, "ElectLeaders": 43, "InitProducerId": 22, "AddPartitionsToTxn": 24,
            "AddOffsetsToTxn": 25, "EndTxn": 26, "TxnOffsetCommit": 28, "DescribeTransactions": 65,
            "ListTransactions": 66, "DescribeQuorum": 55}
EARLIEST, LATEST = -2, -1
NONE = 0
# FindCoordinator answers a client retries: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
RETRIABLE_COORDINATOR = frozenset({14, 15, 16})
GZIP = 1  # record batch compression codec (attributes bits 0-2)
DEFAULT_TIMEOUT_S = 30.0
_topic_seq = itertools.count()
# the admin APIs behind Kafka's tools (issue 27), at the highest versions Kafka 4.4.0 and the reference serve
VERSIONS.update({"IncrementalAlterConfigs": 1, "AlterConfigs": 2, "CreatePartitions": 3, "DescribeLogDirs": 4,
                 "DescribeCluster": 1})
API_KEYS.update({"IncrementalAlterConfigs": 44, "AlterConfigs": 33, "CreatePartitions": 37, "DescribeLogDirs": 35,
                 "DescribeCluster": 60})


class TargetDiverged(AssertionError):
    """The target broke the protocol itself (closed the connection, never answered): a divergence."""


class ExchangeTap(Protocol):
    """Sees every connection and exchange of the Wires it is attached to, exactly as sent and answered: the
    differential mode (``conformance.diff``) records the suites' conversations through one and compares two
    targets' answers through another. ``sent`` returns a token that comes back in ``answered``; ``response`` is None
    when the request failed (``failure`` says how: the connection closed, no answer in time)."""

    def opened(self, wire: Wire) -> None: ...

    def sent(self, wire: Wire, api_key: int, version: int, request: Any, timeout_s: float) -> Any: ...

    def answered(self, token: Any, response: Response | None, failure: str | None) -> None: ...

    def closed(self, wire: Wire) -> None: ...


_default_tap: ExchangeTap | None = None


def set_default_tap(tap: ExchangeTap | None) -> ExchangeTap | None:
    """Attach ``tap`` to every Wire connected from now on (None detaches); returns the previous default. The
    conversation recorder of ``conformance.diff`` sets it around each check."""
    global _default_tap
    previous, _default_tap = _default_tap, tap
    return previous


def unique_name(prefix: str = "kct") -> str:
    """A topic/group name no other check (or earlier run against a live cluster) uses."""
    return f"{prefix}-{secrets.token_hex(3)}-{next(_topic_seq)}"


def record_batch(payloads: Sequence[bytes | None], *, key: bytes | None = None,
                 timestamp_ms: int = 1_700_000_000_000, compression: int = 0) -> bytes:
    """One record batch v2 (magic 2) built by kafka.record; record i has timestamp base+i. ``compression`` is the
    batch's codec (0 none, 1 gzip: the one every client and broker has, see ``GZIP``)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(payloads):
        b.append(i, timestamp=timestamp_ms + i, key=key, value=v, headers=[])
    return bytes(b.build())


def keyed_batch(payloads: Sequence[bytes | None], *, keys: Sequence[bytes | None] | None = None,
                headers: Sequence[list[tuple[str, bytes]]] | None = None, timestamps: Sequence[int] | None = None,
                compression_type: int = 0, timestamp_ms: int = 1_700_000_000_000) -> bytes:
    """One record batch v2 with keys, headers and per-record timestamps (default base+i), optionally compressed
    (kafka.record codec ids: 1 gzip, 2 snappy, 3 lz4, 4 zstd) — realistic data for consumers and time lookups."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression_type, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(payloads):
        b.append(i, timestamp=timestamps[i] if timestamps is not None else timestamp_ms + i,
                 key=keys[i] if keys is not None else None, value=v,
                 headers=headers[i] if headers is not None else [])
    return bytes(b.build())


def idempotent_batch(payloads: Sequence[bytes | None], producer_id: int, producer_epoch: int, base_sequence: int,
                     *, timestamp_ms: int | None = None) -> bytes:
    """One record batch v2 as an idempotent producer sends it: producer id, epoch and the sequence of its first
    record (KIP-98). Sending the same bytes again is exactly a producer's retry of that batch. Timestamps default
    to now: brokers expire producer state by its batches' timestamps (producer.id.expiration.ms)."""
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 30)
    for i, v in enumerate(payloads):
        b.append(i, timestamp=timestamp_ms + i, key=None, value=v, headers=[])
    return bytes(b.build())


@dataclass(frozen=True)
class Batch:
    """A record batch as it came back: offsets, size on the wire, and its records' (offset, payload)."""

    base_offset: int
    last_offset: int
    size: int
    records: list[tuple[int, bytes | None]]


@dataclass
class PartitionFetch:
    """One partition of a Fetch answer."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    records_bytes: int
    batches: list[Batch] = field(default_factory=list)
    diverging_epoch: tuple[int, int] | None = None      # (epoch, end offset) when the answer carries one (KIP-320)

    @property
    def offsets(self) -> list[int]:
        return [o for b in self.batches for o, _ in b.records]

    @property
    def offsets_and_values(self) -> list[tuple[int, bytes | None]]:
        return [r for b in self.batches for r in b.records]


@dataclass
class FetchResult:
    """A Fetch answer: top-level error, per-partition results in answer order, and the round trip."""

    error_code: int
    rtt_ms: float
    partitions: list[PartitionFetch]

    def part(self, topic: str, partition: int = 0) -> PartitionFetch:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise TargetDiverged(f"the Fetch answer left out partition {topic}/{partition} (it answered for "
                             f"{[f'{p.topic}/{p.partition}' for p in self.partitions] or 'no partitions'})")

    @property
    def records_bytes(self) -> int:
        return sum(p.records_bytes for p in self.partitions)


@dataclass(frozen=True)
class ProduceResult:
    error_code: int
    base_offset: int
    rtt_ms: float
    values: list[int]
    batch_bytes: int  # size of the batch we sent; a v2 batch kept as sent has this size in the log
    log_start_offset: int = -1


def decode_batches(data: bytes | None) -> list[Batch]:
    """Split a records field into batches (the last, partial batch a broker may cut is dropped, as clients do)."""
    out: list[Batch] = []
    if not data:
        return out
    pos = 0
    data = bytes(data)
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
        if pos + size > len(data):
            break
        chunk = data[pos:pos + size]
        recs = []
        last = None
        for batch in MemoryRecords(chunk):
            last = batch.base_offset + batch.last_offset_delta if batch.magic >= 2 else None
            for r in batch:
                recs.append((r.offset, r.value))
            base = batch.base_offset
        out.append(Batch(base, last if last is not None else (recs[-1][0] if recs else base), size, recs))
        pos += size
    return out


def _producer_fields(batch: bytes) -> dict[str, int]:
    """Producer id, epoch and sequence range of a v2 batch (header offsets: Kafka's DefaultRecordBatch)."""
    last_delta = int.from_bytes(batch[23:27], "big", signed=True)
    pid = int.from_bytes(batch[43:51], "big", signed=True)
    epoch = int.from_bytes(batch[51:53], "big", signed=True)
    seq = int.from_bytes(batch[53:57], "big", signed=True)
    return {"producer_id": pid, "producer_epoch": epoch, "first_sequence": seq,
            "last_sequence": seq + last_delta if seq >= 0 else -1}


def _summary_fetch(res: FetchResult) -> dict[str, Any]:
    return {"error_code": res.error_code, "partitions": [
        {"tp": key_of(p.topic, p.partition), "error_code": p.error_code, "high_watermark": p.high_watermark,
         "log_start_offset": p.log_start_offset, "records_bytes": p.records_bytes,
         "batches": [[b.base_offset, b.last_offset, b.size] for b in p.batches]} for p in res.partitions]}


class Wire:
    """One connection to one broker of the target, with evidence and history attached. Use ``async with``."""

    def __init__(self, conn: Connection, evidence: Evidence | None, history: SessionHistory | None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, tap: ExchangeTap | None = None) -> None:
        self.conn = conn
        self.tap = tap if tap is not None else _default_tap
        self.evidence = evidence
        self.history = history
        self.process = history.process() if history is not None else 0
        self.timeout_s = timeout_s
        self.versions: dict[str, int] = {}
        self._others: list[Wire] = []
        # Topics this Wire creates are led by the broker it talks to (manual assignment), so the single-broker
        # checks, which send every request on this connection, mean the same on a multi-broker cluster: "the
        # partition's leader does X". Set by the plugin's fixtures for a multi-broker session target.
        self.pin_leader = False

    @classmethod
    async def connect(cls, bootstrap: str, *, evidence: Evidence | None = None,
                      history: SessionHistory | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      client_id: str = "kct-conformance", tap: ExchangeTap | None = None) -> Wire:
        """Connect to the first bootstrap broker and negotiate versions (ApiVersions). ``tap`` (default: the
        one ``set_default_tap`` installed) sees the connection and every exchange on it."""
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        try:
            conn = await Connection.connect(host, int(port), client_id=client_id)
            await conn.api_versions()
        except (OSError, ConnectionClosedError, TimeoutError) as exc:
            raise TargetDiverged(f"cannot talk to {bootstrap}: {exc!r}") from exc
        w = cls(conn, evidence, history, timeout_s, tap)
        for name, pinned in VERSIONS.items():
            rng = conn.broker_versions.get(API_KEYS[name])
            if rng is not None and rng[0] <= min(pinned, rng[1]):
                w.versions[name] = min(pinned, rng[1])
        if w.tap is not None:
            w.tap.opened(w)
        return w

    async def __aenter__(self) -> Wire:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for o in self._others:
            await o.close()
        if self.tap is not None and not self.conn.closed:
            self.tap.closed(self)
        await self.conn.close()

    async def sibling(self, host: str, port: int) -> Wire:
        """Another Wire (same evidence/history) to ``host:port``, closed with this one."""
        if (host, port) == (self.conn.host, self.conn.port):
            return self
        w = await Wire.connect(f"{host}:{port}", evidence=self.evidence, history=self.history,
                               timeout_s=self.timeout_s, client_id=self.conn.client_id, tap=self.tap)
        self._others.append(w)
        return w

    # -- plumbing -------------------------------------------------------------------------------------------
    def version(self, api: str) -> int:
        v = self.versions.get(api)
        if v is None:
            raise TargetDiverged(f"target does not advertise {api} (api key {API_KEYS[api]}) in ApiVersions "
                                 f"at any version we speak (pinned v{VERSIONS[api]})")
        return v

    def serves(self, api: str) -> bool:
        return api in self.versions

    def broker_max_version(self, api: str) -> int | None:
        """The highest version of ``api`` the broker advertises (ApiVersions), or None: for checks about a feature
        that only a newer version than the pinned one defines (e.g. ListOffsets v8 EARLIEST_LOCAL)."""
        rng = self.conn.broker_versions.get(API_KEYS[api])
        return rng[1] if rng is not None else None

    def submit(self, api: str, request: Any, *, timeout_s: float | None = None, label: str | None = None,
               summary: Any = None, version: int | None = None) -> Awaitable[Response]:
        """Send now (pipelining), await later; the exchange is added to the evidence when it completes.
        ``version`` overrides the negotiated one (a check about an older version's behaviour)."""
        version = self.version(api) if version is None else version
        limit = self.timeout_s if timeout_s is None else timeout_s
        tap, token = self.tap, None
        if tap is not None:
            token = tap.sent(self, API_KEYS.get(api, request.API_KEY), version, request, limit)
        try:
            fut = self.conn.submit(request, version)
        except ConnectionClosedError as exc:
            if tap is not None:
                tap.answered(token, None, "connection closed before sending")
            raise TargetDiverged(f"connection already closed by the broker before {api} v{version}") from exc

        async def wait() -> Response:
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for returns an answer that meets a cancellation
                # (gh-86296), and a cancelled member loop of a check then ran on, its session waiting forever
                async with asyncio.timeout(limit):
                    r = await fut
            except ConnectionClosedError as exc:
                if tap is not None:
                    tap.answered(token, None, "connection closed")
                self._note(api, version, summary if summary is not None else request, f"connection closed: {exc}",
                           None, label)
                raise TargetDiverged(f"broker closed the connection instead of answering {api} v{version}") from exc
            except TimeoutError as exc:
                if tap is not None:
                    tap.answered(token, None, f"no answer within {limit:.1f}s")
                self._note(api, version, summary if summary is not None else request,
                           f"no answer within {limit:.1f}s", None, label)
                raise TargetDiverged(f"broker did not answer {api} v{version} within {limit:.1f}s") from exc
            if tap is not None:
                tap.answered(token, r, None)
            return r

        return wait()

    async def request(self, api: str, request: Any, *, timeout_s: float | None = None, label: str | None = None,
                      summary: Any = None, record: bool = True, version: int | None = None) -> Response:
        """Send one request and await the answer; records the exchange in the evidence unless ``record`` is False."""
        r = await self.submit(api, request, timeout_s=timeout_s, label=label, summary=summary, version=version)
        if record:
            self._note(api, r.api_version, summary if summary is not None else request, r.body, r.rtt_ns / 1e6,
                       label)
        return r

    def _note(self, api: str, version: int, req: Any, resp: Any, rtt_ms: float | None, label: str | None) -> None:
        if self.evidence is not None:
            self.evidence.exchange(api, version, req, resp, rtt_ms, label=label)

    def op(self, f: str, value: Any) -> Op:
        return Op(self.history, self.process, f, value)

    def new_value(self) -> int:
        return self.history.unique_value() if self.history is not None else next(_topic_seq) + 1_000_000

    # -- topics and metadata ------------------------------------------------------------------------------
    async def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int = 1,
                           configs: dict[str, str] | None = None) -> str:
        """Create a topic (unique name by default) and wait until Metadata shows a leader for every partition."""
        name = name or unique_name()
        assignments = await self._pinned(partitions, replication_factor) if self.pin_leader else None
        code, message = await self.create_topic_code(name, partitions, replication_factor, configs,
                                                     assignments=assignments)
        if code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS: fine for a name we chose to reuse
            raise TargetDiverged(f"CreateTopics {name} failed with error {code}: {message}")
        return await self.wait_topic_ready(name, partitions)

    async def wait_topic_ready(self, name: str, partitions: int) -> str:
        """Until Metadata shows a leader for each of the topic's partitions and each leader serves it."""
        for _ in range(100):
            md = await self.metadata([name], record=False)
            t = md.get(name)
            if t and t["error_code"] == 0 and len(t["partitions"]) == partitions and all(
                    p["leader"] >= 0 for p in t["partitions"].values()):
                if await self._leaders_serve(name, t["partitions"], md["_brokers"]):
                    return name
            await asyncio.sleep(0.05)
        raise TargetDiverged(f"topic {name} created but Metadata never showed {partitions} partitions with leaders "
                             "that serve them")

    async def _leaders_serve(self, topic: str, parts: dict[int, Any], brokers: dict[int, tuple[str, int]]) -> bool:
        """True once each partition's leader answers ListOffsets for it without a leadership error.

        Kafka's brokers update the Metadata cache before their replica manager applies the same metadata
        (BrokerMetadataPublisher), so for a moment a new topic's leader answers NOT_LEADER_OR_FOLLOWER; clients
        retry that, and a check must not start inside the window (Kafka's own tests wait the same way)."""
        T = ListOffsetsRequest.ListOffsetsTopic
        by_leader: dict[int, list[int]] = {}
        for index, p in parts.items():
            by_leader.setdefault(p["leader"], []).append(index)
        for leader, indexes in sorted(by_leader.items()):
            if leader not in brokers:
                return False
            w = await self.sibling(*brokers[leader])
            req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
                T.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=LATEST)
                for i in sorted(indexes)])])
            r = await w.request("ListOffsets", req, record=False)
            if any(p.error_code in (E.UnknownTopicOrPartitionError.errno, E.LeaderNotAvailableError.errno,
                                     E.NotLeaderForPartitionError.errno) for t in r.body.topics for p in t.partitions):
                return False   # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
        return True

    async def _pinned(self, partitions: int, replication_factor: int) -> list[list[int]] | None:
        """Replica lists putting this Wire's broker first for every partition (None on a single-broker target or
        when this broker is not among the advertised ones); replication -1 pins one replica."""
        brokers = (await self.metadata([], record=False))["_brokers"]
        me = next((b for b, addr in brokers.items() if addr == (self.conn.host, self.conn.port)), None)
        if me is None or len(brokers) < 2:
            return None
        others = [b for b in sorted(brokers) if b != me]
        rf = max(1, replication_factor)
        return [[me, *others[:rf - 1]] for _ in range(partitions)]

    async def create_topic_code(self, name: str, partitions: int = 1, replication_factor: int = -1,
                                configs: dict[str, str] | None = None,
                                assignments: list[list[int]] | None = None) -> tuple[int, str | None]:
        """One CreateTopics, no waiting → (error_code, error_message): for checks about the answer itself.
        ``assignments``: a replica list per partition (Kafka then wants partitions and replication -1)."""
        T = CreateTopicsRequest.CreatableTopic
        C = T.CreatableTopicConfig
        A = T.CreatableReplicaAssignment
        manual = [A(partition_index=i, broker_ids=r) for i, r in enumerate(assignments or [])]
        req = CreateTopicsRequest(topics=[T(name=name, num_partitions=-1 if manual else partitions,
                                            replication_factor=-1 if manual else replication_factor,
                                            assignments=manual,
                                            configs=[C(name=k, value=v) for k, v in (configs or {}).items()])],
                                  timeout_ms=10000, validate_only=False)
        r = await self.request("CreateTopics", req)
        return r.body.topics[0].error_code, r.body.topics[0].error_message

    async def metadata(self, topics: Iterable[str] | None = None, *, record: bool = True) -> dict[str, Any]:
        """{topic: {error_code, partitions: {index: {error_code, leader, leader_epoch, replicas, isr}}}} plus
        ``"_brokers"`` ({node id: (host, port)})."""
        T = MetadataRequest.MetadataRequestTopic
        req = MetadataRequest(topics=None if topics is None else [T(name=t, topic_id=None) for t in topics],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)
        r = await self.request("Metadata", req, record=record)
        out: dict[str, Any] = {"_brokers": {b.node_id: (b.host, b.port) for b in r.body.brokers}}
        for t in r.body.topics:
            out[t.name] = {"error_code": t.error_code, "partitions": {
                p.partition_index: {"error_code": p.error_code, "leader": p.leader_id,
                                    "leader_epoch": getattr(p, "leader_epoch", -1),
                                    "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes)}
                for p in t.partitions}}
        return out

    async def leader(self, topic: str, partition: int = 0) -> Wire:
        """A Wire to the partition's leader (this one on single-broker targets)."""
        md = await self.metadata([topic], record=False)
        node = md[topic]["partitions"][partition]["leader"]
        host, port = md["_brokers"][node]
        return await self.sibling(host, port)

    async def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """FindCoordinator v3 (group) → (error_code, host, port)."""
        r = await self.request("FindCoordinator", FindCoordinatorRequest(key=group, key_type=0))
        return r.body.error_code, r.body.host, r.body.port

    async def coordinator(self, group: str, *, within_s: float = 20.0) -> Wire:
        """A Wire to the group's coordinator (FindCoordinator v3), closed with this one.

        COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR are retriable (Kafka's
        Errors: RetriableException) and every client retries them: Kafka answers them while `__consumer_offsets`
        is being created or its partition loaded after a restart. Retried for ``within_s``; other errors at once."""
        deadline = time.monotonic() + within_s
        while True:
            err, host, port = await self.find_coordinator(group)
            if not err:
                return await self.sibling(host, port)
            if err not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                raise TargetDiverged(f"FindCoordinator({group}) error {err}"
                                     + (f" for {within_s:g} s" if err in RETRIABLE_COORDINATOR else ""))
            await asyncio.sleep(0.1)

    async def coordinator_ready(self, group: str, *, within_s: float = 30.0) -> None:
        """Until ``group``'s coordinator answers OffsetFetch without a coordinator error: setup for checks whose rule
        is not about coordinators. A fresh Kafka creates `__consumer_offsets` on the first FindCoordinator and
        answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until its partition is loaded; some clients do not
        recover from that (librdkafka#5586: an OffsetFetch refused that way leaves an assigned partition unstarted)."""
        deadline = time.monotonic() + within_s
        while True:
            co = await self.coordinator(group, within_s=max(0.1, deadline - time.monotonic()))
            top, parts = await co.offset_fetch_full(group, [(f"{group}-probe", 0)])
            codes = {top, *(e for *_rest, e in parts.values())}
            if not codes & RETRIABLE_COORDINATOR:
                return
            if time.monotonic() > deadline:
                raise TargetDiverged(f"group {group}: OffsetFetch still answered {sorted(codes)} after {within_s:g} s")
            await asyncio.sleep(0.1)

    # -- produce ---------------------------------------------------------------------------------------------
    def produce_request(self, topic: str, partition: int, batch: bytes, acks: int = -1,
                        timeout_ms: int = 10000) -> ProduceRequest:
        T = ProduceRequest.TopicProduceData
        return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=batch)])])

    async def produce(self, topic: str, partition: int = 0, *, count: int = 1, size: int = 0,
                      payloads: Sequence[bytes | None] | None = None, acks: int = -1, check: bool = True,
                      timestamp_ms: int = 1_700_000_000_000, timeout_ms: int = 10000,
                      compression: int = 0) -> ProduceResult:
        """Append ONE batch of ``count`` records, each ``size`` bytes of payload (unique values, recorded).

        ``payloads`` overrides the generated ones (then history values are the decoded payloads). With ``check``
        a non-zero error code is a divergence. ``compression`` (e.g. ``GZIP``) compresses the batch.
        """
        if payloads is None:
            values = [self.new_value() for _ in range(count)]
            payloads = [encode_value(v, size) for v in values]
        else:
            values = [decode_value(p) for p in payloads]  # type: ignore[misc]
        limit = max(self.timeout_s, timeout_ms / 1000 + 10)
        batch = record_batch(payloads, timestamp_ms=timestamp_ms, compression=compression)
        recs = [{"topic": topic, "partition": partition, "key": None, "value": v} for v in values]
        summary = {"topic": topic, "partition": partition, "acks": acks, "records": len(payloads),
                   "batch_bytes": len(batch)}
        with self.op("send", {"records": recs}) as op:
            r = await self.request("Produce", self.produce_request(topic, partition, batch, acks, timeout_ms),
                                   summary=summary, timeout_s=limit)
            if acks == 0:  # no answer: the outcome stays unknown (info) in the history
                return ProduceResult(0, -1, r.rtt_ns / 1e6, values, len(batch))  # type: ignore[arg-type]
            pr = r.body.responses[0].partition_responses[0]
            if pr.error_code == 0:
                op.ok({"records": [dict(x, offset=pr.base_offset + i) for i, x in enumerate(recs)]})
            else:
                op.fail({"records": recs, "error_code": pr.error_code})
        if check and pr.error_code:
            raise TargetDiverged(f"Produce to {topic}/{partition} failed with error {pr.error_code}")
        return ProduceResult(pr.error_code, pr.base_offset, r.rtt_ns / 1e6, values,  # type: ignore[arg-type]
                             len(batch), getattr(pr, "log_start_offset", -1))

    async def produce_batch(self, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                            label: str | None = None, timeout_ms: int = 10000) -> tuple[int, int]:
        """Send exactly ``batch`` (e.g. an idempotent producer's batch, or its retry) → (error_code, base_offset).
        Evidence only, no history: a retry carries values already recorded by the send it repeats."""
        summary = {"topic": topic, "partition": partition, "acks": acks, "batch_bytes": len(batch),
                   "producer": _producer_fields(batch)}
        r = await self.request("Produce", self.produce_request(topic, partition, batch, acks, timeout_ms),
                               summary=summary, label=label, timeout_s=max(self.timeout_s, timeout_ms / 1000 + 10))
        pr = r.body.responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset

    async def init_producer_id(self, transactional_id: str | None = None, *, producer_id: int = -1,
                               producer_epoch: int = -1, transaction_timeout_ms: int = 60_000,
                               version: int | None = None) -> tuple[int, int, int]:
        """InitProducerId (v4 pinned; ``producer_id``/``producer_epoch`` exist from v3, KIP-360) →
        (error_code, producer_id, producer_epoch)."""
        req = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                    producer_id=producer_id, producer_epoch=producer_epoch)
        body = (await self.request("InitProducerId", req, version=version)).body
        return body.error_code, body.producer_id, body.producer_epoch

    async def produce_records(self, topic: str, partition: int = 0, *, count: int = 1, size: int = 10,
                              keyed: bool = True, compression_type: int = 0, timestamps: Sequence[int] | None = None,
                              timestamp_ms: int = 1_700_000_000_000, acks: int = -1) -> ProduceResult:
        """Append ONE batch of ``count`` unique values with keys and headers (``keyed``), optionally compressed and
        with explicit per-record timestamps: the data real consumers see. A non-zero error is a divergence."""
        values = [self.new_value() for _ in range(count)]
        payloads = [encode_value(v, size) for v in values]
        keys = [f"key-{v}".encode() for v in values] if keyed else None
        headers = [[("kct-value", str(v).encode()), ("kct-empty", b"")] for v in values] if keyed else None
        batch = keyed_batch(payloads, keys=keys, headers=headers, timestamps=timestamps,
                            compression_type=compression_type, timestamp_ms=timestamp_ms)
        recs = [{"topic": topic, "partition": partition, "key": None if keys is None else keys[i].decode(),
                 "value": v} for i, v in enumerate(values)]
        summary = {"topic": topic, "partition": partition, "acks": acks, "records": count, "batch_bytes": len(batch),
                   "compression_type": compression_type, "keyed": keyed}
        with self.op("send", {"records": recs}) as op:
            r = await self.request("Produce", self.produce_request(topic, partition, batch, acks), summary=summary)
            pr = r.body.responses[0].partition_responses[0]
            if pr.error_code == 0:
                op.ok({"records": [dict(x, offset=pr.base_offset + i) for i, x in enumerate(recs)]})
            else:
                op.fail({"records": recs, "error_code": pr.error_code})
        if pr.error_code:
            raise TargetDiverged(f"Produce of a {count}-record batch (compression {compression_type}) to "
                                 f"{topic}/{partition} failed with error {pr.error_code}")
        return ProduceResult(pr.error_code, pr.base_offset, r.rtt_ns / 1e6, values, len(batch),  # type: ignore[arg-type]
                             getattr(pr, "log_start_offset", -1))

    # -- fetch -----------------------------------------------------------------------------------------------
    def fetch_request(self, parts: Sequence[tuple[str, int, int]], *, max_wait_ms: int, min_bytes: int,
                      max_bytes: int = 50 << 20, partition_max_bytes: int | Sequence[int] = 1 << 20,
                      isolation_level: int = 0, replica_id: int = -1, current_leader_epoch: int = -1,
                      last_fetched_epoch: int = -1) -> FetchRequest:
        """A sessionless Fetch for ``[(topic, partition, offset)]`` (order kept, per-partition max bytes).
        ``current_leader_epoch`` >= 0 makes the broker refuse (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) unless it
        leads in exactly that epoch (KIP-320); ``last_fetched_epoch`` >= 0 (v12+) asks the broker to check it against
        its log (diverging_epoch, KIP-320/KIP-595)."""
        T = FetchRequest.FetchTopic
        pmb = list(partition_max_bytes) if isinstance(partition_max_bytes, Sequence) else (
            [partition_max_bytes] * len(parts))
        topics: list[Any] = []
        for (topic, p, off), cap in zip(parts, pmb, strict=True):
            fp = T.FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=cap,
                                  current_leader_epoch=current_leader_epoch,
                                  last_fetched_epoch=last_fetched_epoch, log_start_offset=-1)
            if topics and topics[-1][0] == topic:
                topics[-1][1].append(fp)
            else:
                topics.append((topic, [fp]))
        return FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                            max_bytes=max_bytes, isolation_level=isolation_level, session_id=0, session_epoch=-1,
                            topics=[T(topic=t, partitions=ps) for t, ps in topics], forgotten_topics_data=[],
                            rack_id="")

    def submit_fetch(self, parts: Sequence[tuple[str, int, int]], *, max_wait_ms: int, min_bytes: int,
                     label: str | None = None, timeout_s: float | None = None, **kw: Any) -> Awaitable[FetchResult]:
        """Send a Fetch now and return an awaitable FetchResult (to produce while it is parked)."""
        req = self.fetch_request(parts, max_wait_ms=max_wait_ms, min_bytes=min_bytes, **kw)
        summary = {"partitions": {key_of(t, p): o for t, p, o in parts}, "max_wait_ms": max_wait_ms,
                   "min_bytes": min_bytes, **{k: v for k, v in kw.items()}}
        limit = timeout_s if timeout_s is not None else max(self.timeout_s, max_wait_ms / 1000 + 10)
        op = self.op("fetch", {"partitions": summary["partitions"], "max_wait_ms": max_wait_ms,
                               "min_bytes": min_bytes})
        op.__enter__()
        try:
            pending = self.submit("Fetch", req, timeout_s=limit, label=label, summary=summary)
        except BaseException as exc:
            op.__exit__(type(exc), exc, None)
            raise

        async def done() -> FetchResult:
            try:
                r = await pending
            except BaseException as exc:
                op.__exit__(type(exc), exc, None)
                raise
            res = self._fetch_result(r)
            self._note("Fetch", r.api_version, summary, _summary_fetch(res), res.rtt_ms, label)
            op.ok({"records": [{"topic": p.topic, "partition": p.partition, "offset": o,
                                "value": decode_value(v)} for p in res.partitions for b in p.batches
                               for o, v in b.records],
                   "errors": {key_of(p.topic, p.partition): p.error_code for p in res.partitions if p.error_code}})
            return res

        return done()

    async def fetch(self, parts: Sequence[tuple[str, int, int]], *, max_wait_ms: int, min_bytes: int,
                    label: str | None = None, **kw: Any) -> FetchResult:
        """Send a Fetch and await it; see :meth:`fetch_request` for the knobs."""
        return await self.submit_fetch(parts, max_wait_ms=max_wait_ms, min_bytes=min_bytes, label=label, **kw)

    @staticmethod
    def _fetch_result(r: Response) -> FetchResult:
        parts = []
        for t in r.body.responses:
            for p in t.partitions:
                raw = bytes(p.records) if p.records else b""
                div = getattr(p, "diverging_epoch", None)
                parts.append(PartitionFetch(t.topic, p.partition_index, p.error_code, p.high_watermark,
                                            p.log_start_offset, p.last_stable_offset, len(raw),
                                            decode_batches(raw),
                                            (div.epoch, div.end_offset) if div is not None
                                            and (div.epoch >= 0 or div.end_offset >= 0) else None))
        return FetchResult(r.body.error_code, r.rtt_ns / 1e6, parts)

    # -- offsets ---------------------------------------------------------------------------------------------
    async def list_offsets(self, topic: str, partition: int = 0, timestamp: int = LATEST,
                           isolation_level: int = 0) -> tuple[int, int, int]:
        """ListOffsets v7 for one partition → (error_code, offset, timestamp)."""
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[T(name=topic, partitions=[
            T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        with self.op("list_offsets", {"topic": topic, "partition": partition, "timestamp": timestamp}) as op:
            r = await self.request("ListOffsets", req)
            p = r.body.topics[0].partitions[0]
            v = {"topic": topic, "partition": partition, "timestamp": timestamp}
            (op.ok if p.error_code == 0 else op.fail)(dict(v, offset=p.offset, error_code=p.error_code))
        return p.error_code, p.offset, p.timestamp

    async def list_offsets_full(self, topic: str, partition: int = 0, timestamp: int = LATEST, *,
                                isolation_level: int = 0, version: int | None = None) -> tuple[int, int, int, int]:
        """ListOffsets (negotiated version, or ``version``: v8 for EARLIEST_LOCAL, v9 for LATEST_TIERED) for one
        partition → (error_code, offset, timestamp, leader_epoch)."""
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[T(name=topic, partitions=[
            T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        v = {"topic": topic, "partition": partition, "timestamp": timestamp}
        with self.op("list_offsets", v) as op:
            r = await self.request("ListOffsets", req, version=version)
            p = r.body.topics[0].partitions[0]
            (op.ok if p.error_code == 0 else op.fail)(dict(v, offset=p.offset, error_code=p.error_code))
        return p.error_code, p.offset, p.timestamp, getattr(p, "leader_epoch", -1)

    async def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords v2 → (error_code, low_watermark)."""
        T = DeleteRecordsRequest.DeleteRecordsTopic
        req = DeleteRecordsRequest(topics=[T(name=topic, partitions=[
            T.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=10000)
        v = {"topic": topic, "partition": partition, "offset": offset}
        with self.op("delete_records", v) as op:
            r = await self.request("DeleteRecords", req)
            p = r.body.topics[0].partitions[0]
            (op.ok if p.error_code == 0 else op.fail)(dict(v, low_watermark=p.low_watermark,
                                                           error_code=p.error_code))
        return p.error_code, p.low_watermark

    async def offset_commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]], *,
                            generation: int = -1, member_id: str = "", instance_id: str | None = None,
                            leader_epochs: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
        """OffsetCommit v8 → {(topic, partition): error_code}. ``offsets`` maps tp → (offset, metadata);
        ``leader_epochs`` tp → committed leader epoch (default -1)."""
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        by_topic: dict[str, list] = {}
        for (t, p), (o, meta) in offsets.items():
            by_topic.setdefault(t, []).append(T.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=(leader_epochs or {}).get((t, p), -1),
                committed_metadata=meta))
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                                  group_instance_id=instance_id,
                                  topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        v = {"group": group, "offsets": {key_of(t, p): o for (t, p), (o, _) in offsets.items()}}
        with self.op("commit", v) as op:
            r = await self.request("OffsetCommit", req)
            codes = {(t.name, p.partition_index): p.error_code for t in r.body.topics for p in t.partitions}
            errors = {key_of(*k): c for k, c in codes.items() if c}
            done = {k: o for k, o in v["offsets"].items() if k not in errors}
            # Kafka answers each partition on its own: the accepted ones are committed even when others are refused
            # (e.g. OFFSET_METADATA_TOO_LARGE), so a partly refused commit is recorded ok with exactly those; were
            # it recorded failed, a later fetch of an accepted offset would look like a read of a lost write.
            (op.ok if done else op.fail)({"group": group, "offsets": done, "errors": errors})
        return codes

    async def offset_fetch(self, group: str, partitions: Sequence[tuple[str, int]]
                           ) -> dict[tuple[str, int], tuple[int, str | None, int]]:
        """OffsetFetch v7 → {(topic, partition): (committed offset or -1, metadata, error_code)}."""
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        by: dict[str, list[int]] = {}
        for t, p in partitions:
            by.setdefault(t, []).append(p)
        req = OffsetFetchRequest(group_id=group, topics=[T(name=t, partition_indexes=ps) for t, ps in by.items()],
                                 require_stable=False)
        with self.op("fetch_offsets", {"group": group, "partitions": [key_of(t, p) for t, p in partitions]}) as op:
            r = await self.request("OffsetFetch", req)
            out = {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                   for t in r.body.topics for p in t.partitions}
            if r.body.error_code:
                op.fail({"group": group, "error_code": r.body.error_code})
            else:
                op.ok({"group": group, "offsets": {key_of(*k): (o if o >= 0 else None)
                                                   for k, (o, _m, _e) in out.items()}})
        if r.body.error_code:
            return {tp: (-1, None, r.body.error_code) for tp in partitions}
        return out

    async def offset_fetch_full(self, group: str, partitions: Sequence[tuple[str, int]] | None
                                ) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:
        """OffsetFetch v7 with every field → (top-level error, {(topic, partition): (offset, leader_epoch, metadata,
        error_code)}); ``partitions`` None asks for every partition the group has committed (topics null, v2+)."""
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        topics = None
        if partitions is not None:
            by: dict[str, list[int]] = {}
            for t, p in partitions:
                by.setdefault(t, []).append(p)
            topics = [T(name=t, partition_indexes=ps) for t, ps in by.items()]
        req = OffsetFetchRequest(group_id=group, topics=topics, require_stable=False)
        # "fetch_all_offsets" is its own history f: the committed-offsets model pairs fetches with the partitions
        # they asked for, and this one asks for none by name.
        f, asked = ("fetch_all_offsets", {"group": group}) if partitions is None else (
            "fetch_offsets", {"group": group, "partitions": [key_of(t, p) for t, p in partitions]})
        with self.op(f, asked) as op:
            try:
                r = await self.request("OffsetFetch", req)
            except KafkaProtocolError as exc:  # an answer that does not decode is the target breaking the protocol
                raise TargetDiverged(f"the OffsetFetch answer (topics {'null' if topics is None else 'named'}) "
                                     f"could not be decoded: {exc}") from exc
            out = {(t.name, p.partition_index): (p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                 p.metadata, p.error_code) for t in r.body.topics for p in t.partitions}
            if r.body.error_code:
                op.fail({"group": group, "error_code": r.body.error_code})
            else:
                op.ok({"group": group, "offsets": {key_of(*k): (v[0] if v[0] >= 0 else None) for k, v in out.items()}})
        return r.body.error_code, out

    # -- groups ----------------------------------------------------------------------------------------------
    async def join_group(self, group: str, member_id: str = "", *, instance_id: str | None = None,
                         session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 10000,
                         protocol: str = "range", metadata: bytes = b"\x00\x01kct", timeout_s: float = 60.0,
                         protocols: Sequence[tuple[str, bytes]] | None = None, version: int | None = None) -> Any:
        """JoinGroup v7 (one try; MEMBER_ID_REQUIRED comes back as is). Returns the response body.
        ``protocols`` [(name, metadata)] replaces the single ``protocol``; ``version`` pins an older JoinGroup."""
        P = JoinGroupRequest.JoinGroupRequestProtocol
        req = JoinGroupRequest(group_id=group, session_timeout_ms=session_timeout_ms,
                               rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                               group_instance_id=instance_id, protocol_type="consumer",
                               protocols=[P(name=n, metadata=m) for n, m in (protocols or [(protocol, metadata)])],
                               reason=None)
        return (await self.request("JoinGroup", req, timeout_s=timeout_s, version=version)).body

    async def join_new_member(self, group: str, **kw: Any) -> Any:
        """Join as a new dynamic member, answering MEMBER_ID_REQUIRED (KIP-394) with the given id."""
        body = await self.join_group(group, **kw)
        if body.error_code == E.MemberIdRequiredError.errno:
            body = await self.join_group(group, member_id=body.member_id, **kw)
        return body

    async def sync_group(self, group: str, generation: int, member_id: str,
                         assignments: dict[str, bytes] | None = None, *, instance_id: str | None = None,
                         protocol: str = "range", timeout_s: float = 60.0) -> Any:
        A = SyncGroupRequest.SyncGroupRequestAssignment
        req = SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id, protocol_type="consumer", protocol_name=protocol,
                               assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()])
        return (await self.request("SyncGroup", req, timeout_s=timeout_s)).body

    async def heartbeat(self, group: str, generation: int, member_id: str, instance_id: str | None = None) -> int:
        req = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)
        return (await self.request("Heartbeat", req)).body.error_code

    async def leave_group(self, group: str, members: Sequence[tuple[str, str | None]]) -> Any:
        M = LeaveGroupRequest.MemberIdentity
        req = LeaveGroupRequest(group_id=group, members=[M(member_id=m, group_instance_id=i, reason=None)
                                                         for m, i in members])
        return (await self.request("LeaveGroup", req)).body

    async def describe_group(self, group: str) -> Any:
        """DescribeGroups v5 for one group → its entry (error_code, group_state, protocol_data, members)."""
        r = await self.request("DescribeGroups", DescribeGroupsRequest(groups=[group],
                                                                       include_authorized_operations=False))
        return r.body.groups[0]

    # -- replication and cluster ----------------------------------------------------------------------------
    async def offset_for_leader_epoch(self, topic: str, partition: int, leader_epoch: int,
                                      current_leader_epoch: int = -1, replica_id: int = -1) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch v4 → (error_code, leader_epoch, end_offset): the end of ``leader_epoch`` (KIP-279)."""
        T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        req = OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[T(topic=topic, partitions=[
            T.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                                       leader_epoch=leader_epoch)])])
        p = (await self.request("OffsetForLeaderEpoch", req)).body.topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset

    async def broker_configs(self, broker_id: int, keys: Sequence[str]) -> dict[str, str] | None:
        """Broker settings via DescribeConfigs v4 (resource BROKER), or None when not served or refused."""
        if not self.serves("DescribeConfigs"):
            return None
        R = DescribeConfigsRequest.DescribeConfigsResource
        req = DescribeConfigsRequest(resources=[R(resource_type=4, resource_name=str(broker_id),
                                                  configuration_keys=list(keys))],
                                     include_synonyms=False, include_documentation=False)
        res = (await self.request("DescribeConfigs", req)).body.results[0]
        if res.error_code:
            return None
        return {cfg.name: cfg.value for cfg in res.configs if cfg.value is not None}

    async def topic_configs(self, topic: str, keys: Sequence[str] | None = None) -> tuple[int, dict[str, str]]:
        """DescribeConfigs v4 for a topic → (error_code, {name: value}); ``keys`` None asks for every config."""
        R = DescribeConfigsRequest.DescribeConfigsResource
        req = DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=topic,
                                                  configuration_keys=None if keys is None else list(keys))],
                                     include_synonyms=False, include_documentation=False)
        res = (await self.request("DescribeConfigs", req)).body.results[0]
        return res.error_code, {cfg.name: cfg.value for cfg in res.configs if cfg.value is not None}

    async def describe_quorum(self) -> Any:
        """DescribeQuorum for __cluster_metadata-0 (a broker forwards it to the active controller, KIP-595) → the
        answer's body, as kafka-python decodes it."""
        T = DescribeQuorumRequest.TopicData
        req = DescribeQuorumRequest(topics=[T(topic_name="__cluster_metadata",
                                              partitions=[T.PartitionData(partition_index=0)])])
        return (await self.request("DescribeQuorum", req)).body

    async def elect_preferred_leader(self, topic: str, partition: int) -> int:
        """ElectLeaders v2 (PREFERRED) for one partition (any broker forwards it, KIP-460) → its error code."""
        T = ElectLeadersRequest.TopicPartitions
        req = ElectLeadersRequest(election_type=0, topic_partitions=[T(topic=topic, partitions=[partition])],
                                  timeout_ms=30_000)
        body = (await self.request("ElectLeaders", req, timeout_s=40)).body
        if getattr(body, "error_code", 0):
            return body.error_code
        return body.replica_election_results[0].partition_result[0].error_code


# KIP-848 consumer groups (schemas: reference_broker/messages.py; suites/test_consumer_protocol.py)
VERSIONS.update({"ConsumerGroupHeartbeat": 1, "ConsumerGroupDescribe": 0})
API_KEYS.update({"ConsumerGroupHeartbeat": 68, "ConsumerGroupDescribe": 69})
