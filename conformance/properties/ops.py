"""Plain-tuple views of ``conformance.wire.Wire`` for the property machines and the group and ISR/HW suites.

Why: a model-based step compares a few numbers (an error code, an offset, a generation), so these return exactly
those. No request is built here: each function is a view over one ``Wire`` method, so requests, version pinning,
evidence and history recording exist once (``conformance/wire.py``). A ``Wire`` records into the evidence it was
connected with (``connect_bootstrap(..., evidence=...)``), and into a history only when given one.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka import errors as E

from conformance.evidence import Evidence
from conformance.wire import TargetDiverged, Wire, record_batch

__all__ = ["TargetDiverged", "Wire"]

# Kafka error codes the checks name (kafka.errors has them too; plain ints keep assertion messages short).
NONE = 0
OFFSET_OUT_OF_RANGE = E.OffsetOutOfRangeError.errno
UNKNOWN_TOPIC_OR_PARTITION = E.UnknownTopicOrPartitionError.errno
NOT_LEADER_OR_FOLLOWER = E.NotLeaderForPartitionError.errno
NOT_ENOUGH_REPLICAS = E.NotEnoughReplicasError.errno
NOT_ENOUGH_REPLICAS_AFTER_APPEND = E.NotEnoughReplicasAfterAppendError.errno
ILLEGAL_GENERATION = E.IllegalGenerationError.errno
INCONSISTENT_GROUP_PROTOCOL = E.InconsistentGroupProtocolError.errno
UNKNOWN_MEMBER_ID = E.UnknownMemberIdError.errno
INVALID_SESSION_TIMEOUT = E.InvalidSessionTimeoutError.errno
REBALANCE_IN_PROGRESS = E.RebalanceInProgressError.errno
FENCED_LEADER_EPOCH = E.FencedLeaderEpochError.errno
MEMBER_ID_REQUIRED = E.MemberIdRequiredError.errno
FENCED_INSTANCE_ID = E.FencedInstanceIdError.errno

EARLIEST, LATEST = -2, -1

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


async def connect(host: str, port: int, client_id: str = "kct-conformance", *,
                  evidence: Evidence | None = None) -> Wire:
    """A Wire that has negotiated API versions (pinned in ``conformance.wire.VERSIONS``)."""
    return await Wire.connect(f"{host}:{port}", evidence=evidence, client_id=client_id)


async def connect_bootstrap(bootstrap: str, client_id: str = "kct-conformance", *,
                            evidence: Evidence | None = None) -> Wire:
    """Connect to the first address of a bootstrap string."""
    return await Wire.connect(bootstrap, evidence=evidence, client_id=client_id)


def batch(values: Sequence[bytes | None], timestamp: int = 1_700_000_000_000) -> bytes:
    """One record batch v2 (built by kafka.record, via the suites' shared builder)."""
    return record_batch(values, timestamp_ms=timestamp)


# ---------------------------------------------------------------------------------------------- topics & data


async def create_topic(w: Wire, name: str, partitions: int = 1, replication_factor: int = -1,
                       configs: dict[str, str] | None = None) -> int:
    """CreateTopics without waiting; returns the topic's error code (0, or e.g. TOPIC_ALREADY_EXISTS=36). A Wire
    with ``pin_leader`` places every partition's leader on its own broker (multi-broker targets)."""
    assignments = await w._pinned(partitions, replication_factor) if w.pin_leader else None
    return (await w.create_topic_code(name, partitions, replication_factor, configs, assignments=assignments))[0]


async def metadata(w: Wire, topics: list[str]) -> tuple[dict[int, tuple[str, int]], dict[tuple[str, int], PartitionMeta]]:
    """(brokers {id: (host, port)}, {(topic, partition): PartitionMeta}) without auto-creating topics."""
    md = await w.metadata(topics)
    brokers = md.pop("_brokers")
    parts = {(t, i): PartitionMeta(p["error_code"] or m["error_code"], p["leader"], p["leader_epoch"],
                                   p["replicas"], p["isr"])
             for t, m in md.items() for i, p in m["partitions"].items()}
    return brokers, parts


async def produce(w: Wire, topic: str, partition: int, values: list[bytes | None], acks: int = -1,
                  timeout_ms: int = 10_000) -> tuple[int, int, int]:
    """Produce one batch; returns (error, base_offset, log_start_offset)."""
    r = await w.produce(topic, partition, payloads=values, acks=acks, check=False, timeout_ms=timeout_ms)
    return r.error_code, r.base_offset, r.log_start_offset


async def fetch(w: Wire, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                max_bytes: int = 1 << 20, replica_id: int = -1, min_bytes: int = 1,
                current_leader_epoch: int = -1) -> Fetched:
    """A sessionless consumer Fetch (read_uncommitted) of one partition; ``current_leader_epoch`` >= 0 makes the
    broker refuse (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) unless it leads in exactly that epoch (KIP-320)."""
    r = await w.fetch([(topic, partition, offset)], max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                      max_bytes=max_bytes, partition_max_bytes=max_bytes, replica_id=replica_id,
                      current_leader_epoch=current_leader_epoch)
    p = r.part(topic, partition)
    return Fetched(p.error_code, p.high_watermark, p.log_start_offset, p.offsets_and_values)


async def list_offsets(w: Wire, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets for a consumer (replica -1, read_uncommitted); returns (error, offset)."""
    err, offset, _ts = await w.list_offsets(topic, partition, timestamp)
    return err, offset


async def delete_records(w: Wire, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """DeleteRecords before `offset` (-1 = HW); returns (error, low_watermark)."""
    return await w.delete_records(topic, partition, offset)


async def offset_for_leader_epoch(w: Wire, topic: str, partition: int, leader_epoch: int,
                                  current_leader_epoch: int = -1, replica_id: int = -1) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch; returns (error, leader_epoch, end_offset) — the end of `leader_epoch` (KIP-279)."""
    return await w.offset_for_leader_epoch(topic, partition, leader_epoch, current_leader_epoch, replica_id)


# ---------------------------------------------------------------------------------------------- groups


async def find_coordinator(w: Wire, group: str) -> tuple[int, str, int]:
    """FindCoordinator (group); returns (error, host, port)."""
    return await w.find_coordinator(group)


async def coordinator(bootstrap: str, group: str, client_id: str = "kct-conformance", *,
                      evidence: Evidence | None = None) -> Wire:
    """A Wire of its own to the group's coordinator (asked of the bootstrap broker, which is closed again)."""
    boot = await connect_bootstrap(bootstrap, client_id, evidence=evidence)
    try:
        # retriable coordinator errors are retried as clients do (a fresh Kafka creates __consumer_offsets first)
        co = await boot.coordinator(group)
        host, port = co.conn.host, co.conn.port
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    finally:
        await boot.close()
    return await connect(host, port, client_id, evidence=evidence)


@dataclass(frozen=True)
class Joined:
    """A JoinGroup answer: error, generation, member id, leader id and the members the leader is told of."""

    error: int
    generation: int
    member_id: str
    leader: str
    members: list[str]
    protocol: str | None


async def join(w: Wire, group: str, member_id: str = "", instance_id: str | None = None,
               session_ms: int = 10_000, rebalance_ms: int = 10_000, version_: int | None = None,
               protocols: list[tuple[str, bytes]] | None = None, timeout: float = 60) -> Joined:
    """JoinGroup (consumer protocol type); parks until the broker completes the join phase."""
    b = await w.join_group(group, member_id, instance_id=instance_id, session_timeout_ms=session_ms,
                           rebalance_timeout_ms=rebalance_ms, protocols=protocols or CONSUMER_PROTOCOLS,
                           timeout_s=timeout, version=version_)
    return Joined(b.error_code, b.generation_id, b.member_id, b.leader, [m.member_id for m in b.members],
                  getattr(b, "protocol_name", None))


async def join_new(w: Wire, group: str, **kw: Any) -> Joined:
    """Join as a new dynamic member: answer MEMBER_ID_REQUIRED (KIP-394) by joining again with the id."""
    j = await join(w, group, **kw)
    if j.error == MEMBER_ID_REQUIRED:
        j = await join(w, group, member_id=j.member_id, **kw)
    return j


async def sync(w: Wire, group: str, generation: int, member_id: str,
               assignments: dict[str, bytes] | None = None, instance_id: str | None = None,
               timeout: float = 60) -> tuple[int, bytes]:
    """SyncGroup; returns (error, assignment)."""
    b = await w.sync_group(group, generation, member_id, assignments, instance_id=instance_id, timeout_s=timeout)
    return b.error_code, bytes(b.assignment or b"")


async def heartbeat(w: Wire, group: str, generation: int, member_id: str,
                    instance_id: str | None = None) -> int:
    """Heartbeat; returns the error code."""
    return await w.heartbeat(group, generation, member_id, instance_id)


async def leave(w: Wire, group: str, member_id: str, instance_id: str | None = None) -> tuple[int, int]:
    """LeaveGroup for one member; returns (top-level error, member error)."""
    b = await w.leave_group(group, [(member_id, instance_id)])
    members = getattr(b, "members", None) or []
    return b.error_code, (members[0].error_code if members else b.error_code)


async def commit(w: Wire, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int],
                 instance_id: str | None = None) -> dict[tuple[str, int], int]:
    """OffsetCommit; returns {(topic, partition): error}."""
    return await w.offset_commit(group, {tp: (o, None) for tp, o in offsets.items()}, generation=generation,
                                 member_id=member_id, instance_id=instance_id)


async def fetch_offsets(w: Wire, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """OffsetFetch; returns {(topic, partition): (committed offset or -1, error)}."""
    got = await w.offset_fetch(group, tps)
    return {tp: (o, e) for tp, (o, _meta, e) in got.items()}


@dataclass(frozen=True)
class Described:
    """DescribeGroups for one group: error, state, protocol and member ids."""

    error: int
    state: str
    protocol: str
    members: list[str]


async def describe_group(w: Wire, group: str) -> Described:
    g = await w.describe_group(group)
    return Described(g.error_code, g.group_state, g.protocol_data, [m.member_id for m in g.members])


async def broker_configs(w: Wire, broker_id: int, keys: list[str]) -> dict[str, str] | None:
    """Broker settings via DescribeConfigs (resource BROKER), or None if the broker does not serve it or refuses."""
    return await w.broker_configs(broker_id, keys)


async def elect_preferred_leader(w: Wire, topic: str, partition: int) -> int:
    """ElectLeaders (PREFERRED) for one partition (send it to the controller or any broker, KIP-460); its error."""
    return await w.elect_preferred_leader(topic, partition)
