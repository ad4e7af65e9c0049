"""Metadata (key 3), v0–v12.

Behavior:
- v0: an empty topic list means all topics; v1+: null means all, empty means none. "All" includes the internal
  ``__consumer_offsets`` (is_internal true), as Kafka's metadataCache.getAllTopics does; clients leave it out of
  pattern subscriptions themselves (exclude.internal.topics).
- Unknown topics are created when ``auto.create.topics.enable`` and the request allows it (v4+; always for v0–v3),
  answered with LEADER_NOT_AVAILABLE on that first response as Kafka does; otherwise UNKNOWN_TOPIC_OR_PARTITION.
  Illegal names get INVALID_TOPIC_EXCEPTION.
- v10+ carry topic ids; a lookup by topic id (name null) is answered by id. Authorized operations are "not
  requested" (-2147483648): there is no authorizer.
- Everything comes from the broker's metadata image: live (unfenced) brokers at their advertised addresses, each
  partition's leader, leader epoch, replicas, ISR and offline replicas (replicas on fenced or unregistered
  brokers); a leaderless partition has leader -1 and LEADER_NOT_AVAILABLE. The controller id is a live broker's
  (KRaft: clients cannot reach the controller quorum).
"""
from __future__ import annotations

import uuid

from kafka import errors as E
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from ..context import BrokerContext
from ..metadata.records import NO_LEADER
from ..offset_store import OFFSETS_TOPIC
from ..registry import handles
from ..topic_config import topic_name_error

API_KEY = 3
VERSIONS = (0, 12)
NO_AUTH_OPS = None  # encodes as -2147483648: "not requested"
ZERO_UUID = uuid.UUID(int=0)

Topic = MetadataResponse.MetadataResponseTopic
Part = Topic.MetadataResponsePartition


def _topic_entry(b, t, error: int = 0):
    img = b.image
    parts = [Part(error_code=E.LeaderNotAvailableError.errno if p.leader == NO_LEADER else 0,
                  partition_index=p.index, leader_id=p.leader, leader_epoch=p.leader_epoch,
                  replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=p.offline_replicas(img))
             for p in t.partitions]
    return Topic(error_code=error, name=t.name, topic_id=t.topic_id, is_internal=t.internal, partitions=parts,
                 authorized_operations=NO_AUTH_OPS)


def _serve_stale(b) -> bool:  # noqa: ANN001 - the broker
    """Fault switch metadata.serve_stale_view: every third Metadata request naming topics is answered from a view
    older than the broker's last answer (its topics unknown)."""
    if not b.faults.on("metadata.serve_stale_view"):
        return False
    b._stale_view_requests = getattr(b, "_stale_view_requests", 0) + 1
    return b._stale_view_requests % 3 == 0


@handles(MetadataRequest, MetadataResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    v = ctx.api_version
    if req.topics is None or (v == 0 and not req.topics):
        hide = b.faults.on("metadata.all_topics_hide_internal")
        topics = [_topic_entry(b, t) for t in b.topics.values() if not (hide and t.internal)]
    else:
        topics = []
        allow_create = (req.allow_auto_topic_creation if v >= 4 else True) and b.config["auto.create.topics.enable"]
        stale = _serve_stale(b)
        for rt in req.topics:
            name = rt.name
            if name is None and v >= 10:
                t = b.topics_by_id.get(rt.topic_id)
                if t is None:
                    topics.append(Topic(error_code=E.UnknownTopicIdError.errno, name=None, topic_id=rt.topic_id,
                                        is_internal=False, partitions=[], authorized_operations=NO_AUTH_OPS))
                else:
                    topics.append(_topic_entry(b, t))
                continue
            t = b.topics.get(name)
            if t is not None and stale and not t.internal:   # test-only: an older view, before this topic
                topics.append(Topic(error_code=E.UnknownTopicOrPartitionError.errno, name=name, topic_id=ZERO_UUID,
                                    is_internal=False, partitions=[], authorized_operations=NO_AUTH_OPS))
                continue
            if t is not None:
                topics.append(_topic_entry(b, t))
                continue
            if topic_name_error(name):
                err = E.InvalidTopicError.errno
            elif allow_create and name == OFFSETS_TOPIC:
                await b.ensure_offsets_topic()            # created as the internal topic, never as a plain one
                if name in b.topics:
                    topics.append(_topic_entry(b, b.topics[name]))
                    continue
                err = E.LeaderNotAvailableError.errno
            elif allow_create:
                err, _ = await b.create_topic(name)     # forwarded to the controller (AutoTopicCreationManager)
                err = E.LeaderNotAvailableError.errno if err in (0, E.TopicAlreadyExistsError.errno) else err
            else:
                err = E.UnknownTopicOrPartitionError.errno
            topics.append(Topic(error_code=err, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[],
                                authorized_operations=NO_AUTH_OPS))
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=i.broker_id, host=i.host, port=i.port, rack=i.rack)
               for i in b.brokers()]
    return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=b.cluster_id,
                            controller_id=b.controller_id, topics=topics,
                            authorized_operations=NO_AUTH_OPS)
