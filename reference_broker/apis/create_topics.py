"""CreateTopics (key 19), v2–v7.

Behavior:
- Checks in Kafka's order: legal name, exists (TOPIC_ALREADY_EXISTS), partitions > 0, replication factor > 0 and
  <= live brokers (INVALID_REPLICATION_FACTOR); -1 takes ``num.partitions`` / ``default.replication.factor``.
- A topic named twice in one request: INVALID_REQUEST for each (Kafka: "Create topics request from client ...
  contains duplicate topic"). Manual assignments are not supported: INVALID_REQUEST (listed in GAPS.md).
- ``validate_only`` checks without creating. v5+ return partitions, replication factor and configs; v7 topic id.
"""
from __future__ import annotations

from collections import Counter

from kafka import errors as E
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ..registry import handles

API_KEY = 19
VERSIONS = (2, 7)

Result = CreateTopicsResponse.CreatableTopicResult


@handles(CreateTopicsRequest, CreateTopicsResponse, VERSIONS)
async def handle(ctx, req):
    b = ctx.broker
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if counts[t.name] > 1:
            err, msg = E.InvalidRequestError.errno, f"Create topics request contains duplicate topic {t.name}"
        elif t.assignments:
            err, msg = E.InvalidRequestError.errno, "manual replica assignments are not supported by this broker"
        else:
            configs = {c.name: c.value for c in t.configs}
            err, msg = b.create_topic(t.name, t.num_partitions, t.replication_factor, configs,
                                      validate_only=req.validate_only)
        topic = b.topics.get(t.name)
        ok = err == 0 and topic is not None
        results.append(Result(
            name=t.name, topic_id=topic.topic_id if ok else None, error_code=err, error_message=msg,
            num_partitions=len(topic.partitions) if ok else -1,
            replication_factor=topic.replication_factor if ok else -1,
            configs=[CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=1, is_sensitive=False)
                for k, v in topic.configs.items()] if ok else None))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
