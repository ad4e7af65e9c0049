"""Issue 26's program: three confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848), one leaving and
one joining later, consume every record and commit to the log end — on the reference and on Apache Kafka 4.4.0.

Before KIP-848 lived in the reference, the same program consumed 0 of 3000 records from it without an error (the
broker did not advertise ConsumerGroupHeartbeat and librdkafka waited forever). The members are polled from one
thread, round-robin, so the phases (two members, one leaves, a third joins) are ordered without sleeps; each waits
on what the group must do (records arriving), bounded by a multiple of the group's session timeout.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from fixtures.factory import make_target
from fixtures.target import Target

RECORDS, PARTITIONS = 3000, 6
# short KIP-848 timings, accepted by Kafka 4.4.0 (GroupCoordinatorConfig: min <= value <= max, interval < session)
CONSUMER_GROUP_SETTINGS = {
    "kafka.group.consumer.session.timeout.ms": "3000",
    "kafka.group.consumer.min.session.timeout.ms": "1000",
    "kafka.group.consumer.heartbeat.interval.ms": "500",
    "kafka.group.consumer.min.heartbeat.interval.ms": "100",
}
SESSION_S = 3.0
BOUND_S = 20 * SESSION_S          # generous: CI shares 2 cores; every phase normally takes a few heartbeats

SLOW = not os.environ.get("KCT_SLOW")


@pytest.fixture(scope="module", params=[
    "reference",
    pytest.param("kafka", marks=[pytest.mark.slow,
                                 pytest.mark.skipif(SLOW, reason="Apache Kafka target: set KCT_SLOW=1")]),
])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    config = [f"{k}={v}" for k, v in CONSUMER_GROUP_SETTINGS.items()]
    if request.param == "reference":
        config += ["memory=true", "kafka.offsets.topic.num.partitions=5"]
    with make_target(request.param, config=config, work_dir=tmp_path_factory.mktemp(request.param)) as t:
        yield t


def _consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def _poll(members: list[Consumer], seen: dict[str, int], want: int, bound_s: float) -> None:
    """Poll every member round-robin, committing what each got, until ``want`` distinct records were seen."""
    deadline = time.monotonic() + bound_s
    while len(seen) < want:
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(seen)} of {want} records consumed within {bound_s:.0f} s")
        for i, c in enumerate(members):
            msgs = c.consume(200, 0.1)
            got = [m for m in msgs if m.error() is None]
            for m in got:
                seen.setdefault(m.value().decode(), i)
            if got:
                try:
                    c.commit(asynchronous=False)
                except KafkaException as e:   # a partition that moved away meanwhile (STALE_MEMBER_EPOCH): at least once
                    print("commit refused:", e)


def test_three_consumers_leave_and_join(target: Target, tmp_path: Path) -> None:
    bs = target.bootstrap
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"kip848-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    seen: dict[str, int] = {}
    a, b = _consumer(bs, group, topic), _consumer(bs, group, topic)
    c = None
    try:
        _poll([a, b], seen, RECORDS // 3, BOUND_S)
        a.close()                                    # leaves: ConsumerGroupHeartbeat epoch -1
        c = _consumer(bs, group, topic)              # joins later: gets partitions b revokes
        _poll([b, c], seen, RECORDS, BOUND_S)
        # every partition's committed offset reaches the log end (the last commits may race a reassignment: poll
        # until they do, bounded)
        deadline = time.monotonic() + BOUND_S
        while True:
            for m in (b, c):
                m.consume(100, 0.1)
                try:
                    m.commit(asynchronous=False)
                except KafkaException:
                    pass
            committed = b.committed([TopicPartition(topic, i) for i in range(PARTITIONS)], timeout=10)
            offsets = {tp.partition: tp.offset for tp in committed}
            if all(offsets[i] == RECORDS // PARTITIONS for i in range(PARTITIONS)):
                break
            assert time.monotonic() < deadline, f"committed offsets {offsets} never reached the log end"
        assert {seen[v] for v in seen} >= {1}, "the member that stayed consumed"
        assert c.assignment(), "the member that joined later was given partitions"
    finally:
        for m in (b, c):
            if m is not None:
                m.close()
    assert len(seen) == RECORDS


def test_consumer_group_admin_answers(target: Target) -> None:
    """What tools see of a consumer group, as Kafka 4.4.0 answers (seen on both targets): ApiVersions lists
    ConsumerGroupHeartbeat / ConsumerGroupDescribe v0–v1 and finalizes group.version 1; ListGroups v5 types it
    "consumer"; DescribeGroups (v0–v5) calls it Dead; ConsumerGroupDescribe describes it (v1: member type 1) and
    answers GROUP_ID_NOT_FOUND with Kafka's message for an unknown group; confluent-kafka's AdminClient shows the
    members and their assignment."""
    import asyncio

    from confluent_kafka import ConsumerGroupType
    from kafka import errors as E
    from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
    from kafka.protocol.metadata import ApiVersionsRequest

    from conformance.wire import Wire
    from reference_broker.messages import ConsumerGroupDescribeRequest

    bs = target.bootstrap
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"kip848-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    c = _consumer(bs, group, topic)
    try:
        deadline = time.monotonic() + BOUND_S
        while not c.assignment():
            c.consume(10, 0.2)
            assert time.monotonic() < deadline, "the consumer was never assigned its partitions"

        async def wire() -> tuple:
            w = await Wire.connect(bs)
            try:
                co = await w.coordinator(group)
                av = (await w.request("ApiVersions", ApiVersionsRequest[4](client_software_name="kct",
                                                                            client_software_version="1"),
                                      version=4)).body
                lg = (await co.request("ListGroups", ListGroupsRequest[5](states_filter=[], types_filter=["Consumer"]),
                                       version=5)).body
                dg = (await co.request("DescribeGroups", DescribeGroupsRequest[5](
                    groups=[group], include_authorized_operations=False), version=5)).body
                cgd = (await co.request("ConsumerGroupDescribe", ConsumerGroupDescribeRequest[1](
                    group_ids=[group], include_authorized_operations=False), version=1)).body
                missing = f"{group}-none"
                co2 = await w.coordinator(missing)
                unknown = (await co2.request("ConsumerGroupDescribe", ConsumerGroupDescribeRequest[0](
                    group_ids=[missing], include_authorized_operations=False), version=0)).body
                return av, lg, dg, cgd, unknown, missing
            finally:
                await w.close()

        av, lg, dg, cgd, unknown, missing = asyncio.run(wire())
        keys = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
        assert (keys.get(68), keys.get(69)) == ((0, 1), (0, 1)), keys
        assert ("group.version", 0, 1) in {(f.name, f.min_version, f.max_version) for f in av.supported_features}
        assert ("group.version", 1, 1) in {(f.name, f.min_version_level, f.max_version_level)
                                           for f in av.finalized_features}
        listed = {g.group_id: g for g in lg.groups}
        assert group in listed, lg
        assert (listed[group].group_type, listed[group].protocol_type) == ("consumer", "consumer"), listed[group]
        assert listed[group].group_state in ("Stable", "Reconciling", "Assigning"), listed[group]
        d = dg.groups[0]
        assert (d.error_code, d.group_state, d.members) == (0, "Dead", []), d
        g = cgd.groups[0]
        assert (g.error_code, g.group_id, g.assignor_name) == (0, group, "uniform"), g
        assert len(g.members) == 1 and g.members[0].member_type == 1, g
        assert g.members[0].subscribed_topic_names == [topic] and g.members[0].client_host.startswith("/"), g
        u = unknown.groups[0]
        assert (u.error_code, u.error_message) == (E.GroupIdNotFoundError.errno, f"Group {missing} not found."), u
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER, desc
        assert len(desc.members) == 1 and {tp.partition for tp in desc.members[0].assignment.topic_partitions} \
            == {0, 1}, desc
    finally:
        c.close()


def test_java_consumers_with_the_consumer_protocol(target: Target) -> None:
    """Apache Kafka's Java client (kafka-clients 4.4.0, chaos/java) with ``group.protocol=consumer``: two members
    share a topic and consume every record once each commits; when one closes, the other takes every partition
    and consumes what comes next."""
    import shutil

    if shutil.which("java") is None:
        pytest.skip("no java on PATH (the Java client's driver needs 17+)")
    from chaos.client_stacks import make_client
    from chaos.clients import ClientConfig

    bs = target.bootstrap
    topic, group = f"kip848-j-{uuid.uuid4().hex[:8]}", f"kip848-jg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(30)

    def produce(first: int, n: int) -> set[int]:
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
        for i in range(first, first + n):
            p.produce(topic, str(i).encode(), partition=i % 4)
        assert p.flush(30) == 0
        return set(range(first, first + n))

    cfg = ClientConfig(bs, group=group, extra={"group.protocol": "consumer"})
    members = [make_client("java", cfg), make_client("java", cfg)]
    seen: dict[int, set[int]] = {0: set(), 1: set()}

    def poll(which: list[int], want: set[int]) -> None:
        deadline = time.monotonic() + BOUND_S
        while not want <= seen[0] | seen[1]:
            assert time.monotonic() < deadline, f"{len(want - seen[0] - seen[1])} records never consumed"
            for i in which:
                recs, _ = members[i].poll(0.3)
                for _t, _p, _o, _k, v in recs:
                    seen[i].add(int(v))
                if recs:
                    last: dict[str, int] = {}
                    for t, p, o, _k, _v in recs:
                        last[f"{t}/{p}"] = max(last.get(f"{t}/{p}", 0), o + 1)
                    members[i].commit(last)

    try:
        for m in members:
            m.subscribe([topic])
        first = produce(0, 400)
        poll([0, 1], first)
        from confluent_kafka import ConsumerGroupType
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER and len(desc.members) == 2, desc
        members[0].close()                                  # leaves the group (epoch -1)
        second = produce(400, 200)
        poll([1], second)
        assert second <= seen[1], "the member that stayed consumed everything produced after the other left"
    finally:
        for m in members:
            m.close()
