"""ConsumerGroupHeartbeat (key 68), v0–v1: KIP-848's consumer group protocol.

Behavior (GroupMetadataManager.consumerGroupHeartbeat, Kafka 4.4.0 as observed): the request is validated first
(INVALID_REQUEST with Kafka's messages — v1 needs a client-generated member id; a join, epoch 0, needs a rebalance
timeout, no owned partitions and a subscription; UNSUPPORTED_ASSIGNOR for an assignor not in
group.consumer.assignors), then NOT_COORDINATOR if this broker does not lead the group's offsets partition. Epoch 0
joins (v0: the coordinator names the member), -1 leaves, -2 is a static member leaving to come back; any other
epoch is a heartbeat checked against the member's (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND).
Owned and assigned partitions travel as topic ids; the coordinator works with names (group_coordinator.py,
consumer_group.py).
"""
from __future__ import annotations

from ..context import BrokerContext
from ..messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from ..registry import handles

API_KEY = 68
VERSIONS = (0, 1)

Resp = ConsumerGroupHeartbeatResponse


def topic_counts(image) -> dict[str, int]:
    """Every topic a consumer group may subscribe to, with its partition count (internal topics are not)."""
    return {name: len(t.partitions) for name, t in image.topics.items() if not t.internal}


@handles(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    v = ctx.api_version
    image = b.image
    owned = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            t = image.topics_by_id.get(tp.topic_id)
            if t is not None:
                owned.setdefault(t.name, set()).update(tp.partitions)
    regex = req.subscribed_topic_regex if v >= 1 else None
    groups = b.groups
    bad = groups.validate_consumer_heartbeat(v, req.group_id, req.member_id, req.member_epoch, req.instance_id,
                                             req.rack_id, req.rebalance_timeout_ms, req.subscribed_topic_names,
                                             regex, req.server_assignor, owned)
    if bad is None:
        err = await b.coordinator_error(req.group_id)
        if err:
            return Resp(throttle_time_ms=0, error_code=err, error_message=None, member_id=None, member_epoch=0,
                        heartbeat_interval_ms=0, assignment=None)
        r = groups.consumer_heartbeat(v, req.group_id, req.member_id, req.member_epoch, req.instance_id,
                                      req.rack_id, req.rebalance_timeout_ms, req.subscribed_topic_names, regex,
                                      req.server_assignor, owned, ctx.client_id or "",
                                      "/" + ctx.peer.rsplit(":", 1)[0], topic_counts(image))
    else:
        r = bad
    if r.error:
        return Resp(throttle_time_ms=0, error_code=r.error, error_message=r.message, member_id=None,
                    member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if r.assignment is not None:
        assignment = Resp.Assignment(topic_partitions=[
            Resp.Assignment.TopicPartitions(topic_id=image.topics[t].topic_id, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items()) if t in image.topics and ps])
    return Resp(throttle_time_ms=0, error_code=0, error_message=None, member_id=r.member_id,
                member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)
