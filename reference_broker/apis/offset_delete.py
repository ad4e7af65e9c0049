"""OffsetDelete (key 47), v0.

Behavior (ClassicGroup.validateOffsetDelete): GROUP_ID_NOT_FOUND for an unknown or Dead group; NON_EMPTY_GROUP
for a non-empty group that does not use the consumer protocol; a partition whose topic a non-empty consumer group
subscribes to is GROUP_SUBSCRIBED_TO_TOPIC; other offsets are deleted (tombstones in __consumer_offsets). The
answer waits until the tombstones are committed; a failure or timeout is the top-level error
(COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR) and OffsetFetch serves the offsets until then. A partition that does
not exist is UNKNOWN_TOPIC_OR_PARTITION (KafkaApis answers it itself, hands the coordinator the others and merges
its answer in; a group-level error still replaces everything, OffsetDeleteResponse.Builder.merge).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 47
VERSIONS = (0, 0)

TopicResp = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartResp = TopicResp.OffsetDeleteResponsePartition


@handles(OffsetDeleteRequest, OffsetDeleteResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    coord = ctx.broker.groups
    err = await ctx.broker.coordinator_error(req.group_id)
    if err:
        return OffsetDeleteResponse(error_code=err, throttle_time_ms=0, topics=[])
    g = coord.group(req.group_id)
    err = coord.validate_offset_delete(g)
    if err:
        return OffsetDeleteResponse(error_code=err, throttle_time_ms=0, topics=[])
    tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    known = [tp for tp in tps if ctx.broker.image.partition(*tp) is not None]
    err, deleted = await coord.delete_offsets(g, known)
    if err:
        return OffsetDeleteResponse(error_code=err, throttle_time_ms=0, topics=[])
    result = {tp: E.UnknownTopicOrPartitionError.errno for tp in tps}
    result.update(deleted)
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        TopicResp(name=t.name, partitions=[PartResp(partition_index=p.partition_index,
                                                    error_code=result[(t.name, p.partition_index)])
                                           for p in t.partitions]) for t in req.topics])
