"""AlterPartition (key 56), v0 — our own trimmed schema, KIP-497 semantics.

Behavior (ReplicationControlManager.alterPartition / validateAlterPartitionData, checked in Kafka's order; see
QuorumController.alter_partition): a broker epoch that is not the requester's current one fails the whole request
with a top-level STALE_BROKER_EPOCH and no topics; then per partition UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
NOT_CONTROLLER (a leader or partition epoch newer than the controller's), FENCED_LEADER_EPOCH, INVALID_REQUEST (not
the leader), INVALID_UPDATE_VERSION, INVALID_REQUEST (an ISR with a non-replica, a duplicate or without the
leader), INELIGIBLE_REPLICA (an ISR member not registered, fenced or shutting down). An error answers only the
partition index and the code; success carries the committed state, which the leader applies at once. No broker
epochs per ISR member (KIP-903, AlterPartition v3): GAPS.md.
"""
from __future__ import annotations

from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import AlterPartitionRequest, AlterPartitionResponse
from ..quorum_controller import NOT_CONTROLLER, STALE_BROKER_EPOCH

API_KEY = 56
VERSIONS = (0, 0)

TopicData = AlterPartitionResponse.TopicData
PartData = TopicData.PartitionData


@CONTROLLER.handles(AlterPartitionRequest, AlterPartitionResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    if not c.active:
        return AlterPartitionResponse(throttle_time_ms=0, error_code=NOT_CONTROLLER, topics=[])
    if c.check_broker_epoch(req.broker_id, req.broker_epoch):
        return AlterPartitionResponse(throttle_time_ms=0, error_code=STALE_BROKER_EPOCH, topics=[])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            err, st = c.alter_partition(req.broker_id, req.broker_epoch, t.topic_id, p.partition_index,
                                        p.leader_epoch, p.partition_epoch, list(p.new_isr))
            parts.append(PartData(partition_index=p.partition_index, error_code=err,
                                  leader_id=st.leader if st else -1, leader_epoch=st.leader_epoch if st else -1,
                                  isr=list(st.isr) if st else [], partition_epoch=st.partition_epoch if st else -1))
        topics.append(TopicData(topic_id=t.topic_id, partitions=parts))
    if not await c.wait_committed():
        return AlterPartitionResponse(throttle_time_ms=0, error_code=NOT_CONTROLLER, topics=[])
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics)
