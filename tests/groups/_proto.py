"""Protocol-level group operations, so tests observe the exact error code ClassicGroup returns."""
from __future__ import annotations

from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from reference_broker.client.protocol import Connection

PROTOCOLS = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01meta")]


async def connect(broker) -> Connection:
    c = await Connection.connect("127.0.0.1", broker.port)
    await c.api_versions()
    return c


async def join(c: Connection, group: str, member_id: str = "", instance_id: str | None = None,
               session_ms: int = 10_000, rebalance_ms: int = 10_000, version: int = 9, protocols=None):
    r = await c.request(JoinGroupRequest[version](
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocols=protocols or PROTOCOLS, reason=None),
        timeout=60)
    return r.body


async def join_new(c: Connection, group: str, **kw):
    """Join as a new dynamic member: MEMBER_ID_REQUIRED first (KIP-394), then again with the id."""
    r = await join(c, group, **kw)
    if r.error_code == 79:
        r = await join(c, group, member_id=r.member_id, **kw)
    return r


async def sync(c: Connection, group: str, generation: int, member_id: str, assignments=None,
               instance_id: str | None = None):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    r = await c.request(SyncGroupRequest[5](
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
        protocol_type="consumer", protocol_name="range",
        assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()]), timeout=60)
    return r.body


async def heartbeat(c: Connection, group: str, generation: int, member_id: str, instance_id: str | None = None):
    r = await c.request(HeartbeatRequest[4](group_id=group, generation_id=generation, member_id=member_id,
                                            group_instance_id=instance_id))
    return r.body.error_code


async def leave(c: Connection, group: str, members: list[tuple[str, str | None]]):
    M = LeaveGroupRequest.MemberIdentity
    r = await c.request(LeaveGroupRequest[5](group_id=group, members=[
        M(member_id=m, group_instance_id=i, reason=None) for m, i in members]))
    return r.body


async def commit(c: Connection, group: str, generation: int, member_id: str, offsets: dict,
                 instance_id: str | None = None, version: int = 8):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    by_topic: dict[str, list] = {}
    for (t, p), (o, meta) in offsets.items():
        by_topic.setdefault(t, []).append(T.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=meta))
    r = await c.request(OffsetCommitRequest[version](
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in r.body.topics for p in t.partitions}


async def fetch_offsets(c: Connection, group: str, tps: list[tuple[str, int]] | None):
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = None
    if tps is not None:
        by: dict[str, list] = {}
        for t, p in tps:
            by.setdefault(t, []).append(p)
        topics = [T(name=t, partition_indexes=ps) for t, ps in by.items()]
    r = await c.request(OffsetFetchRequest[7](group_id=group, topics=topics, require_stable=False))
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in r.body.topics for p in t.partitions}
