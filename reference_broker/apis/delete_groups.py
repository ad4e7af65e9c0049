"""DeleteGroups (key 42), v0–v2.

Behavior: only an Empty group can be deleted (NON_EMPTY_GROUP otherwise); an unknown group is
GROUP_ID_NOT_FOUND. Its committed offsets are deleted with it (tombstones in __consumer_offsets); the answer waits
until the tombstones are committed (offsets.commit.timeout.ms, then COORDINATOR_NOT_AVAILABLE), and OffsetFetch
serves the offsets until then.
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 42
VERSIONS = (0, 2)


@handles(DeleteGroupsRequest, DeleteGroupsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    results = []
    for g in req.groups_names:
        err = await ctx.broker.coordinator_error(g) or await ctx.broker.groups.delete_group(g)
        results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=err))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
