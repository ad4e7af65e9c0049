"""SyncGroup (key 14), v0–v5.

Behavior (ClassicGroup): followers park in CompletingRebalance until the leader's assignment arrives; the
leader's SyncGroup moves the group to Stable. Errors in GroupMetadataManager's order: UNKNOWN_MEMBER_ID (no such
group/member, or the group is Empty), FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL (v5
protocol type/name mismatch), REBALANCE_IN_PROGRESS (PreparingRebalance, or a rebalance began while parked).
"""
from __future__ import annotations

from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 14
VERSIONS = (0, 5)


@handles(SyncGroupRequest, SyncGroupResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    v = ctx.api_version
    err = await ctx.broker.coordinator_error(req.group_id)
    if err:
        return SyncGroupResponse(throttle_time_ms=0, error_code=err, protocol_type=None, protocol_name=None,
                                 assignment=b"")
    err, assignment, g = await ctx.broker.groups.sync(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in req.assignments})
    return SyncGroupResponse(throttle_time_ms=0, error_code=err,
                             protocol_type=g.protocol_type if g is not None and err == 0 else None,
                             protocol_name=g.protocol_name if g is not None and err == 0 else None,
                             assignment=assignment)
