"""Heartbeat (key 12), v0–v4.

Behavior (GroupMetadataManager.classicGroupHeartbeat): UNKNOWN_MEMBER_ID for an unknown or Empty group or an
unknown member, COORDINATOR_NOT_AVAILABLE for Dead, FENCED_INSTANCE_ID for a fenced static member,
ILLEGAL_GENERATION for another generation, REBALANCE_IN_PROGRESS in PreparingRebalance; NONE in
CompletingRebalance and Stable. A valid heartbeat resets the member's session timer.
"""
from __future__ import annotations

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 12
VERSIONS = (0, 4)


@handles(HeartbeatRequest, HeartbeatResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    err = await ctx.broker.coordinator_error(req.group_id)
    if err:
        return HeartbeatResponse(throttle_time_ms=0, error_code=err)
    err = ctx.broker.groups.heartbeat(req.group_id, req.generation_id, req.member_id,
                                      req.group_instance_id if ctx.api_version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=err)
