"""OffsetCommit (key 8), v2–v9.

Behavior (OffsetMetadataManager.validateOffsetCommit, ClassicGroup.validateOffsetCommit, Kafka 4):
- No such group: generation < 0 creates a "simple" group and accepts; otherwise ILLEGAL_GENERATION (v9+:
  GROUP_ID_NOT_FOUND).
- Generation -1 on an Empty group is accepted (manual assignment). Otherwise UNKNOWN_MEMBER_ID /
  FENCED_INSTANCE_ID / ILLEGAL_GENERATION as validateMember decides; REBALANCE_IN_PROGRESS in
  CompletingRebalance; commits are allowed in PreparingRebalance.
- Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist; OFFSET_METADATA_TOO_LARGE above
  4096 bytes of metadata. Accepted offsets are written durably to __consumer_offsets before the answer.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from ..offset_store import OffsetAndMetadata
from ..registry import handles

API_KEY = 8
VERSIONS = (2, 9)
MAX_METADATA = 4096   # offset.metadata.max.bytes

TopicResp = OffsetCommitResponse.OffsetCommitResponseTopic
PartResp = TopicResp.OffsetCommitResponsePartition


@handles(OffsetCommitRequest, OffsetCommitResponse, VERSIONS)
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    err, g = b.groups.validate_commit(req.group_id, req.generation_id_or_member_epoch, req.member_id,
                                      req.group_instance_id if v >= 7 else None, v)
    now = b.clock.wall_ms()
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = err
            if not code:
                if b.partition(t.name, p.partition_index) is None:
                    code = E.UnknownTopicOrPartitionError.errno
                elif p.committed_metadata is not None and len(p.committed_metadata.encode()) > MAX_METADATA:
                    code = E.OffsetMetadataTooLargeError.errno
                else:
                    accepted[(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata, now)
            parts.append(PartResp(partition_index=p.partition_index, error_code=code))
        topics.append(TopicResp(name=t.name, partitions=parts))
    if g is not None and accepted:
        b.groups.commit(g, accepted)
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
