"""OffsetForLeaderEpoch (key 23), v2–v4 (KIP-101, KIP-279, KIP-320).

Behavior (Partition.lastOffsetForLeaderEpoch / LeaderEpochFileCache.endOffsetFor): the leader answers, for the
requested epoch, the largest epoch <= it that it knows and that epoch's end offset — the start offset of the next
epoch, or its LEO for the latest epoch; (-1, -1) for an epoch above every known one (UNDEFINED). Only the
leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; UNKNOWN_TOPIC_OR_PARTITION for partitions the cluster lacks); a
current_leader_epoch older than the leader's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Consumers use
it to detect log truncation after a failover (KIP-320); followers may use it to find where to truncate.
"""
from __future__ import annotations

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 23
VERSIONS = (2, 4)

TopicResp = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
PartResp = TopicResp.EpochEndOffset


@handles(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            p, err = b.leader_partition(t.topic, rp.partition, rp.current_leader_epoch)
            if err:
                parts.append(PartResp(error_code=err, partition=rp.partition, leader_epoch=-1, end_offset=-1))
                continue
            epoch, end = p.log.end_offset_for_epoch(rp.leader_epoch)
            parts.append(PartResp(error_code=0, partition=rp.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicResp(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
