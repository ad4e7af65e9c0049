"""AlterPartition (key 56), v0 — our own trimmed schema, KIP-497 semantics.

Behavior (ReplicationControlManager.alterPartition): only the partition's leader, at the current leader epoch
(else FENCED_LEADER_EPOCH) and partition epoch (else INVALID_UPDATE_VERSION), may set a new ISR; it must contain
the leader and only replicas, and added members must be live (INELIGIBLE_REPLICA). The answer carries the
committed state, which the leader applies at once.
"""
from __future__ import annotations

from ...registry import CONTROLLER
from ..messages import AlterPartitionRequest, AlterPartitionResponse

API_KEY = 56
VERSIONS = (0, 0)

TopicData = AlterPartitionResponse.TopicData
PartData = TopicData.PartitionData


@CONTROLLER.handles(AlterPartitionRequest, AlterPartitionResponse, VERSIONS)
async def handle(ctx, req):
    c = ctx.node.controller
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
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics)
