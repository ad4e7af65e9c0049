"""ConsumerGroupHeartbeat's request validation, member ids and group size limit, with Kafka 4.4.0's exact codes and
messages (each asserted on the reference and, with KCT_SLOW=1, on Apache Kafka 4.4.0 itself)."""
from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import errors as E

from conformance.wire import Wire
from fixtures.factory import make_target
from fixtures.target import Target
from reference_broker.messages import ConsumerGroupHeartbeatRequest as H

SETTINGS = ["kafka.group.consumer.max.size=1", "kafka.group.consumer.session.timeout.ms=3000",
            "kafka.group.consumer.min.session.timeout.ms=1000", "kafka.group.consumer.heartbeat.interval.ms=500",
            "kafka.group.consumer.min.heartbeat.interval.ms=100"]
SLOW = not os.environ.get("KCT_SLOW")


@pytest.fixture(scope="module", params=[
    "reference",
    pytest.param("kafka", marks=[pytest.mark.slow,
                                 pytest.mark.skipif(SLOW, reason="Apache Kafka target: set KCT_SLOW=1")]),
])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    config = [*SETTINGS, *(["memory=true", "kafka.offsets.topic.num.partitions=3"]
                           if request.param == "reference" else [])]
    with make_target(request.param, config=config, work_dir=tmp_path_factory.mktemp(request.param)) as t:
        yield t


def _heartbeats(bootstrap: str, group: str, requests: list[tuple[int, dict[str, Any]]]) -> list[Any]:
    """Send each (version, fields) heartbeat to the group's coordinator in order; the answers."""
    async def go() -> list[Any]:
        w = await Wire.connect(bootstrap)
        try:
            topic = await w.create_topic(f"kip848-{uuid.uuid4().hex[:8]}", partitions=2)
            await w.coordinator_ready(group)
            co = await w.coordinator(group)
            out = []
            for version, fields in requests:
                base = dict(group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=5000,
                            subscribed_topic_names=[topic], topic_partitions=[])
                base.update(fields)
                out.append((await co.request("ConsumerGroupHeartbeat", H(**base), version=version)).body)
            return out
        finally:
            await w.close()
    return asyncio.run(go())


def test_validation_and_member_ids(target: Target) -> None:
    group = f"kip848-v-{uuid.uuid4().hex[:8]}"
    mid = uuid.uuid4().hex[:22]
    answers = _heartbeats(target.bootstrap, group, [
        (1, {}),                                                        # v1: the client names the member
        (1, {"member_id": mid, "member_epoch": -3}),
        (1, {"member_id": mid, "rebalance_timeout_ms": -1}),
        (1, {"member_id": mid, "subscribed_topic_names": None}),
        (1, {"member_id": mid, "group_id": f"{group}-none", "member_epoch": 5, "topic_partitions": None}),
        (0, {}),                                                        # v0: the coordinator names it
    ])
    invalid = E.InvalidRequestError.errno
    got = [(a.error_code, a.error_message) for a in answers[:5]]
    assert got == [(invalid, "MemberId can't be empty."), (invalid, "MemberEpoch is invalid."),
                   (invalid, "RebalanceTimeoutMs must be provided in first request."),
                   (invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                             "(re-)joining."),
                   (E.GroupIdNotFoundError.errno, f"Consumer group {group}-none not found.")], got
    v0 = answers[5]
    assert v0.error_code == 0 and len(v0.member_id or "") == 22 and v0.member_epoch > 0, v0


def test_group_max_size(target: Target) -> None:
    """group.consumer.max.size=1: a second member is GROUP_MAX_SIZE_REACHED; the first may rejoin."""
    group = f"kip848-m-{uuid.uuid4().hex[:8]}"
    a, b = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    first, second, again = _heartbeats(target.bootstrap, group, [
        (1, {"member_id": a}), (1, {"member_id": b}), (1, {"member_id": a})])
    assert first.error_code == 0, first
    assert (second.error_code, second.error_message) == (
        E.GroupMaxSizeReachedError.errno, "The consumer group has reached its maximum capacity of 1 members."), second
    assert again.error_code == 0, again


def test_admin_on_a_consumer_group(target: Target) -> None:
    """Tools on a consumer group, as Kafka answers: OffsetDelete of a subscribed topic while members are in it is
    GROUP_SUBSCRIBED_TO_TOPIC; DeleteGroups of a group with members is NON_EMPTY_GROUP; once the member left
    (epoch -1) the group is Empty and DeleteGroups deletes it (offsets gone: OffsetFetch answers -1)."""
    from kafka.protocol.admin import DeleteGroupsRequest
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest

    group = f"kip848-a-{uuid.uuid4().hex[:8]}"
    mid = uuid.uuid4().hex[:22]

    async def go() -> tuple:
        w = await Wire.connect(target.bootstrap)
        try:
            topic = await w.create_topic(f"kip848-{uuid.uuid4().hex[:8]}", partitions=2)
            await w.coordinator_ready(group)
            co = await w.coordinator(group)
            j = (await co.request("ConsumerGroupHeartbeat", H(
                group_id=group, member_id=mid, member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=[topic], topic_partitions=[]), version=1)).body
            T = OffsetCommitRequest.OffsetCommitRequestTopic
            commit = (await co.request("OffsetCommit", OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=j.member_epoch, member_id=mid, group_instance_id=None,
                topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])]),
                version=9)).body.topics[0].partitions[0].error_code
            D = OffsetDeleteRequest.OffsetDeleteRequestTopic
            odel = (await co.request("OffsetDelete", OffsetDeleteRequest(group_id=group, topics=[D(
                name=topic, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), version=0)).body
            busy = (await co.request("DeleteGroups", DeleteGroupsRequest(groups_names=[group]),
                                     version=2)).body.results[0].error_code
            left = (await co.request("ConsumerGroupHeartbeat", H(group_id=group, member_id=mid, member_epoch=-1),
                                     version=1)).body
            gone = (await co.request("DeleteGroups", DeleteGroupsRequest(groups_names=[group]),
                                     version=2)).body.results[0].error_code
            F = OffsetFetchRequest.OffsetFetchRequestGroup
            fetched = (await co.request("OffsetFetch", OffsetFetchRequest(groups=[F(
                group_id=group, member_id=None, member_epoch=-1, topics=[F.OffsetFetchRequestTopics(
                    name=topic, partition_indexes=[0])])], require_stable=False), version=8)).body.groups[0]
            return j, commit, odel, busy, left, gone, fetched
        finally:
            await w.close()

    j, commit, odel, busy, left, gone, fetched = asyncio.run(go())
    assert j.error_code == 0 and commit == 0, (j, commit)
    assert odel.error_code == 0 and odel.topics[0].partitions[0].error_code == E.GroupSubscribedToTopicError.errno, odel
    assert busy == E.NonEmptyGroupError.errno, busy
    assert (left.error_code, left.member_epoch) == (0, -1), left
    assert gone == 0, gone
    assert fetched.topics[0].partitions[0].committed_offset == -1, fetched


def test_range_assignor_is_used_when_asked(target: Target) -> None:
    """A member asking for the `range` server assignor: ConsumerGroupDescribe names it, and the member (alone) is
    assigned every partition."""
    from reference_broker.messages import ConsumerGroupDescribeRequest

    group = f"kip848-r-{uuid.uuid4().hex[:8]}"
    mid = uuid.uuid4().hex[:22]

    async def go() -> tuple:
        w = await Wire.connect(target.bootstrap)
        try:
            topic = await w.create_topic(f"kip848-{uuid.uuid4().hex[:8]}", partitions=3)
            await w.coordinator_ready(group)
            co = await w.coordinator(group)
            r = (await co.request("ConsumerGroupHeartbeat", H(
                group_id=group, member_id=mid, member_epoch=0, rebalance_timeout_ms=5000, server_assignor="range",
                subscribed_topic_names=[topic], topic_partitions=[]), version=1)).body
            epoch, got = r.member_epoch, set()
            for _ in range(40):                     # Kafka 4.4.0 may assign a few heartbeats later (Assigning)
                if r.assignment is not None:
                    got = {p for tp in r.assignment.topic_partitions for p in tp.partitions}
                if len(got) == 3:
                    break
                await asyncio.sleep(0.25)
                r = (await co.request("ConsumerGroupHeartbeat", H(
                    group_id=group, member_id=mid, member_epoch=epoch, topic_partitions=None), version=1)).body
                epoch = r.member_epoch or epoch
            d = (await co.request("ConsumerGroupDescribe", ConsumerGroupDescribeRequest(
                group_ids=[group], include_authorized_operations=False), version=0)).body.groups[0]
            return got, d
        finally:
            await w.close()

    got, d = asyncio.run(go())
    assert got == {0, 1, 2}, got
    assert (d.error_code, d.assignor_name) == (0, "range"), d


def test_consumer_group_known_after_a_restart(durable_broker) -> None:
    """A consumer group outlives its coordinator's restart (its existence is in __consumer_offsets): a member's
    heartbeat to the restarted coordinator is UNKNOWN_MEMBER_ID (the member rejoins), not GROUP_ID_NOT_FOUND —
    which the Java client treats as fatal (AbstractHeartbeatRequestManager) — and rejoining works."""
    group = f"kip848-rs-{uuid.uuid4().hex[:8]}"
    mid = uuid.uuid4().hex[:22]
    topic = f"kip848-{uuid.uuid4().hex[:8]}"

    async def hb(epoch: int, create: bool = False) -> Any:
        w = await Wire.connect(durable_broker.bootstrap)
        try:
            if create:
                await w.create_topic(topic, partitions=2)
            await w.coordinator_ready(group)
            co = await w.coordinator(group)
            fields = dict(group_id=group, member_id=mid, member_epoch=epoch, topic_partitions=None)
            if epoch == 0:
                fields.update(rebalance_timeout_ms=5000, subscribed_topic_names=[topic], topic_partitions=[])
            return (await co.request("ConsumerGroupHeartbeat", H(**fields), version=1)).body
        finally:
            await w.close()

    joined = asyncio.run(hb(0, create=True))
    assert joined.error_code == 0, joined
    durable_broker.restart()
    after = asyncio.run(hb(joined.member_epoch))
    assert after.error_code == E.UnknownMemberIdError.errno, after
    again = asyncio.run(hb(0))
    assert again.error_code == 0 and again.member_epoch > 0, again
