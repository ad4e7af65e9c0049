"""DescribeProducers (key 61), v0 (KIP-664).

Behavior (KafkaApis.handleDescribeProducersRequest → ReplicaManager.activeProducerState → Partition.
activeProducerState → UnifiedLog.activeProducers): per requested partition the producers its local log's producer
state holds (ProducerStateManager.activeProducers): producer id, epoch, last sequence, last timestamp, coordinator
epoch (of the last marker) and the first offset of the producer's open transaction (-1 when none). Served by any
broker hosting a replica (the admin client asks the leader; a follower answers from its own log); a topic the
cluster does not know UNKNOWN_TOPIC_OR_PARTITION for each of its partitions, a partition of a known topic this
broker does not host NOT_LEADER_OR_FOLLOWER (ReplicaManager.getPartitionOrError), or UNKNOWN_TOPIC_OR_PARTITION if
the topic has no such partition.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from ..registry import handles

API_KEY = 61
VERSIONS = (0, 0)

TopicR = DescribeProducersResponse.TopicResponse
PartR = TopicR.PartitionResponse
ProducerR = PartR.ProducerState


@handles(DescribeProducersRequest, DescribeProducersResponse, VERSIONS)
async def handle(ctx, req):
    b = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            parts.append(partition_producers(b, t.name, index))
        topics.append(TopicR(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def partition_producers(b, topic: str, index: int) -> PartR:
    """One partition's answer: its local log's producers, or why this broker has none to show."""
    if b.image.partition(topic, index) is None:
        return PartR(partition_index=index, error_code=E.UnknownTopicOrPartitionError.errno, error_message=None,
                     active_producers=[])
    p = b.partition(topic, index)
    if p is None:
        return PartR(partition_index=index, error_code=E.NotLeaderForPartitionError.errno, error_message=None,
                     active_producers=[])
    hide_txn = b.faults.on("txn.describe_producers_no_txn_start")
    producers = [ProducerR(producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                           last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                           current_txn_start_offset=-1 if e.current_txn_first_offset is None or hide_txn
                           else e.current_txn_first_offset)
                 for pid, e in sorted(p.log.producer_state.producers.items())]
    return PartR(partition_index=index, error_code=0, error_message=None, active_producers=producers)
