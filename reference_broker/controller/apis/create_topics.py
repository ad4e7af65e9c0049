"""CreateTopics (key 19), v2–v7, on the controller (brokers forward client requests here, as KRaft brokers do).

Behavior:
- Checks in Kafka's order: legal name, exists (TOPIC_ALREADY_EXISTS), partitions > 0, replication factor > 0 and
  <= live brokers (INVALID_REPLICATION_FACTOR); -1 takes ``num.partitions`` / ``default.replication.factor``.
- A topic named twice in one request: INVALID_REQUEST for each (Kafka: "Create topics request from client ...
  contains duplicate topic"). Manual assignments (partitions and replication factor -1) as Kafka checks them
  (QuorumController.create_topic_assigned): leader = the first unfenced assigned replica.
- ``validate_only`` checks without creating. v5+ return partitions, replication factor and every topic config
  with its value (an override as given, unparsed) and source, sorted by name (ReplicationControlManager.createTopic:
  computeEffectiveTopicConfigs; source of min.insync.replicas: GAPS.md), also for validate_only; a refused topic
  has -1, -1 and configs []; v7 topic id (validate_only: a fresh one, not kept).
- Replicas are placed by controller/placement.py; the answer waits (boundedly) until live brokers applied the
  new records (GAPS.md).
"""
from __future__ import annotations

import uuid
import zlib
from collections import Counter

from kafka import errors as E
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ...registry import CONTROLLER
from ...topic_config import effective_topic_configs
from ..context import ControllerContext

API_KEY = 19
VERSIONS = (2, 7)
APPLY_WAIT_S = 5.0

Result = CreateTopicsResponse.CreatableTopicResult


def _ack_uncommitted(c, name: str) -> bool:  # noqa: ANN001 - the quorum controller
    """Fault switch metadata.create_ack_uncommitted: every fourth new topic name (a stable hash) is answered NONE
    and never written."""
    faults = getattr(c, "faults", None)
    return bool(faults is not None and faults.on("metadata.create_ack_uncommitted")
                and zlib.crc32(name.encode()) % 4 == 0)


@CONTROLLER.handles(CreateTopicsRequest, CreateTopicsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    if not c.active:    # a quorum's inactive controller (the forwarding broker tries another)
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            Result(name=t.name, topic_id=None, error_code=E.NotControllerError.errno, error_message=None,
                   num_partitions=-1, replication_factor=-1, configs=[]) for t in req.topics])
    counts = Counter(t.name for t in req.topics)
    errors = []
    for t in req.topics:
        if counts[t.name] > 1:
            errors.append((E.InvalidRequestError.errno, f"Create topics request contains duplicate topic {t.name}"))
        elif _ack_uncommitted(c, t.name) and not req.validate_only and t.name not in c.image.topics:
            errors.append((E.NoError.errno, None))   # test-only: acknowledged, never written
        elif t.assignments:
            errors.append(c.create_topic_assigned(
                t.name, t.num_partitions, t.replication_factor,
                [(a.partition_index, list(a.broker_ids)) for a in t.assignments],
                {cfg.name: cfg.value for cfg in t.configs}, validate_only=req.validate_only))
        else:
            internal = t.name == "__consumer_offsets"
            errors.append(c.create_topic(t.name, t.num_partitions, t.replication_factor,
                                         {cfg.name: cfg.value for cfg in t.configs},
                                         validate_only=req.validate_only, internal=internal))
    if not req.validate_only:
        if not await c.wait_committed():
            errors = [(E.NotControllerError.errno, None) if err == 0 else (err, msg) for err, msg in errors]
        await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    results = []
    for t, (err, msg) in zip(req.topics, errors, strict=True):
        topic = c.image.topics.get(t.name)
        created = err == 0 and (topic is not None or req.validate_only)
        requested = {cfg.name: cfg.value for cfg in t.configs}
        if created and topic is not None and not req.validate_only:
            partitions, rf = len(topic.partitions), topic.replication_factor
        elif created and t.assignments:
            partitions, rf = len(t.assignments), len(t.assignments[0].broker_ids)
        elif created:
            partitions = t.num_partitions if t.num_partitions != -1 else c.config["num.partitions"]
            rf = t.replication_factor if t.replication_factor != -1 else c.config["default.replication.factor"]
        else:
            partitions = rf = -1
        if created and topic is not None and not req.validate_only:
            topic_id = topic.topic_id
        else:   # ReplicationControlManager draws the id before it looks at validate_only: a fresh one, not kept
            topic_id = uuid.UUID(int=c.rng.getrandbits(128)) if created else None
        results.append(Result(
            name=t.name, topic_id=topic_id, error_code=err,
            error_message=msg, num_partitions=partitions, replication_factor=rf,
            configs=[Result.CreatableTopicConfigs(name=k, value=v, read_only=False, config_source=source,
                                                  is_sensitive=False)
                     for k, v, source, _ in effective_topic_configs(requested, c.config)] if created else []))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
