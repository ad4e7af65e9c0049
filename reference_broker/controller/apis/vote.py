"""Vote (key 52), v0–v2 — our own trimmed schema (controller/schemas/), KIP-595 with KIP-996's PreVote at v2.

Behavior: handed to this controller's KafkaRaftClient (reference_broker/raft/client.py ``_on_VoteRequest``): one
vote per epoch, persisted in quorum-state before the answer; granted only to a candidate whose log is at least as
up to date; a pre-vote changes no state and is refused while a leader is alive as far as the voter can tell. Every
answer carries the voter's epoch and leader. A controller without a quorum (controller.quorum.voters empty) is no
voter: INCONSISTENT_VOTER_SET; another cluster id: INCONSISTENT_CLUSTER_ID.
"""
from __future__ import annotations

from ...raft import messages as M
from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import VoteRequest, VoteResponse
from ..quorum import quorum_response_to_wire
from .begin_quorum_epoch import check_request

API_KEY = 52
VERSIONS = (0, 2)


@CONTROLLER.handles(VoteRequest, VoteResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    err = check_request(ctx, req)
    if err:
        return VoteResponse(error_code=err, topics=[])
    p = req.topics[0].partitions[0]
    body = M.VoteRequest(p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset,
                         pre_vote=bool(p.pre_vote) if ctx.api_version >= 2 else False)
    raft = ctx.node.raft
    resp = await raft.handle_inbound(p.replica_id, body, raft.config.request_timeout_ms / 1000)
    if resp is None:
        resp = M.VoteResponse(M.NONE, raft.client.epoch, raft.client.leader_id(), False, body.pre_vote)
    return quorum_response_to_wire(VoteResponse, resp, vote_granted=resp.vote_granted)
