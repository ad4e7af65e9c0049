"""JoinGroup (key 11), v0–v9.

Behavior: the classic protocol as ClassicGroup runs it (reference_broker/group_coordinator.py): parked until the
join phase completes; MEMBER_ID_REQUIRED for v4+ joins without a member id (KIP-394); static membership for v5+
(KIP-345); INVALID_SESSION_TIMEOUT outside group.min/max.session.timeout.ms; INCONSISTENT_GROUP_PROTOCOL when the
protocol type or protocols do not fit the group. v0 has no rebalance timeout: the session timeout serves.
v9 sets skip_assignment for a static leader rejoining a Stable group unchanged (KIP-814).
"""
from __future__ import annotations

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 11
VERSIONS = (0, 9)


@handles(JoinGroupRequest, JoinGroupResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    v = ctx.api_version
    err = await ctx.broker.coordinator_error(req.group_id)
    if err:
        return JoinGroupResponse(throttle_time_ms=0, error_code=err, generation_id=-1, protocol_type=None,
                                 protocol_name=None if v >= 7 else "", leader="", skip_assignment=False,
                                 member_id=req.member_id, members=[])
    r = await ctx.broker.groups.join(
        v, req.group_id, req.member_id, req.group_instance_id if v >= 5 else None, ctx.client_id or "",
        "/" + ctx.peer.rsplit(":", 1)[0], req.session_timeout_ms,
        req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms, req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols])
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
               for m, i, meta in r.members]
    name = r.protocol_name if r.protocol_name is not None or v >= 7 else ""
    return JoinGroupResponse(throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id,
                             protocol_type=r.protocol_type, protocol_name=name, leader=r.leader,
                             skip_assignment=r.skip_assignment, member_id=r.member_id, members=members)
