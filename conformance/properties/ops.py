"""One Kafka request per function, over the protocol-level client, returning plain tuples of what a check compares.

Why: conformance checks must see the exact error code and offsets a broker answers (no client retries, no
version guessing beyond ApiVersions), and suites must not import from tests/. Used by the property machines and
by the rebalance and ISR/HW suites. Versions are the highest both sides speak, capped where a newer version changes
the request shape (Fetch v13+ needs topic ids, OffsetFetch v8+ batches groups, FindCoordinator v4+ batches keys).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
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
from kafka.protocol.producer import ProduceRequest
from kafka.record import MemoryRecords

from conformance.evidence import Evidence
from conformance.wire import TargetDiverged, record_batch
from reference_broker.client.protocol import Connection, ConnectionClosedError, Response

# Kafka error codes the checks name (kafka.errors has them too; plain ints keep assertion messages short).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
FENCED_LEADER_EPOCH = 74
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82

EARLIEST, LATEST = -2, -1

# Highest version we use per API key: newer ones change the request's shape, not the rule under test.
CAPS = {0: 9, 1: 12, 2: 7, 3: 12, 8: 8, 9: 7, 10: 3, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 19: 7, 21: 2, 23: 4,
        32: 4, 43: 2}

CONSUMER_PROTOCOLS = [("range", b"\x00\x01meta")]


@dataclass(frozen=True)
class Fetched:
    """One partition of a Fetch answer: error, high watermark, log start and the (offset, value) records."""

    error: int
    high_watermark: int
    log_start: int
    records: list[tuple[int, bytes | None]]


@dataclass(frozen=True)
class PartitionMeta:
    """Metadata of one partition: leader, leader epoch, replicas and ISR (broker ids)."""

    error: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


async def connect(host: str, port: int, client_id: str = "kct-conformance") -> Connection:
    """A connection that has negotiated API versions (capped by CAPS)."""
    c = await Connection.connect(host, port, client_id=client_id)
    await c.api_versions()
    for key, cap in CAPS.items():
        if key in c.versions:
            c.versions[key] = min(c.versions[key], cap)
    return c


async def connect_bootstrap(bootstrap: str, client_id: str = "kct-conformance") -> Connection:
    """Connect to the first address of a bootstrap string."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return await connect(host, int(port), client_id)


_evidence: Evidence | None = None


def attach_evidence(evidence: Evidence | None) -> None:
    """Record every exchange made through this module in ``evidence`` (the plugin's per-check fixture), or stop."""
    global _evidence
    _evidence = evidence


async def _call(c: Connection, req: Any, version_: int, timeout: float = 30.0) -> Response:
    """One request; the broker closing the connection or never answering is a divergence (TargetDiverged)."""
    name = type(req).__name__.removesuffix("Request")
    try:
        r = await c.request(req, version_, timeout=timeout)
    except ConnectionClosedError as exc:
        if _evidence is not None:
            _evidence.exchange(name, version_, req, f"connection closed: {exc}", None)
        raise TargetDiverged(f"{c.host}:{c.port} closed the connection instead of answering {name} "
                             f"v{version_}") from exc
    except TimeoutError as exc:
        if _evidence is not None:
            _evidence.exchange(name, version_, req, f"no answer within {timeout:.0f}s", None)
        raise TargetDiverged(f"{c.host}:{c.port} did not answer {name} v{version_} within {timeout:.0f}s") from exc
    if _evidence is not None:
        _evidence.exchange(name, version_, req, r.body, r.rtt_ns / 1e6)
    return r


def version(c: Connection, api_key: int) -> int:
    if api_key not in c.versions:
        raise TargetDiverged(f"broker at {c.host}:{c.port} does not serve api key {api_key}")
    return min(c.versions[api_key], CAPS.get(api_key, c.versions[api_key]))


def batch(values: list[bytes], timestamp: int = 1_700_000_000_000) -> bytes:
    """One record batch v2 (built by kafka.record, via the suites' shared builder)."""
    return record_batch(values, timestamp_ms=timestamp)


def decode_records(data: bytes | None) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    if not data:
        return out
    mr = MemoryRecords(bytes(data))
    while (b := mr.next_batch()) is not None:
        out.extend((r.offset, r.value) for r in b)
    return out


# ---------------------------------------------------------------------------------------------- topics & data


async def create_topic(c: Connection, name: str, partitions: int = 1, replication_factor: int = -1,
                       configs: dict[str, str] | None = None) -> int:
    """CreateTopics; returns the topic's error code (0, or e.g. TOPIC_ALREADY_EXISTS=36)."""
    T = CreateTopicsRequest.CreatableTopic
    C = T.CreatableTopicConfig
    req = CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=replication_factor,
                                        assignments=[], configs=[C(name=k, value=v) for k, v in (configs or {}).items()])],
                              timeout_ms=10_000, validate_only=False)
    r = await _call(c, req, version(c, 19))
    return r.body.topics[0].error_code


async def metadata(c: Connection, topics: list[str]) -> tuple[dict[int, tuple[str, int]], dict[tuple[str, int], PartitionMeta]]:
    """(brokers {id: (host, port)}, {(topic, partition): PartitionMeta}) without auto-creating topics."""
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[T(topic_id=None, name=t) for t in topics], allow_auto_topic_creation=False,
                          include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    r = await _call(c, req, version(c, 3))
    brokers = {b.node_id: (b.host, b.port) for b in r.body.brokers}
    parts = {(t.name, p.partition_index): PartitionMeta(p.error_code or t.error_code, p.leader_id,
                                                        getattr(p, "leader_epoch", -1), list(p.replica_nodes),
                                                        list(p.isr_nodes))
             for t in r.body.topics for p in t.partitions}
    return brokers, parts


async def produce(c: Connection, topic: str, partition: int, values: list[bytes], acks: int = -1,
                  timeout_ms: int = 10_000) -> tuple[int, int, int]:
    """Produce one batch; returns (error, base_offset, log_start_offset)."""
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=batch(values))])])
    r = await _call(c, req, version(c, 0))
    p = r.body.responses[0].partition_responses[0]
    return p.error_code, p.base_offset, getattr(p, "log_start_offset", -1)


async def fetch(c: Connection, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                max_bytes: int = 1 << 20, replica_id: int = -1, min_bytes: int = 1,
                current_leader_epoch: int = -1) -> Fetched:
    """A sessionless consumer Fetch (read_uncommitted) of one partition; ``current_leader_epoch`` >= 0 makes the
    broker refuse (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) unless it leads in exactly that epoch (KIP-320)."""
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[
                           T.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
                                            current_leader_epoch=current_leader_epoch, last_fetched_epoch=-1,
                                            log_start_offset=-1)])],
                       forgotten_topics_data=[], rack_id="")
    r = await _call(c, req, version(c, 1), timeout=max_wait_ms / 1000 + 30)
    if not r.body.responses or not r.body.responses[0].partitions:
        raise TargetDiverged(f"Fetch of {topic}/{partition} at {offset} (max_wait_ms {max_wait_ms}) answered without "
                             f"that partition: {r.body}")
    p = r.body.responses[0].partitions[0]
    return Fetched(p.error_code, p.high_watermark, p.log_start_offset, decode_records(p.records))


async def list_offsets(c: Connection, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets for a consumer (replica -1, read_uncommitted); returns (error, offset)."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    r = await _call(c, req, version(c, 2))
    p = r.body.topics[0].partitions[0]
    return p.error_code, p.offset


async def delete_records(c: Connection, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """DeleteRecords before `offset` (-1 = HW); returns (error, low_watermark)."""
    T = DeleteRecordsRequest.DeleteRecordsTopic
    req = DeleteRecordsRequest(topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=10_000)
    r = await _call(c, req, version(c, 21))
    p = r.body.topics[0].partitions[0]
    return p.error_code, p.low_watermark


async def offset_for_leader_epoch(c: Connection, topic: str, partition: int, leader_epoch: int,
                                  current_leader_epoch: int = -1, replica_id: int = -1) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch; returns (error, leader_epoch, end_offset) — the end of `leader_epoch` (KIP-279)."""
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    req = OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[T(topic=topic, partitions=[
        T.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                                   leader_epoch=leader_epoch)])])
    r = await _call(c, req, version(c, 23))
    p = r.body.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


# ---------------------------------------------------------------------------------------------- groups


async def find_coordinator(c: Connection, group: str) -> tuple[int, str, int]:
    """FindCoordinator (group); returns (error, host, port)."""
    r = await _call(c, FindCoordinatorRequest(key=group, key_type=0), version(c, 10))
    return r.body.error_code, r.body.host, r.body.port


async def coordinator(bootstrap: str, group: str, client_id: str = "kct-conformance") -> Connection:
    """A connection to the group's coordinator (asked of the bootstrap broker)."""
    c = await connect_bootstrap(bootstrap, client_id)
    try:
        err, host, port = await find_coordinator(c, group)
    finally:
        await c.close()
    if err:
        raise RuntimeError(f"FindCoordinator({group!r}) answered error {err}")
    return await connect(host, port, client_id)


@dataclass(frozen=True)
class Joined:
    """A JoinGroup answer: error, generation, member id, leader id and the members the leader is told of."""

    error: int
    generation: int
    member_id: str
    leader: str
    members: list[str]
    protocol: str | None


async def join(c: Connection, group: str, member_id: str = "", instance_id: str | None = None,
               session_ms: int = 10_000, rebalance_ms: int = 10_000, version_: int | None = None,
               protocols: list[tuple[str, bytes]] | None = None, timeout: float = 60) -> Joined:
    """JoinGroup (consumer protocol type); parks until the broker completes the join phase."""
    P = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                           member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
                           protocols=[P(name=n, metadata=m) for n, m in (protocols or CONSUMER_PROTOCOLS)],
                           reason=None)
    r = await _call(c, req, version_ if version_ is not None else version(c, 11), timeout=timeout)
    b = r.body
    return Joined(b.error_code, b.generation_id, b.member_id, b.leader, [m.member_id for m in b.members],
                  getattr(b, "protocol_name", None))


async def join_new(c: Connection, group: str, **kw: Any) -> Joined:
    """Join as a new dynamic member: answer MEMBER_ID_REQUIRED (KIP-394) by joining again with the id."""
    j = await join(c, group, **kw)
    if j.error == MEMBER_ID_REQUIRED:
        j = await join(c, group, member_id=j.member_id, **kw)
    return j


async def sync(c: Connection, group: str, generation: int, member_id: str,
               assignments: dict[str, bytes] | None = None, instance_id: str | None = None,
               timeout: float = 60) -> tuple[int, bytes]:
    """SyncGroup; returns (error, assignment)."""
    A = SyncGroupRequest.SyncGroupRequestAssignment
    req = SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                           group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
                           assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()])
    r = await _call(c, req, version(c, 14), timeout=timeout)
    return r.body.error_code, bytes(r.body.assignment or b"")


async def heartbeat(c: Connection, group: str, generation: int, member_id: str,
                    instance_id: str | None = None) -> int:
    """Heartbeat; returns the error code."""
    r = await _call(c, HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                         group_instance_id=instance_id), version(c, 12))
    return r.body.error_code


async def leave(c: Connection, group: str, member_id: str, instance_id: str | None = None) -> tuple[int, int]:
    """LeaveGroup for one member; returns (top-level error, member error)."""
    M = LeaveGroupRequest.MemberIdentity
    v = version(c, 13)
    req = LeaveGroupRequest(group_id=group, member_id=member_id,
                            members=[M(member_id=member_id, group_instance_id=instance_id, reason=None)])
    r = await _call(c, req, v)
    members = getattr(r.body, "members", None) or []
    return r.body.error_code, (members[0].error_code if members else r.body.error_code)


async def commit(c: Connection, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int],
                 instance_id: str | None = None) -> dict[tuple[str, int], int]:
    """OffsetCommit; returns {(topic, partition): error}."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(T.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=None,
            commit_timestamp=-1))
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                              group_instance_id=instance_id, retention_time_ms=-1,
                              topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    r = await _call(c, req, version(c, 8))
    return {(t.name, p.partition_index): p.error_code for t in r.body.topics for p in t.partitions}


async def fetch_offsets(c: Connection, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """OffsetFetch; returns {(topic, partition): (committed offset or -1, error)}."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    by: dict[str, list[int]] = {}
    for t, p in tps:
        by.setdefault(t, []).append(p)
    req = OffsetFetchRequest(group_id=group, topics=[T(name=t, partition_indexes=ps) for t, ps in by.items()],
                             require_stable=False)
    r = await _call(c, req, version(c, 9))
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in r.body.topics
            for p in t.partitions}


@dataclass(frozen=True)
class Described:
    """DescribeGroups for one group: error, state, protocol and member ids."""

    error: int
    state: str
    protocol: str
    members: list[str]


async def describe_group(c: Connection, group: str) -> Described:
    r = await _call(c, DescribeGroupsRequest(groups=[group], include_authorized_operations=False), version(c, 15))
    g = r.body.groups[0]
    return Described(g.error_code, g.group_state, g.protocol_data, [m.member_id for m in g.members])


async def broker_configs(c: Connection, broker_id: int, keys: list[str]) -> dict[str, str] | None:
    """Broker settings via DescribeConfigs (resource BROKER), or None if the broker does not serve it or refuses."""
    if 32 not in c.versions:
        return None
    R = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest(resources=[R(resource_type=4, resource_name=str(broker_id), configuration_keys=keys)],
                                 include_synonyms=False, include_documentation=False)
    r = await _call(c, req, version(c, 32))
    res = r.body.results[0]
    if res.error_code:
        return None
    return {cfg.name: cfg.value for cfg in res.configs if cfg.value is not None}


async def elect_preferred_leader(c: Connection, topic: str, partition: int) -> int:
    """ElectLeaders (PREFERRED) for one partition (send it to the controller or any broker, KIP-460); its error."""
    T = ElectLeadersRequest.TopicPartitions
    req = ElectLeadersRequest(election_type=0, topic_partitions=[T(topic=topic, partitions=[partition])],
                              timeout_ms=30_000)
    r = await _call(c, req, version(c, 43), timeout=40)
    if getattr(r.body, "error_code", 0):
        return r.body.error_code
    return r.body.replica_election_results[0].partition_result[0].error_code
