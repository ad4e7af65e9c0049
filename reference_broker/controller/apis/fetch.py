"""Fetch (key 1) on the controller listener: the metadata log ``__cluster_metadata`` (KIP-595), v12.

Behavior:
- From a voter of the quorum (ReplicaId in controller.quorum.voters): Raft's Fetch, handed to KafkaRaftClient
  (``_on_FetchRequest``): CurrentLeaderEpoch checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), only the leader
  answers (NOT_LEADER_OR_FOLLOWER otherwise), LastFetchedEpoch checked against the leader's epochs (a DivergingEpoch
  tells the follower where to truncate), the fetch offset counts as the voter's acknowledgement for the high
  watermark, an empty answer parks until an append or max wait. Every answer carries CurrentLeader.
- From a broker (an observer): the records the broker needs from its fetch offset, which also tells the controller
  what the broker has applied (used to unfence it and to answer CreateTopics once live brokers know the topic).
  Empty answers park until a new record is committed or max_wait passes. In a quorum only the active controller
  answers, with committed records only; another answers NOT_LEADER_OR_FOLLOWER with CurrentLeader as its hint.
"""
from __future__ import annotations

import asyncio

from kafka import errors as E
from kafka.protocol.consumer import FetchRequest, FetchResponse

from ...metadata.records import METADATA_TOPIC
from ...raft import messages as M
from ...registry import CONTROLLER
from ..context import ControllerContext
from ..quorum import fetch_response_to_wire

API_KEY = 1
VERSIONS = (12, 12)

TopicResp = FetchResponse.FetchableTopicResponse
PartData = TopicResp.PartitionData


def _part(index: int, err: int, records: bytes, end: int, leader: int = -1, epoch: int = -1) -> PartData:
    return PartData(partition_index=index, error_code=err, high_watermark=end, last_stable_offset=end,
                    log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=records,
                    current_leader=PartData.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch))


@CONTROLLER.handles(FetchRequest, FetchResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    raft = ctx.node.raft
    want = [(t.topic, fp) for t in req.topics for fp in t.partitions]
    if len(want) != 1 or want[0][0] != METADATA_TOPIC or want[0][1].partition != 0:
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            TopicResp(topic=t, partitions=[_part(fp.partition, E.UnknownTopicOrPartitionError.errno, b"", -1)])
            for t, fp in want])
    fp = want[0][1]
    offset = fp.fetch_offset
    if raft is not None and req.cluster_id is not None and req.cluster_id != c.config["cluster.id"]:
        return FetchResponse(throttle_time_ms=0, error_code=E.InconsistentClusterIdError.errno, session_id=0,
                             responses=[])
    if raft is not None and req.replica_id in raft.voters:
        raft.note_fetch(req.replica_id, offset)
        body = M.FetchRequest(req.replica_id, fp.current_leader_epoch, offset, fp.last_fetched_epoch)
        resp = await raft.handle_inbound(req.replica_id, body,
                                         (req.max_wait_ms + raft.config.request_timeout_ms) / 1000)
        if resp is None:       # superseded by a newer fetch of the same voter, or no answer in time
            resp = M.FetchResponse(M.NONE, raft.client.epoch, raft.client.leader_id())
        return fetch_response_to_wire(resp, raft.log)
    if raft is not None:
        if not c.active:
            return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[TopicResp(
                topic=METADATA_TOPIC, partitions=[_part(0, E.NotLeaderForPartitionError.errno, b"", -1,
                                                        -1 if c.leader_id is None else c.leader_id,
                                                        c.leader_epoch)])])
        if req.replica_id >= 0:
            raft.note_fetch(req.replica_id, offset)
    if req.replica_id >= 0:
        c.note_applied(req.replica_id, offset)
    leader, epoch = (c.leader_id if c.leader_id is not None else -1, c.leader_epoch) if raft is not None else (-1, -1)
    if offset > c.end_offset:
        part = _part(0, E.OffsetOutOfRangeError.errno, b"", c.end_offset, leader, epoch)
    else:
        if offset == c.end_offset and req.max_wait_ms > 0:
            fut = asyncio.get_running_loop().create_future()

            def wake() -> None:
                if not fut.done():
                    fut.set_result(None)
            c.add_listener(wake)
            try:
                await asyncio.wait_for(fut, req.max_wait_ms / 1000)
            except TimeoutError:
                pass
            finally:
                c.remove_listener(wake)
        part = _part(0, 0, c.read_records(offset, fp.partition_max_bytes), c.end_offset, leader, epoch)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[TopicResp(topic=METADATA_TOPIC, partitions=[part])])
