"""ElectLeaders (key 43), v0–v2, on the controller (forwarded by brokers), KIP-460.

Behavior (ReplicationControlManager.electLeaders): PREFERRED (0) makes the first replica leader if it is live and
in the ISR (ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise); UNCLEAN (1) gives
a leaderless partition any live replica (ELECTION_NOT_NEEDED when it has a leader). A null topic list means every
partition. v0 has no election type: preferred.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 43
VERSIONS = (0, 2)
APPLY_WAIT_S = 5.0

Result = ElectLeadersResponse.ReplicaElectionResult
PartResult = Result.PartitionResult


@CONTROLLER.handles(ElectLeadersRequest, ElectLeadersResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    if not c.active:
        return ElectLeadersResponse(throttle_time_ms=0, error_code=E.NotControllerError.errno,
                                    replica_election_results=[])
    etype = req.election_type if ctx.api_version >= 1 else 0
    if req.topic_partitions is None:
        wanted = [(t.name, p.index) for t in c.image.topics.values() for p in t.partitions]
    else:
        wanted = [(tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
    out = c.elect_leaders(etype, wanted)
    if not await c.wait_committed():
        return ElectLeadersResponse(throttle_time_ms=0, error_code=E.NotControllerError.errno,
                                    replica_election_results=[])
    await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    by_topic: dict[str, list] = {}
    for topic, idx, err, msg in out:
        by_topic.setdefault(topic, []).append(PartResult(partition_id=idx, error_code=err, error_message=msg))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        Result(topic=t, partition_result=ps) for t, ps in by_topic.items()])
