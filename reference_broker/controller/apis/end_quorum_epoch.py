"""EndQuorumEpoch (key 54), v0 — our own trimmed schema (controller/schemas/), KIP-595.

Behavior: a resigning leader (graceful shutdown, or check-quorum) hands over (KafkaRaftClient
``_on_EndQuorumEpochRequest``): a voter that followed it starts an election after a backoff ranked by its place in
PreferredSuccessors (the most caught-up first), so a new leader comes sooner than the fetch timeout. Common checks as
BeginQuorumEpoch's.
"""
from __future__ import annotations

from kafka import errors as E

from ...raft import messages as M
from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import EndQuorumEpochRequest, EndQuorumEpochResponse
from ..quorum import quorum_response_to_wire
from .begin_quorum_epoch import check_request

API_KEY = 54
VERSIONS = (0, 0)


@CONTROLLER.handles(EndQuorumEpochRequest, EndQuorumEpochResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    err = check_request(ctx, req)
    if err:
        return EndQuorumEpochResponse(error_code=err, topics=[])
    p = req.topics[0].partitions[0]
    raft = ctx.node.raft
    body = M.EndQuorumEpochRequest(p.leader_epoch, p.leader_id, tuple(p.preferred_successors or ()))
    resp = await raft.handle_inbound(p.leader_id, body, raft.config.request_timeout_ms / 1000)
    if resp is None:
        resp = M.EndQuorumEpochResponse(E.RequestTimedOutError.errno, raft.client.epoch, raft.client.leader_id())
    return quorum_response_to_wire(EndQuorumEpochResponse, resp)
