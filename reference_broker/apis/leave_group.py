"""LeaveGroup (key 13), v0–v5.

Behavior: v0–v2 remove one member (its error is the top-level error); v3+ batch members (KIP-345), each with its
own error: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when a static member's instance id maps to another member
id. A static member may be removed by instance id alone (member id empty). Leaving triggers a rebalance.
"""
from __future__ import annotations

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 13
VERSIONS = (0, 5)


@handles(LeaveGroupRequest, LeaveGroupResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    err = await ctx.broker.coordinator_error(req.group_id)
    if err:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=err, members=[])
    if ctx.api_version < 3:
        top, errs = ctx.broker.groups.leave(req.group_id, [(req.member_id, None)])
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top or (errs[0] if errs else 0))
    members = [(m.member_id, m.group_instance_id) for m in req.members]
    top, errs = ctx.broker.groups.leave(req.group_id, members)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=[
        LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
        for (mid, iid), e in zip(members, errs, strict=False)])
