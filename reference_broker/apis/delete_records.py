"""DeleteRecords (key 21), v0–v2.

Behavior (Kafka ``ReplicaManager.deleteRecords`` / ``UnifiedLog.maybeIncrementLogStartOffset``):
- Offset -1 means "up to the high watermark". An offset above the HW (or otherwise negative) is
  OFFSET_OUT_OF_RANGE. The log start offset only moves forward; the answer's low watermark is the new log start.
- Moving the log start wakes parked fetches whose offset fell below it, so they answer OFFSET_OUT_OF_RANGE.
- A topic whose cleanup.policy does not include "delete" (compact only) answers POLICY_VIOLATION
  (Partition.deleteRecordsOnLeader: "can not be deleted due to the configured policy"), checked first.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 21
VERSIONS = (0, 2)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult


@handles(DeleteRecordsRequest, DeleteRecordsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            p, err = b.leader_partition(t.name, rp.partition_index)
            if err:
                parts.append(PartResult(partition_index=rp.partition_index, low_watermark=-1, error_code=err))
                continue
            if "delete" not in b.topic_setting(t.name, "cleanup.policy"):
                parts.append(PartResult(partition_index=rp.partition_index, low_watermark=-1,
                                        error_code=E.PolicyViolationError.errno))
                continue
            offset = p.hw if rp.offset == -1 else rp.offset
            if offset < 0 or offset > p.hw:
                parts.append(PartResult(partition_index=rp.partition_index, low_watermark=-1,
                                        error_code=E.OffsetOutOfRangeError.errno))
                continue
            p.delete_records_before(offset)
            parts.append(PartResult(partition_index=rp.partition_index, low_watermark=p.log.log_start_offset,
                                    error_code=0))
        topics.append(TopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
