"""ListGroups (key 16), v0–v5.

Behavior: every group this coordinator knows (including offsets-only "simple" groups), with state (v4+) and type
(v5+): "classic", or "consumer" for KIP-848 consumer groups (protocol type "consumer", states Empty / Assigning /
Reconciling / Stable, as Kafka 4.4.0 lists them); states_filter / types_filter (case-insensitive, as Kafka)
narrow the list.
"""
from __future__ import annotations

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 16
VERSIONS = (0, 5)


@handles(ListGroupsRequest, ListGroupsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    v = ctx.api_version
    states = {s.lower() for s in (req.states_filter or [])} if v >= 4 else set()
    types = {s.lower() for s in (req.types_filter or [])} if v >= 5 else set()
    groups = []
    for gid, g in sorted(ctx.broker.groups.groups.items()):
        if states and g.state.lower() not in states:
            continue
        kind = getattr(g, "group_type", "classic")
        if types and kind not in types:
            continue
        groups.append(ListGroupsResponse.ListedGroup(group_id=gid, protocol_type=g.protocol_type or "",
                                                     group_state=g.state, group_type=kind))
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)
