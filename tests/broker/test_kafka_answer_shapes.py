"""Answer fields the differential mode (``python -m conformance.diff``) found the reference broker answering unlike
Apache Kafka 4.4.0, each pinned to what Kafka answered (the values below are Kafka's answers to the same requests).
Every test here also passes against Kafka 4.4.0 itself (a ``bootstrap`` of a running Kafka in place of the
fixture), except the one assertion marked as a GAPS.md row; on a fresh Kafka, once a first FindCoordinator has
created __consumer_offsets (GAPS.md: First FindCoordinator)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from conformance.properties import ops
from conformance.wire import Wire, idempotent_batch, keyed_batch, record_batch, unique_name
from fixtures import make_target
from fixtures.reference import ReferenceTarget
from fixtures.target import Target

MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 10, 2, 3
OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID = 1, 75, 100
OUT_OF_ORDER_SEQUENCE = 45
# Kafka 4.4.0's CreateTopics v7 answer for a topic with retention.ms=1000 (the configs the reference knows)
KAFKA_CREATED = {"cleanup.policy": ("delete", 5), "compression.type": ("producer", 5),
                 "max.message.bytes": ("1048588", 5), "message.timestamp.type": ("CreateTime", 5),
                 "retention.bytes": ("-1", 5), "retention.ms": ("1000", 1), "segment.bytes": ("1073741824", 5),
                 "unclean.leader.election.enable": ("false", 5)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceTarget]:
    with ReferenceTarget({"memory": "true"}, work_dir=tmp_path_factory.mktemp("shapes")) as t:
        yield t


def run(bootstrap: str, body: Any) -> Any:
    async def go() -> Any:
        w = await Wire.connect(bootstrap)
        try:
            return await body(w)
        finally:
            await w.close()
    return asyncio.run(go())


def test_find_coordinator_error_message(broker: ReferenceTarget) -> None:
    """v1-v3 answer error_message "NONE" on success (KafkaApis: Errors.message()), v4 "" per key; an empty group id
    is a key like any other."""
    async def body(w: Wire) -> tuple[Any, Any, Any]:
        v3 = (await w.request("FindCoordinator", FindCoordinatorRequest(key="g1", key_type=0), version=3)).body
        empty = (await w.request("FindCoordinator", FindCoordinatorRequest(key="", key_type=0), version=3)).body
        v4 = (await w.request("FindCoordinator", FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]),
                              version=4)).body
        return v3, empty, v4
    v3, empty, v4 = run(broker.bootstrap, body)
    assert (v3.error_code, v3.error_message) == (0, "NONE"), v3
    assert (empty.error_code, empty.error_message) == (0, "NONE"), empty
    assert (v4.coordinators[0].error_code, v4.coordinators[0].error_message) == (0, ""), v4


def test_produce_error_message_only_for_unreadable_records(broker: ReferenceTarget) -> None:
    """A batch the log refuses (MESSAGE_TOO_LARGE) has no error_message; records that are no batch at all do."""
    async def body(w: Wire) -> tuple[Any, Any]:
        topic = await w.create_topic(configs={"max.message.bytes": "200"})
        big = await w.request("Produce", w.produce_request(topic, 0, record_batch([b"x" * 500])))
        junk = await w.request("Produce", w.produce_request(topic, 0, b"garbage-not-a-batch-at-all-" + b"x" * 40))
        return big.body.responses[0].partition_responses[0], junk.body.responses[0].partition_responses[0]
    big, junk = run(broker.bootstrap, body)
    assert (big.error_code, big.error_message) == (MESSAGE_TOO_LARGE, None), big
    assert junk.error_code == CORRUPT_MESSAGE and junk.error_message, junk


def test_produce_log_start_offset_on_append_failures(broker: ReferenceTarget) -> None:
    """A failure of the append itself (here OUT_OF_ORDER_SEQUENCE) answers the partition's log start offset; a
    partition refused before the append (MESSAGE_TOO_LARGE, unknown partition) answers -1 (ReplicaManager.
    appendToLocalLog: UNKNOWN_LOG_APPEND_INFO vs processFailedRecord). Kafka 4.4.0: 0 and -1, -1 (the reference
    answered -1 for the sequence gap before)."""
    async def body(w: Wire) -> list[Any]:
        topic = await w.create_topic(configs={"max.message.bytes": "2000"})
        await w.produce(topic, count=3)
        assert await ops.delete_records(w, topic, 0, 1) == (0, 1)
        err, pid, epoch = await w.init_producer_id()
        assert err == 0
        out = []
        for batch, part in [(idempotent_batch([b"a"], pid, epoch, 0), 0), (idempotent_batch([b"b"], pid, epoch, 7), 0),
                            (record_batch([b"y" * 5000]), 0), (record_batch([b"y"]), 5)]:
            r = await w.request("Produce", w.produce_request(topic, part, batch))
            pr = r.body.responses[0].partition_responses[0]
            out.append((pr.error_code, pr.base_offset, pr.log_start_offset))
        return out
    ok, gap, large, unknown = run(broker.bootstrap, body)
    assert ok == (0, 3, 1), ok
    assert gap == (OUT_OF_ORDER_SEQUENCE, -1, 1), gap
    assert large == (MESSAGE_TOO_LARGE, -1, -1), large
    assert unknown == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1), unknown


def test_describe_configs_messages_and_offset_metadata_limit(broker: ReferenceTarget) -> None:
    """error_message "" for a described broker and an unknown topic (Kafka leaves the schema default);
    offset.metadata.max.bytes is reported (4096, DEFAULT_CONFIG, read-only)."""
    R = DescribeConfigsRequest.DescribeConfigsResource

    async def body(w: Wire) -> Any:
        req = DescribeConfigsRequest(resources=[
            R(resource_type=4, resource_name="0", configuration_keys=["offset.metadata.max.bytes"]),
            R(resource_type=2, resource_name="no-such-topic", configuration_keys=None)],
            include_synonyms=False, include_documentation=False)
        return (await w.request("DescribeConfigs", req)).body.results
    described, unknown = run(broker.bootstrap, body)
    assert (described.error_code, described.error_message) == (0, ""), described
    assert [(c.name, c.value, c.config_source, c.read_only) for c in described.configs] == [
        ("offset.metadata.max.bytes", "4096", 5, True)], described
    assert (unknown.error_code, unknown.error_message) == (UNKNOWN_TOPIC_OR_PARTITION, ""), unknown


def test_create_topics_answers_every_effective_config(broker: ReferenceTarget) -> None:
    """CreateTopics v5+ answers every topic config with value and source, sorted by name (KIP-525), not only the
    overrides; also for validate_only."""
    T = CreateTopicsRequest.CreatableTopic

    async def body(w: Wire) -> list[Any]:
        out = []
        for validate in (False, True):
            req = CreateTopicsRequest(topics=[T(name=f"shapes-{validate}", num_partitions=2, replication_factor=1,
                                                assignments=[], configs=[T.CreatableTopicConfig(name="retention.ms",
                                                                                                value="1000")])],
                                      timeout_ms=10000, validate_only=validate)
            out.append((await w.request("CreateTopics", req, version=7)).body.topics[0])
        return out
    for t in run(broker.bootstrap, body):
        assert (t.error_code, t.num_partitions, t.replication_factor) == (0, 2, 1), t
        got = {c.name: (c.value, c.config_source) for c in t.configs}
        assert [c.name for c in t.configs] == sorted(got), "Kafka sorts the configs by name"
        assert {k: got.get(k) for k in KAFKA_CREATED} == KAFKA_CREATED, got



def test_create_topics_refused_topic_has_empty_configs(broker: ReferenceTarget) -> None:
    """A topic CreateTopics refuses has configs [] (not null), -1 partitions and replication factor (Kafka 4.4.0
    for an existing or an invalid name)."""
    T = CreateTopicsRequest.CreatableTopic

    async def body(w: Wire) -> Any:
        req = CreateTopicsRequest(topics=[T(name="bad name!", num_partitions=1, replication_factor=1, assignments=[],
                                            configs=[])], timeout_ms=10000, validate_only=False)
        return (await w.request("CreateTopics", req, version=7)).body.topics[0]
    t = run(broker.bootstrap, body)
    assert (t.error_code, t.num_partitions, t.replication_factor, t.configs) == (17, -1, -1, []), t


def test_offset_commit_unknown_partitions_answered_before_the_group(broker: ReferenceTarget) -> None:
    """A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION whatever the group would say; a commit naming
    only such partitions does not reach the group, so no simple group is created (Kafka 4.4.0: 3, 3 / 3, 22 / Dead)."""
    async def body(w: Wire) -> tuple[Any, Any, Any, str]:
        topic = await w.create_topic()
        c = await w.coordinator("shapes-g1")
        only_unknown = await c.offset_commit("shapes-g1", {(topic, 5): (1, None), ("no-such-topic", 0): (1, None)},
                                             generation=5, member_id="m")
        mixed = await c.offset_commit("shapes-g1", {(topic, 0): (1, None), (topic, 5): (1, None)}, generation=5,
                                      member_id="m")
        assert await c.offset_commit("shapes-g2", {(topic, 5): (1, None)}) == {(topic, 5): 3}
        return topic, only_unknown, mixed, (await c.describe_group("shapes-g2")).group_state
    topic, only_unknown, mixed, state = run(broker.bootstrap, body)
    assert only_unknown == {(topic, 5): 3, ("no-such-topic", 0): 3}, only_unknown
    assert mixed == {(topic, 0): 22, (topic, 5): 3}, mixed
    assert state == "Dead", f"a commit of only unknown partitions created group shapes-g2 ({state})"


# (config, value, Kafka 4.4.0's CreateTopics error code): LogConfig's validators
CONFIG_CASES = [("segment.bytes", "1048575", 40), ("segment.bytes", "1048576", 0), ("segment.bytes", "x", 40),
                ("min.insync.replicas", "0", 40), ("min.insync.replicas", "99999999999", 40),
                ("max.message.bytes", "-1", 40), ("max.message.bytes", "0", 0), ("retention.ms", "-2", 40),
                ("retention.ms", "-1", 0), ("retention.bytes", "-5", 0), ("cleanup.policy", "bogus", 40),
                ("cleanup.policy", "compact, delete", 0), ("cleanup.policy", "", 0),
                ("message.timestamp.type", "x", 40), ("compression.type", "x", 40), ("compression.type", "gzip", 0),
                ("unclean.leader.election.enable", "maybe", 40), ("unclean.leader.election.enable", "TRUE", 0),
                ("segment.bytes", None, 40), ("no.such.config", "1", 40)]


def test_create_topics_validates_configs_as_kafka(broker: ReferenceTarget) -> None:
    """Topic configs are checked with Kafka 4.x LogConfig's types, ranges and words (validate_only)."""
    T = CreateTopicsRequest.CreatableTopic

    async def body(w: Wire) -> list[int]:
        out = []
        for i, (key, value, _) in enumerate(CONFIG_CASES):
            req = CreateTopicsRequest(topics=[T(name=f"cfg-{i}", num_partitions=1, replication_factor=1,
                                                assignments=[], configs=[T.CreatableTopicConfig(name=key,
                                                                                                value=value)])],
                                      timeout_ms=10000, validate_only=True)
            out.append((await w.request("CreateTopics", req, version=7)).body.topics[0].error_code)
        return out
    got = run(broker.bootstrap, body)
    wrong = [(k, v, code, want) for (k, v, want), code in zip(CONFIG_CASES, got, strict=True) if code != want]
    assert not wrong, f"(config, value, reference, Kafka): {wrong}"


def test_delete_records_refused_on_compacted_topics(broker: ReferenceTarget) -> None:
    """DeleteRecords on a topic whose cleanup.policy lacks "delete" is POLICY_VIOLATION (44), also for offsets that
    would be out of range; "compact,delete" allows it (Kafka 4.4.0, found by the differential machine)."""
    async def body(w: Wire) -> list[tuple[int, int]]:
        compact = await w.create_topic(configs={"cleanup.policy": "compact"})
        both = await w.create_topic(configs={"cleanup.policy": "compact,delete"})
        return [await w.delete_records(compact, 0, 0), await w.delete_records(compact, 0, 5),
                await w.delete_records(both, 0, 0)]
    assert run(broker.bootstrap, body) == [(44, -1), (44, -1), (0, 0)]


def test_produce_records_that_are_not_one_batch(broker: ReferenceTarget) -> None:
    """Kafka 4.4.0's answers (error, message present) to records that are not one good v2 batch, for a topic that
    exists and one that does not: only an unknown magic is refused first and with a message."""
    import struct

    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    one = keyed_batch([b"v"])
    crc = bytearray(one)
    crc[-1] ^= 0xFF
    longer = bytearray(one)
    longer[8:12] = struct.pack(">i", len(one) + 100)
    legacy = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    legacy.append(0, timestamp=1, key=None, value=b"x")
    kinds = {"garbage": b"not a record batch at all, " * 3, "two batches": one + one, "empty": b"",
             "crc": bytes(crc), "magic 1": bytes(legacy.build()), "partial": one[:30], "tiny": b"abcdefghij",
             "claims more": bytes(longer), "one + 2 bytes": one + b"zz"}
    kafka = {(True, "garbage"): (2, True), (True, "two batches"): (87, False), (True, "empty"): (87, False),
             (True, "crc"): (2, False), (True, "magic 1"): (87, False), (True, "partial"): (87, False),
             (True, "tiny"): (87, False), (True, "claims more"): (87, False), (True, "one + 2 bytes"): (0, False),
             (False, "garbage"): (2, True)}

    async def body(w: Wire) -> dict[tuple[bool, str], tuple[int, bool]]:
        topic = await w.create_topic()
        out = {}
        for exists in (True, False):
            for kind, records in kinds.items():
                r = await w.request("Produce", w.produce_request(topic if exists else "no-such-topic", 0, records,
                                                                 1))
                p = r.body.responses[0].partition_responses[0]
                out[(exists, kind)] = (p.error_code, p.error_message is not None)
        return out
    got = run(broker.bootstrap, body)
    want = {(exists, kind): kafka.get((exists, kind), (3, False)) for exists in (True, False) for kind in kinds}
    assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want[k]}


def test_delete_topics_cluster_defaults_and_validate_only_ids(broker: ReferenceTarget) -> None:
    """Kafka 4.4.0: DeleteTopics errors carry their text (null on success); DescribeConfigs of the cluster default
    broker resource "" lists only dynamic defaults (none here); a validate_only CreateTopics still answers a topic
    id (a fresh one, not kept)."""
    from kafka.protocol.admin import DeleteTopicsRequest

    D = DeleteTopicsRequest.DeleteTopicState
    R = DescribeConfigsRequest.DescribeConfigsResource
    T = CreateTopicsRequest.CreatableTopic

    async def body(w: Wire) -> tuple[list[Any], Any, Any]:
        topic = await w.create_topic()
        deleted = []
        for name in (topic, topic):
            r = await w.request("DeleteTopics", DeleteTopicsRequest(topics=[D(name=name, topic_id=None)],
                                                                    timeout_ms=10000), version=6)
            deleted.append(r.body.responses[0])
        cluster = (await w.request("DescribeConfigs", DescribeConfigsRequest(
            resources=[R(resource_type=4, resource_name="", configuration_keys=None)], include_synonyms=False,
            include_documentation=False))).body.results[0]
        validated = (await w.request("CreateTopics", CreateTopicsRequest(topics=[T(
            name="shapes-validated", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=True), version=7)).body.topics[0]
        return deleted, cluster, validated
    (gone, again), cluster, validated = run(broker.bootstrap, body)
    assert (gone.error_code, gone.error_message) == (0, None) and gone.topic_id is not None, gone
    assert again.error_code == UNKNOWN_TOPIC_OR_PARTITION and again.error_message, again
    # Kafka lists min.insync.replicas here (KRaft's cluster-level dynamic default, written at format time)
    assert (cluster.error_code, cluster.error_message) == (0, ""), cluster
    assert [(c.name, c.value, c.config_source, c.read_only, c.config_type) for c in cluster.configs] == [
        ("min.insync.replicas", "1", 3, False, 3)], cluster
    assert validated.error_code == 0 and validated.topic_id is not None, validated


def test_offset_delete_unknown_partition(broker: ReferenceTarget) -> None:
    """OffsetDelete of a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION beside the deleted ones
    (Kafka 4.4.0: 3 where the reference answered 0); an unknown group still answers GROUP_ID_NOT_FOUND."""
    from kafka.protocol.consumer import OffsetDeleteRequest

    T = OffsetDeleteRequest.OffsetDeleteRequestTopic

    async def body(w: Wire) -> tuple[str, Any, Any]:
        topic = await w.create_topic()
        c = await w.coordinator("shapes-od")
        assert await c.offset_commit("shapes-od", {(topic, 0): (1, None)}) == {(topic, 0): 0}
        req = OffsetDeleteRequest(group_id="shapes-od", topics=[T(name=topic, partitions=[
            T.OffsetDeleteRequestPartition(partition_index=0), T.OffsetDeleteRequestPartition(partition_index=1)])])
        ours = (await c.request("OffsetDelete", req, version=0)).body
        req.group_id = "shapes-od-unknown"
        unknown = (await c.request("OffsetDelete", req, version=0)).body
        return topic, ours, unknown
    topic, ours, unknown = run(broker.bootstrap, body)
    assert ours.error_code == 0 and {p.partition_index: p.error_code for p in ours.topics[0].partitions} == {
        0: 0, 1: UNKNOWN_TOPIC_OR_PARTITION}, ours
    assert (unknown.error_code, unknown.topics) == (69, []), unknown


# (configs, Kafka 4.4.0's error_message) for CreateTopics validate_only: null values first, then unknown names, then
# each value in LogConfig's definition order (segment.bytes before retention.ms whatever the request's order), then
# the checks across configs
CONFIG_MESSAGES = [
    ({"zzz": None, "segment.bytes": "1"}, "Null value not supported for topic configs: zzz"),
    ({"segment.bytes": "1", "no.such": "1"}, "Unknown topic config name: no.such"),
    ({"retention.ms": "-5", "segment.bytes": "1"},
     "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576"),
    ({"retention.ms": " abc"}, "Invalid value  abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": " 10 "}, "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"),
    ({"segment.bytes": "1_048_576"}, "Invalid value 1_048_576 for configuration segment.bytes: Not a number of type INT"),
    ({"min.cleanable.dirty.ratio": "2"},
     "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"cleanup.policy": "compact,bogus"},
     "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"cleanup.policy": "compact,,bogus"}, "Configuration 'cleanup.policy' values must not be empty."),
    ({"message.timestamp.type": " x"},
     "Invalid value x for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ({"leader.replication.throttled.replicas": "*,0:0"},
     "Invalid value [*, 0:0] for configuration leader.replication.throttled.replicas: leader.replication.throttled."
     "replicas must be the literal '*' or a list of replicas in the following format: "
     "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"},
     "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (10)"),
    ({"leader.replication.throttled.replicas": "0:0,,1:1", "cleanup.policy": "compact,compact"}, None),
]


def test_topic_config_refusals_in_kafkas_words(broker: ReferenceTarget) -> None:
    """INVALID_CONFIG with the message Kafka 4.4.0 gives, which names the value as ConfigDef shows it (as sent when it
    does not parse, parsed when a validator refuses it) and the first bad config in LogConfig's order."""
    T = CreateTopicsRequest.CreatableTopic

    async def body(w: Wire) -> list[tuple[int, str | None]]:
        out = []
        for i, (configs, _) in enumerate(CONFIG_MESSAGES):
            req = CreateTopicsRequest(topics=[T(name=f"words-{i}", num_partitions=1, replication_factor=1,
                                                assignments=[], configs=[T.CreatableTopicConfig(name=k, value=v)
                                                                         for k, v in configs.items()])],
                                      timeout_ms=10000, validate_only=True)
            t = (await w.request("CreateTopics", req, version=7)).body.topics[0]
            out.append((t.error_code, t.error_message))
        return out
    got = run(broker.bootstrap, body)
    want = [(40 if msg else 0, msg) for _, msg in CONFIG_MESSAGES]
    assert got == want, [(c, g, w) for (c, _), g, w in zip(CONFIG_MESSAGES, got, want, strict=True) if g != w]


# values as sent -> as Kafka 4.4.0's DescribeConfigs shows them (its CreateTopics answer echoes them as sent)
ODD_VALUES = {"unclean.leader.election.enable": ("TRUE", "true"), "retention.ms": (" 5000 ", "5000"),
              "cleanup.policy": ("compact, delete", "compact,delete"), "compression.type": (" gzip", "gzip"),
              "min.cleanable.dirty.ratio": ("1e-5", "1.0E-5"), "segment.ms": ("+100000", "100000"),
              "follower.replication.throttled.replicas": (" 0:0 , 1:1", "0:0,1:1"),
              "max.message.bytes": ("007000", "7000"), "segment.bytes": ("\t2000000\n", "2000000")}


def test_topic_config_values_echoed_as_sent_and_described_parsed(broker: ReferenceTarget) -> None:
    """CreateTopics v5+ answers an override as it was sent (ReplicationControlManager: the record's string);
    DescribeConfigs shows it parsed and printed by ConfigDef.convertToString (ConfigHelper), with its type."""
    T = CreateTopicsRequest.CreatableTopic
    R = DescribeConfigsRequest.DescribeConfigsResource

    async def body(w: Wire) -> tuple[Any, Any]:
        req = CreateTopicsRequest(topics=[T(name="odd-values", num_partitions=1, replication_factor=1, assignments=[],
                                            configs=[T.CreatableTopicConfig(name=k, value=v)
                                                     for k, (v, _) in ODD_VALUES.items()])],
                                  timeout_ms=10000, validate_only=False)
        created = (await w.request("CreateTopics", req, version=7)).body.topics[0]
        described = (await w.request("DescribeConfigs", DescribeConfigsRequest(
            resources=[R(resource_type=2, resource_name="odd-values", configuration_keys=None)],
            include_synonyms=False, include_documentation=False), version=4)).body.results[0]
        return created, described
    created, described = run(broker.bootstrap, body)
    assert created.error_code == 0, created
    echoed = {c.name: (c.value, c.config_source) for c in created.configs}
    assert {k: echoed.get(k) for k in ODD_VALUES} == {k: (v, 1) for k, (v, _) in ODD_VALUES.items()}, echoed
    shown = {c.name: (c.value, c.config_source, c.config_type) for c in described.configs}
    assert len(shown) == 37 and len(echoed) == 37, (sorted(shown), sorted(echoed))
    types = {"unclean.leader.election.enable": 1, "compression.type": 2, "retention.ms": 5, "segment.ms": 5,
             "max.message.bytes": 3, "segment.bytes": 3, "min.cleanable.dirty.ratio": 6, "cleanup.policy": 7,
             "follower.replication.throttled.replicas": 7}
    assert {k: shown.get(k) for k in ODD_VALUES} == {k: (v, 1, types[k]) for k, (_, v) in ODD_VALUES.items()}, shown


# -- the same requests to the reference broker and to Apache Kafka 4.4.0 (one node each) --------------------------

@pytest.fixture(scope="module", params=["reference", "kafka"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A single-node target of each kind: these answers are asserted to be Kafka's by asking Kafka as well. The
    reference runs with the kafka target's group timings (fixtures/kafka.py)."""
    timings = ["kafka.group.initial.rebalance.delay.ms=300", "kafka.group.min.session.timeout.ms=500"]
    config = ["memory=true", *timings] if request.param == "reference" else []
    with make_target(request.param, config=config, work_dir=tmp_path_factory.mktemp(request.param)) as t:
        yield t


async def _own(stack: AsyncExitStack, bootstrap: str, group: str) -> Wire:
    """A connection of its own to the group's coordinator: a broker answers one connection's requests in order, so
    a parked JoinGroup would hold up every later request on a shared one. Once the coordinator is ready (a fresh
    Kafka answers NOT_COORDINATOR until its offsets partition is loaded)."""
    co = await stack.enter_async_context(await ops.coordinator(bootstrap, group))
    await co.coordinator_ready(group)
    return co


async def _stable_static_pair(stack: AsyncExitStack, bootstrap: str, group: str,
                              version: int) -> list[tuple[Wire, Any, str]]:
    """Two static members joined and synced (assignments {id: b"A:<id>"}): [(wire, JoinGroup answer, instance id)]
    of the leader, then of the follower."""
    members = [(await _own(stack, bootstrap, group), instance) for instance in ("inst-a", "inst-b")]
    joins = await asyncio.gather(*(c.join_group(group, instance_id=i, version=version) for c, i in members))
    assert [j.error_code for j in joins] == [0, 0], joins
    assert joins[0].generation_id == joins[1].generation_id, joins
    pair = sorted(((c, j, i) for (c, i), j in zip(members, joins, strict=True)),
                  key=lambda m: m[1].member_id != m[1].leader)
    assignments = {j.member_id: b"A:" + j.member_id.encode() for _, j, _ in pair}
    synced = await asyncio.gather(*(c.sync_group(group, j.generation_id, j.member_id,
                                                 assignments if j.member_id == j.leader else None, instance_id=i)
                                    for c, j, i in pair))
    assert [s.error_code for s in synced] == [0, 0], synced
    return pair


@pytest.mark.parametrize("version", [8, 9])
def test_static_leader_rejoining_a_stable_group(target: Target, version: int) -> None:
    """A static leader rejoining a Stable group with a new member id and the same protocols: no rebalance; v9+
    answers the new leader id, the member list and skip_assignment (KIP-814), v0-v8 the leader id as it was before
    the replacement — the old one (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin's
    currentLeader). The member keeps its assignment, also in DescribeGroups."""
    group = unique_name(f"shapes-static-v{version}")

    async def body(w: Wire) -> tuple[Any, Any, Any, Any]:
        async with AsyncExitStack() as stack:
            (c1, ja, instance), (_, jb, _) = await _stable_static_pair(stack, target.bootstrap, group, version)
            again = await c1.join_group(group, instance_id=instance, version=version, timeout_s=5)
            return ja, jb, again, await c1.describe_group(group)
    ja, jb, again, described = run(target.bootstrap, body)
    assert again.error_code == 0 and again.member_id not in (ja.member_id, jb.member_id), again
    assert again.generation_id == ja.generation_id, "no rebalance"
    if version >= 9:
        assert (again.leader, again.skip_assignment) == (again.member_id, True), again
        assert sorted(m.member_id for m in again.members) == sorted([again.member_id, jb.member_id]), again
    else:
        assert (again.leader, again.members) == (ja.member_id, []), f"{target.name}: {again}"
    assert described.group_state == "Stable", described
    kept = {m.member_id: bytes(m.member_assignment) for m in described.members}
    assert kept == {again.member_id: b"A:" + ja.member_id.encode(), jb.member_id: b"A:" + jb.member_id.encode()}


def test_static_member_with_new_metadata_does_not_rebalance(target: Target) -> None:
    """A static member rejoining a Stable group with other metadata (and another protocol besides) rebalances only
    if the protocol the group would select changes (ClassicGroup.selectProtocol after updateMember); here it does
    not, so the join is answered at once in the same generation and the new metadata is described."""
    group = unique_name("shapes-static-meta")

    async def body(w: Wire) -> tuple[Any, Any, Any]:
        async with AsyncExitStack() as stack:
            _, (c2, jb, instance) = await _stable_static_pair(stack, target.bootstrap, group, 7)
            again = await c2.join_group(group, instance_id=instance, timeout_s=5,
                                        protocols=[("roundrobin", b"rr"), ("range", b"\x00\x01new")])
            return jb, again, await c2.describe_group(group)
    jb, again, described = run(target.bootstrap, body)
    assert (again.error_code, again.generation_id, again.protocol_name) == (0, jb.generation_id, "range"), again
    assert described.group_state == "Stable", described
    assert bytes(next(m for m in described.members if m.member_id == again.member_id).member_metadata) == \
        b"\x00\x01new", described


def test_describe_groups_shows_assignments_until_a_rebalance_clears_them(target: Target) -> None:
    """DescribeGroups answers each member's assignment in every state — the previous generation's through
    PreparingRebalance and CompletingRebalance (ClassicGroupMember.describeNoMetadata) — and the protocol and
    member metadata only when Stable; a rebalance that starts from CompletingRebalance clears the assignments
    (resetAndPropagateAssignmentWithError)."""
    group = unique_name("shapes-describe")

    def shape(d: Any) -> tuple[str, str, list[tuple[bytes, bytes]]]:
        return (d.group_state, d.protocol_data,
                sorted((bytes(m.member_metadata), bytes(m.member_assignment)) for m in d.members))

    async def body(w: Wire) -> list[Any]:
        async with AsyncExitStack() as stack:
            ca, cb, admin = [await _own(stack, target.bootstrap, group) for _ in range(3)]
            ja = await ca.join_new_member(group, metadata=b"meta-a")
            assert (await ca.sync_group(group, ja.generation_id, ja.member_id,
                                        {ja.member_id: b"asg-a"})).error_code == 0
            seen = [await admin.describe_group(group)]
            b_joins = asyncio.ensure_future(cb.join_new_member(group, metadata=b"meta-b"))
            for _ in range(100):
                if (await admin.describe_group(group)).group_state == "PreparingRebalance":
                    break
                await asyncio.sleep(0.05)
            seen.append(await admin.describe_group(group))
            await ca.join_group(group, ja.member_id, metadata=b"meta-a")
            jb = await b_joins
            seen.append(await admin.describe_group(group))
            b_again = asyncio.ensure_future(cb.join_group(group, jb.member_id, metadata=b"meta-b2"))
            for _ in range(100):
                if (await admin.describe_group(group)).group_state == "PreparingRebalance":
                    break
                await asyncio.sleep(0.05)
            seen.append(await admin.describe_group(group))
            b_again.cancel()
            return seen
    stable, preparing, completing, restarted = [shape(d) for d in run(target.bootstrap, body)]
    assert stable == ("Stable", "range", [(b"meta-a", b"asg-a")]), stable
    assert preparing == ("PreparingRebalance", "", [(b"", b""), (b"", b"asg-a")]), preparing
    assert completing == ("CompletingRebalance", "", [(b"", b""), (b"", b"asg-a")]), completing
    assert restarted == ("PreparingRebalance", "", [(b"", b""), (b"", b"")]), restarted


def test_fetch_answers_unknown_partitions_last(target: Target) -> None:
    """KafkaApis.handleFetchRequest answers partitions it does not know (unknown topic or partition) apart and adds
    them after the partitions it read, merging only consecutive partitions of one topic; theirs is
    aborted_transactions [] where a read partition answers null (read_committed reads: [])."""
    async def body(w: Wire) -> tuple[str, list[Any], list[Any]]:
        topic = await w.create_topic(partitions=2)
        await w.produce(topic, 0, count=2)
        out = []
        for iso in (0, 1):
            req = w.fetch_request([("shapes-no-such-topic", 0, 0), (topic, 0, 0), (topic, 7, 0), (topic, 1, 99)],
                                  max_wait_ms=0, min_bytes=0, isolation_level=iso)
            r = await w.request("Fetch", req, version=12)
            out.append([(t.topic, p.partition_index, p.error_code, p.aborted_transactions, p.high_watermark)
                        for t in r.body.responses for p in t.partitions])
        return topic, out, [t.topic for t in r.body.responses]
    topic, (uncommitted, committed), topics = run(target.bootstrap, body)
    unknown = [("shapes-no-such-topic", 0, UNKNOWN_TOPIC_OR_PARTITION, [], -1), (topic, 7, UNKNOWN_TOPIC_OR_PARTITION,
                                                                                 [], -1)]
    assert uncommitted == [(topic, 0, 0, None, 2), (topic, 1, OFFSET_OUT_OF_RANGE, None, -1), *unknown], uncommitted
    assert committed == [(topic, 0, 0, [], 2), (topic, 1, OFFSET_OUT_OF_RANGE, None, -1), *unknown], committed
    assert topics == [topic, "shapes-no-such-topic", topic], "one topic entry per run of consecutive partitions"


def test_fetch_parks_despite_an_unknown_partition(target: Target) -> None:
    """An unknown partition is no read error: the partitions read still wait for min_bytes up to max_wait
    (Kafka hands only the known partitions to ReplicaManager.fetchMessages)."""
    async def body(w: Wire) -> float:
        topic = await w.create_topic()
        req = w.fetch_request([("shapes-no-such-topic", 0, 0), (topic, 0, 0)], max_wait_ms=600, min_bytes=1)
        r = await w.request("Fetch", req, version=12)
        assert [p.error_code for t in r.body.responses for p in t.partitions] == [0, UNKNOWN_TOPIC_OR_PARTITION]
        return r.rtt_ns / 1e9
    waited = run(target.bootstrap, body)
    assert waited >= 0.5, f"{target.name} answered after {waited:.2f} s, not at max_wait (0.6 s)"


def test_fetch_current_leader_only_on_v16_and_not_for_unknown_epoch(target: Target) -> None:
    """UNKNOWN_LEADER_EPOCH (a newer epoch than the leader's) carries no current_leader on v12 or v16: KafkaApis
    fills it for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH on v16+ only."""
    from kafka.protocol.metadata import MetadataRequest

    async def body(w: Wire) -> list[Any]:
        topic = await w.create_topic()
        md = await w.request("Metadata", MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False), version=12)
        topic_id = md.body.topics[0].topic_id
        out = []
        for version in (12, 16):
            req = w.fetch_request([(topic, 0, 0)], max_wait_ms=0, min_bytes=0, current_leader_epoch=5)
            if version >= 13:
                req.topics[0].topic_id = topic_id
            r = (await w.request("Fetch", req, version=version)).body
            p = r.responses[0].partitions[0]
            out.append((p.error_code, p.current_leader, r.node_endpoints if version >= 16 else None))
        return out
    assert run(target.bootstrap, body) == [(UNKNOWN_LEADER_EPOCH, None, None), (UNKNOWN_LEADER_EPOCH, None, [])]


def test_fetch_by_topic_id_unknown_id_and_unknown_partition(target: Target) -> None:
    """v13+ (KIP-516): an id the broker does not know is UNKNOWN_TOPIC_ID, but a known id with a partition it does
    not have is UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleFetchRequest: ``topicIdPartition.topic == null`` first,
    then ``metadataCache.contains``); both come after the partition read."""
    import uuid

    from kafka.protocol.metadata import MetadataRequest

    async def body(w: Wire) -> list[Any]:
        topic = await w.create_topic()
        md = await w.request("Metadata", MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False), version=12)
        topic_id = md.body.topics[0].topic_id
        stranger = uuid.uuid4()
        req = w.fetch_request([("a", 0, 0), ("b", 0, 0), ("a", 7, 0)], max_wait_ms=0, min_bytes=0)
        req.topics[0].topic_id, req.topics[1].topic_id, req.topics[2].topic_id = topic_id, stranger, topic_id
        r = (await w.request("Fetch", req, version=13)).body
        return [(t.topic_id == topic_id, t.topic_id == stranger, p.partition_index, p.error_code)
                for t in r.responses for p in t.partitions]
    assert run(target.bootstrap, body) == [(True, False, 0, 0), (False, True, 0, UNKNOWN_TOPIC_ID),
                                           (True, False, 7, UNKNOWN_TOPIC_OR_PARTITION)]


def test_sync_answer_restarts_the_members_session(target: Target) -> None:
    """A parked SyncGroup answered because the group moved on (here REBALANCE_IN_PROGRESS: the silent leader was
    removed at the pending-sync expiry) restarts the member's session (GroupMetadataManager.propagateAssignment
    reschedules the heartbeat of every member whose sync it completes): the follower, whose session would have run
    out just after, may rejoin 0.6 s later (session 1 s) and is let in."""
    group = unique_name("shapes-sync-session")

    async def body(w: Wire) -> tuple[Any, Any]:
        async with AsyncExitStack() as stack:
            ca, cb = [await _own(stack, target.bootstrap, group) for _ in range(2)]
            kw = {"session_timeout_ms": 1000, "rebalance_timeout_ms": 1000}
            ja = await ca.join_new_member(group, **kw)
            assert (await ca.sync_group(group, ja.generation_id, ja.member_id, {ja.member_id: b"x"})).error_code == 0
            b_joins = asyncio.ensure_future(cb.join_new_member(group, **kw))
            await asyncio.sleep(0.1)
            ja = await ca.join_group(group, ja.member_id, **kw)
            jb = await b_joins
            assert ja.leader == ja.member_id, (ja, jb)
            synced = await cb.sync_group(group, jb.generation_id, jb.member_id)   # the leader never syncs
            await asyncio.sleep(0.6)
            return synced, await cb.join_group(group, jb.member_id, timeout_s=5, **kw)
    synced, again = run(target.bootstrap, body)
    assert synced.error_code == 27, synced          # REBALANCE_IN_PROGRESS
    assert again.error_code == 0, f"{target.name}: {again}"
