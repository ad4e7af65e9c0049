"""OffsetCommit (key 8), v2–v9.

Behavior (OffsetMetadataManager.validateOffsetCommit, ClassicGroup.validateOffsetCommit, Kafka 4):
- No such group: generation < 0 creates a "simple" group and accepts; otherwise ILLEGAL_GENERATION (v9+:
  GROUP_ID_NOT_FOUND).
- Generation -1 on an Empty group is accepted (manual assignment). Otherwise UNKNOWN_MEMBER_ID /
  FENCED_INSTANCE_ID / ILLEGAL_GENERATION as validateMember decides; REBALANCE_IN_PROGRESS in
  CompletingRebalance; commits are allowed in PreparingRebalance.
- Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, whatever the group says (KafkaApis
  answers them before asking the coordinator; a request naming only such partitions never reaches the group, so
  no simple group is created); OFFSET_METADATA_TOO_LARGE when the
  metadata is longer than offset.metadata.max.bytes (4096), counted as Java's String.length() counts: UTF-16
  code units, not bytes (OffsetMetadataManager.isMetadataInvalid). Null metadata is stored as "" (Kafka's
  OffsetAndMetadata.NO_METADATA); the offset itself is not validated (-1 is stored like any other). Accepted
  offsets are appended to __consumer_offsets and answered once that partition's HW passed them (replicated to its
  ISR); a failed append or a timeout (offsets.commit.timeout.ms) answers COORDINATOR_NOT_AVAILABLE or
  NOT_COORDINATOR (GroupCoordinatorService.handleOperationException). OffsetFetch serves them only once the HW
  passed them, whatever this answer said. NOT_COORDINATOR when this broker does not lead the group's offsets
  partition.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from ..context import BrokerContext
from ..offset_store import OffsetAndMetadata
from ..registry import handles

API_KEY = 8
VERSIONS = (2, 9)
MAX_METADATA = 4096   # offset.metadata.max.bytes

TopicResp = OffsetCommitResponse.OffsetCommitResponseTopic
PartResp = TopicResp.OffsetCommitResponsePartition


def metadata_length(metadata: str) -> int:
    """Java's String.length(): UTF-16 code units (a character outside the BMP counts two)."""
    return len(metadata.encode("utf-16-le")) // 2


def metadata_too_large(metadata: str | None, faults) -> bool:
    """OffsetMetadataManager.isMetadataInvalid: longer than offset.metadata.max.bytes (the switch: not shorter)."""
    if metadata is None:
        return False
    n = metadata_length(metadata)
    return n >= MAX_METADATA if faults.on("offsets.metadata_max_exclusive") else n > MAX_METADATA


@handles(OffsetCommitRequest, OffsetCommitResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    v = ctx.api_version
    # KafkaApis.handleOffsetCommitRequest: partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION by
    # the broker itself; only the others go to the coordinator (none at all: the group is not even looked at)
    known = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
             if b.image.partition(t.name, p.partition_index) is not None]
    err = await b.coordinator_error(req.group_id) if known else 0
    g = None
    if not err and known:
        err, g = b.groups.validate_commit(req.group_id, req.generation_id_or_member_epoch, req.member_id,
                                          req.group_instance_id if v >= 7 else None, v)
        if err == E.UnknownMemberIdError.errno and g is not None and b.faults.on("offsets.accept_unknown_member"):
            err = 0
    now = b.clock.wall_ms()
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = err
            if b.image.partition(t.name, p.partition_index) is None:
                code = E.UnknownTopicOrPartitionError.errno
            elif not code and g is not None:
                code = b.groups.consumer_commit_partition_error(g, req.member_id, req.generation_id_or_member_epoch,
                                                                (t.name, p.partition_index))
            if not code and b.image.partition(t.name, p.partition_index) is not None:
                if metadata_too_large(p.committed_metadata, b.faults):
                    code = E.OffsetMetadataTooLargeError.errno
                else:
                    epoch = p.committed_leader_epoch if v >= 6 and not b.faults.on("offsets.drop_leader_epoch") else -1
                    accepted[(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, epoch, p.committed_metadata or "", now)
            parts.append(PartResp(partition_index=p.partition_index, error_code=code))
        topics.append(TopicResp(name=t.name, partitions=parts))
    if g is not None and b.faults.on("offsets.keep_first_commit"):
        accepted = {tp: o for tp, o in accepted.items() if tp not in g.offsets}
    if g is not None and accepted:
        # Kafka appends the commit to the offsets partition and answers once it is replicated.
        failed = await b.groups.commit(g, accepted)
        if failed:
            for tr in topics:
                for pr in tr.partitions:
                    if pr.error_code == 0:
                        pr.error_code = failed
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
