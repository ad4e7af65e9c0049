"""ConsumerGroupDescribe (key 69), v0–v1: KIP-848's describe of consumer groups.

Behavior (GroupMetadataManager.consumerGroupDescribe, Kafka 4.4.0 as observed): per group, its state (Empty,
Assigning, Reconciling, Stable), group and assignment epochs, the assignor, and each member's epoch,
subscription (regex "" when none), current and target assignment (topic id and name); v1 adds the member type (1:
consumer protocol). A group that does not exist, or is not a consumer group, is GROUP_ID_NOT_FOUND with Kafka's
message; NOT_COORDINATOR when this broker does not coordinate it.
"""
from __future__ import annotations

from kafka import errors as E

from ..consumer_group import ConsumerGroup
from ..context import BrokerContext
from ..messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from ..registry import handles

API_KEY = 69
VERSIONS = (0, 1)
CONSUMER_MEMBER = 1      # ConsumerGroupDescribeResponse MemberType: the consumer protocol

Group = ConsumerGroupDescribeResponse.DescribedGroup
Member = Group.Member
A = Member.Assignment
TPs = A.TopicPartitions


def _assignment(image, a) -> A:
    return A(topic_partitions=[TPs(topic_id=image.topics[t].topic_id, topic_name=t, partitions=sorted(ps))
                               for t, ps in sorted(a.items()) if ps and t in image.topics])


def _error(gid: str, code: int, message: str | None) -> Group:
    return Group(error_code=code, error_message=message, group_id=gid, group_state="", group_epoch=0,
                 assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2147483648)


@handles(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    out = []
    for gid in req.group_ids:
        err = await b.coordinator_error(gid)
        if err:
            out.append(_error(gid, err, None))
            continue
        g = b.groups.groups.get(gid)
        if g is None:
            out.append(_error(gid, E.GroupIdNotFoundError.errno, f"Group {gid} not found."))
            continue
        if not isinstance(g, ConsumerGroup):
            out.append(_error(gid, E.GroupIdNotFoundError.errno, f"Group {gid} is not a consumer group."))
            continue
        members = []
        for mid, m in g.members.items():
            member = Member(member_id=mid, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
                            client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            subscribed_topic_regex=m.subscribed_topic_regex or "",
                            assignment=_assignment(b.image, m.assigned),
                            target_assignment=_assignment(b.image, g.target.get(mid, {})))
            if ctx.api_version >= 1:
                member.member_type = CONSUMER_MEMBER
            members.append(member)
        out.append(Group(error_code=0, error_message=None, group_id=gid, group_state=g.state,
                         group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=g.assignor,
                         members=members, authorized_operations=-2147483648))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)
