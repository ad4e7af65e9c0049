"""BeginQuorumEpoch (key 53), v0 — our own trimmed schema (controller/schemas/), KIP-595.

Behavior: a new leader announces its epoch to the voters (KafkaRaftClient ``_on_BeginQuorumEpochRequest``): a voter
in an older epoch follows it at once instead of waiting for its fetch timeout; an older epoch is
FENCED_LEADER_EPOCH. Common checks for the quorum RPCs (``check_request``): INCONSISTENT_CLUSTER_ID for another
cluster id, INCONSISTENT_VOTER_SET on a controller without a quorum, INVALID_REQUEST unless the request names
exactly ``__cluster_metadata`` partition 0.
"""
from __future__ import annotations

from kafka import errors as E

from ...metadata.records import METADATA_TOPIC
from ...raft import messages as M
from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import BeginQuorumEpochRequest, BeginQuorumEpochResponse
from ..quorum import quorum_response_to_wire

API_KEY = 53
VERSIONS = (0, 0)


def check_request(ctx: ControllerContext, req) -> int:
    """The top-level error of a quorum RPC, or 0."""
    if req.cluster_id is not None and req.cluster_id != ctx.node.config["cluster.id"]:
        return E.InconsistentClusterIdError.errno
    if ctx.node.raft is None:
        return E.InconsistentVoterSetError.errno
    if len(req.topics) != 1 or req.topics[0].topic_name != METADATA_TOPIC or len(req.topics[0].partitions) != 1 \
            or req.topics[0].partitions[0].partition_index != 0:
        return E.InvalidRequestError.errno
    return 0


@CONTROLLER.handles(BeginQuorumEpochRequest, BeginQuorumEpochResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    err = check_request(ctx, req)
    if err:
        return BeginQuorumEpochResponse(error_code=err, topics=[])
    p = req.topics[0].partitions[0]
    raft = ctx.node.raft
    resp = await raft.handle_inbound(p.leader_id, M.BeginQuorumEpochRequest(p.leader_epoch, p.leader_id),
                                     raft.config.request_timeout_ms / 1000)
    if resp is None:
        resp = M.BeginQuorumEpochResponse(E.RequestTimedOutError.errno, raft.client.epoch, raft.client.leader_id())
    return quorum_response_to_wire(BeginQuorumEpochResponse, resp)
