"""DescribeTopicPartitions (key 75), v0 — KIP-966's describe with eligible leader replicas, paginated.

Behavior (Kafka 4.4.0's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache):
- An empty topic list means every topic; the topics (at or after the cursor's topic name) are answered in name order.
- With a topic list, a cursor whose topic is not in it, or a cursor partition below 0, is INVALID_REQUEST: every
  requested topic answered with that error (Kafka throws InvalidRequestException; the error response sets it on each).
- At most min(response_partition_limit, max.request.partition.size.limit), at least 1, partitions are answered;
  the cursor's topic starts at the cursor's partition. When the limit ends inside a topic, next_cursor names the
  first partition left out; when it ends at a topic boundary with topics left, the next topic at partition 0.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name), with
  the zero topic id and no partitions; with "every topic", nothing is listed for it.
- Each partition: leader (-1 when leaderless), leader epoch, replicas, ISR, eligible leader replicas, last known ELR,
  offline replicas (on fenced or unregistered brokers). Topic authorized operations: every topic operation (3576),
  as Kafka answers without an authorizer.
"""
from __future__ import annotations

import uuid

from kafka import errors as E
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from ..context import BrokerContext
from ..registry import handles
from ..topic_config import topic_name_error

API_KEY = 75
VERSIONS = (0, 0)
PARTITION_LIMIT = 2000          # Kafka's max.request.partition.size.limit default
INTERNAL = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
ZERO_UUID = uuid.UUID(int=0)
NO_AUTH_OPS = -2147483648       # the schema default, left in an error answer to an invalid request
# Kafka always fills topic_authorized_operations here (no include flag); without an authorizer every topic operation
# is allowed: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 → 3576
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Part = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


def _topic(name: str, error: int, ops: int = TOPIC_OPS) -> Topic:
    return Topic(error_code=error, name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL, partitions=[],
                 topic_authorized_operations=ops)


@handles(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    image = b.image
    every = not req.topics
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    if every:
        names = sorted(n for n in b.topics if n >= start_name)
    else:
        names = sorted({t.name for t in req.topics if t.name >= start_name})
        if cursor is not None and cursor.topic_name not in names:
            return DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None, topics=[
                _topic(t.name, E.InvalidRequestError.errno, NO_AUTH_OPS) for t in req.topics])
    if cursor is not None and cursor.partition_index < 0:
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None, topics=[
            _topic(t.name, E.InvalidRequestError.errno, NO_AUTH_OPS) for t in req.topics])
    remaining = max(min(PARTITION_LIMIT, req.response_partition_limit), 1)
    if b.faults.on("describe_topic_partitions.no_limit"):
        remaining = 1 << 30
    topics, next_cursor = [], None
    for name in names:
        if remaining <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        t = b.topics.get(name)
        if t is None:
            if not every:
                err = E.InvalidTopicError.errno if topic_name_error(name) else E.UnknownTopicOrPartitionError.errno
                topics.append(_topic(name, err))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        upper = min(len(t.partitions), first + remaining)
        parts = []
        for st in t.partitions[first:upper]:
            parts.append(Part(error_code=0, partition_index=st.index,
                              leader_id=st.leader if image.is_live(st.leader) else -1,
                              leader_epoch=st.leader_epoch, replica_nodes=list(st.replicas), isr_nodes=list(st.isr),
                              eligible_leader_replicas=list(st.elr), last_known_elr=list(st.last_known_elr),
                              offline_replicas=st.offline_replicas(image)))
        topics.append(Topic(error_code=0, name=name, topic_id=t.topic_id, is_internal=name in INTERNAL,
                            partitions=parts, topic_authorized_operations=TOPIC_OPS))
        if upper < len(t.partitions):
            next_cursor = Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=next_cursor, topics=topics)
