"""DescribeGroups (key 15), v0–v5.

Behavior (GroupMetadataManager.describeGroups, ClassicGroupMember.describe / describeNoMetadata): state, protocol
type, and members; the selected protocol and member metadata only when Stable; each member's current assignment in
every state (the previous generation's while a rebalance runs). An unknown group is described as Dead with no error
(v0–v5; v6+ would answer GROUP_ID_NOT_FOUND).
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 15
VERSIONS = (0, 5)

Group = DescribeGroupsResponse.DescribedGroup
Member = Group.DescribedGroupMember


@handles(DescribeGroupsRequest, DescribeGroupsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    out = []
    for gid in req.groups:
        err = await ctx.broker.coordinator_error(gid)
        if err:
            out.append(Group(error_code=err, group_id=gid, group_state="", protocol_type="", protocol_data="",
                             authorized_operations=None, members=[]))
            continue
        d = ctx.broker.groups.describe(gid)
        out.append(Group(error_code=0, group_id=gid, group_state=d["state"], protocol_type=d["protocol_type"],
                         protocol_data=d["protocol"], authorized_operations=None,
                         members=[Member(member_id=m, group_instance_id=i, client_id=c, client_host=h,
                                         member_metadata=meta, member_assignment=a)
                                  for m, i, c, h, meta, a in d["members"]]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)
