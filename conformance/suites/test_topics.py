"""Topics as admin tools and clients see them: the topic configs CreateTopics accepts and DescribeConfigs returns,
and what Metadata for all topics lists.

Both run on any target with a bootstrap broker (a live Kafka included): they create topics of their own and read
them back, nothing else.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka import errors as E

from conformance.evidence import Evidence
from conformance.rules import rule
from conformance.wire import Wire, unique_name

SUITE = "topics"
INVALID_CONFIG = E.InvalidConfigurationError.errno

rule("TOPIC-CONFIGS-KAFKA", "CreateTopics accepts every topic config Kafka defines, with a valid value (not only "
     "the ones a broker acts on), and DescribeConfigs returns each override; a name Kafka does not define is "
     "INVALID_CONFIG (\"Unknown topic config name\")",
     "org.apache.kafka.storage.internals.log.LogConfig (configDef, validateNames); "
     "ControllerConfigurationValidator.validate", SUITE)
rule("METADATA-ALL-TOPICS-INTERNAL", "Metadata for all topics (topics null) lists the internal __consumer_offsets, "
     "is_internal true, once it exists; clients leave it out of subscriptions themselves",
     "kafka.server.KafkaApis.handleTopicMetadataRequest (isAllTopics → metadataCache.getAllTopics, no filter); "
     "MetadataResponse is_internal", SUITE)

pytestmark = pytest.mark.timeout(120)

# Topic configs Kafka has defined since 3.x, none of which the reference broker acts on, each with a valid value
# other than its default.
STORED_CONFIGS = {"segment.ms": "100000", "preallocate": "true", "flush.messages": "100",
                  "min.compaction.lag.ms": "10", "delete.retention.ms": "1000", "index.interval.bytes": "100",
                  "min.cleanable.dirty.ratio": "0.3", "segment.index.bytes": "4096"}


@pytest.mark.rule("TOPIC-CONFIGS-KAFKA")
async def test_every_kafka_topic_config_is_accepted(wire: Wire, evidence: Evidence) -> None:
    topic = unique_name("configs")
    code, message = await wire.create_topic_code(topic, 1, 1, STORED_CONFIGS)
    assert code == 0, f"CreateTopics with Kafka topic configs {sorted(STORED_CONFIGS)} answered {code}: {message}"
    err, got = await wire.topic_configs(topic, list(STORED_CONFIGS))
    evidence.note("described", got)
    assert err == 0 and {k: got.get(k) for k in STORED_CONFIGS} == STORED_CONFIGS, (
        f"DescribeConfigs (error {err}) returned {got}, created with {STORED_CONFIGS}")
    code, message = await wire.create_topic_code(unique_name("configs"), 1, 1, {"no.such.topic.config": "1"})
    assert code == INVALID_CONFIG, f"an unknown topic config name answered {code} ({message}); Kafka: INVALID_CONFIG"


@pytest.mark.rule("METADATA-ALL-TOPICS-INTERNAL")
async def test_metadata_for_all_topics_lists_internal_topics(wire: Wire, evidence: Evidence) -> None:
    from kafka.protocol.metadata import MetadataRequest

    # setup: the first group lookup creates __consumer_offsets (Kafka answers COORDINATOR_NOT_AVAILABLE meanwhile)
    await wire.coordinator_ready(unique_name("internal"))
    named = await wire.metadata(["__consumer_offsets"])
    if named.get("__consumer_offsets", {}).get("error_code", 3) != 0:
        pytest.skip("precondition: a group coordinator answers, but Metadata does not name __consumer_offsets")
    r = await wire.request("Metadata", MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                       include_cluster_authorized_operations=False,
                                                       include_topic_authorized_operations=False))
    internal = {t.name: t.is_internal for t in r.body.topics}
    evidence.note("all topics (name: is_internal)", dict(sorted(internal.items())[:50]))
    assert internal.get("__consumer_offsets") is True, (
        f"Metadata for all topics lists {sorted(internal)[:20]} (is_internal: "
        f"{internal.get('__consumer_offsets')}); Kafka lists __consumer_offsets with is_internal true")


# -- the admin APIs behind Kafka's tools (issue 27): IncrementalAlterConfigs, CreatePartitions, DescribeLogDirs ----

rule("CONFIGS-INCREMENTAL-TOPIC", "IncrementalAlterConfigs SET of a topic config is seen by DescribeConfigs on "
     "every broker with source DYNAMIC_TOPIC_CONFIG, and the topic's other overrides stay as they were (only the "
     "named configs change)",
     "KIP-339; org.apache.kafka.controller.ConfigurationControlManager.incrementalAlterConfigs; "
     "kafka.server.ConfigHelper.describeConfigs", SUITE)
rule("CONFIGS-INVALID-REFUSED", "IncrementalAlterConfigs with a value its topic config's validator refuses is "
     "INVALID_CONFIG and changes nothing",
     "org.apache.kafka.controller.ConfigurationControlManager (validateAlterConfig); "
     "kafka.server.ControllerConfigurationValidator.validate → LogConfig.validate", SUITE)
rule("CONFIGS-VALIDATE-ONLY", "IncrementalAlterConfigs with validate_only answers as it would and changes nothing",
     "KIP-339 (validateOnly); org.apache.kafka.controller.ConfigurationControlManager.incrementalAlterConfigs "
     "(newlyCreatedResource / validateOnly: no records)", SUITE)
rule("CREATE-PARTITIONS-INCREASE-ONLY", "CreatePartitions with a count not above the topic's current one "
     "(a decrease or the same) is INVALID_PARTITIONS and the partition count stays",
     "KIP-195; org.apache.kafka.controller.ReplicationControlManager.createPartitions", SUITE)
rule("CREATE-PARTITIONS-METADATA", "after CreatePartitions raises a topic's count, Metadata from every broker lists "
     "the new partitions, each led by one of its replicas, and a producer can write to them",
     "KIP-195; org.apache.kafka.controller.ReplicationControlManager.createPartitions (PartitionRecords); "
     "kafka.server.KafkaApis.handleTopicMetadataRequest", SUITE)
rule("LOG-DIRS-SIZE", "DescribeLogDirs to a partition's leader reports the partition with the size of its log in "
     "bytes (a v2 batch kept as produced: its length) and offset lag 0",
     "KIP-113; kafka.server.ReplicaManager.describeLogDirs / getLogEndOffsetLag", SUITE)

DYNAMIC_TOPIC_CONFIG = 1
SET = 0
# metadata propagation to every broker after a committed change: Kafka answers once the records are committed and
# each broker applies them on its next metadata fetch (well under a second on a healthy cluster)
PROPAGATION_S = 15.0


async def _alter_topic(wire: Wire, topic: str, changes: dict[str, str], *, validate_only: bool = False
                       ) -> tuple[int, str | None]:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as IR
    R = IR.AlterConfigsResource
    req = IR(resources=[R(resource_type=2, resource_name=topic, configs=[
        R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in changes.items()])],
        validate_only=validate_only)
    (res,) = (await wire.request("IncrementalAlterConfigs", req)).body.responses
    return res.error_code, res.error_message


async def _topic_configs(wire: Wire, topic: str, keys: list[str]) -> dict[str, tuple[str | None, int]]:
    """DescribeConfigs of a topic → {name: (value, config_source)}."""
    from kafka.protocol.admin import DescribeConfigsRequest as DR
    req = DR(resources=[DR.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=keys)],
             include_synonyms=False, include_documentation=False)
    (res,) = (await wire.request("DescribeConfigs", req, record=False)).body.results
    assert res.error_code == 0, f"DescribeConfigs {topic} answered {res.error_code}: {res.error_message}"
    return {c.name: (c.value, c.config_source) for c in res.configs}


async def _every_broker(wire: Wire) -> list[Wire]:
    brokers = (await wire.metadata([], record=False))["_brokers"]
    return [await wire.sibling(host, port) for _, (host, port) in sorted(brokers.items())]


async def _seen_everywhere(wire: Wire, topic: str, want: dict[str, tuple[str | None, int]]
                           ) -> dict[int, dict[str, tuple[str | None, int]]]:
    """Poll DescribeConfigs on every broker until each shows ``want`` (bounded by PROPAGATION_S); → last views."""
    loop = asyncio.get_running_loop()
    views: dict[int, dict[str, tuple[str | None, int]]] = {}
    for i, w in enumerate(await _every_broker(wire)):
        deadline = loop.time() + PROPAGATION_S
        while True:
            views[i] = await _topic_configs(w, topic, list(want))
            if all(views[i].get(k) == v for k, v in want.items()) or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
    return views


async def _after_barrier(wire: Wire, topic: str, keys: list[str]) -> dict[int, dict[str, tuple[str | None, int]]]:
    """Every broker's view of ``topic`` once a later change to another topic is seen everywhere: one controller
    writes one metadata log, applied in order, so by then any change made to ``topic`` before it is seen too."""
    marker = await wire.create_topic(unique_name("marker"), 1, 1)
    assert (await _alter_topic(wire, marker, {"segment.ms": "100000"}))[0] == 0
    await _seen_everywhere(wire, marker, {"segment.ms": ("100000", DYNAMIC_TOPIC_CONFIG)})
    return {i: await _topic_configs(w, topic, keys) for i, w in enumerate(await _every_broker(wire))}


@pytest.mark.rule("CONFIGS-INCREMENTAL-TOPIC")
async def test_incremental_alter_configs_changes_only_the_named_config(wire: Wire, evidence: Evidence) -> None:
    topic = unique_name("alter")
    await wire.create_topic(topic, 1, 1, {"max.message.bytes": "5000"})
    code, message = await _alter_topic(wire, topic, {"retention.ms": "3600000"})
    assert code == 0, f"IncrementalAlterConfigs SET retention.ms answered {code}: {message}"
    want = {"retention.ms": ("3600000", DYNAMIC_TOPIC_CONFIG), "max.message.bytes": ("5000", DYNAMIC_TOPIC_CONFIG)}
    views = await _seen_everywhere(wire, topic, want)
    evidence.note("DescribeConfigs per broker (value, source)", views)
    for i, view in views.items():
        assert view == want, (f"broker #{i} describes {view} within {PROPAGATION_S:g} s; Kafka: {want} (the SET "
                              f"config with source DYNAMIC_TOPIC_CONFIG, the other override unchanged)")


@pytest.mark.rule("CONFIGS-INVALID-REFUSED")
async def test_invalid_topic_config_value_is_refused_and_changes_nothing(wire: Wire, evidence: Evidence) -> None:
    topic = unique_name("alter")
    await wire.create_topic(topic, 1, 1, {"retention.ms": "3600000"})
    code, message = await _alter_topic(wire, topic, {"retention.ms": "-5"})     # LogConfig: at least -1
    evidence.note("answer to retention.ms=-5", {"error_code": code, "error_message": message})
    assert code == INVALID_CONFIG, f"retention.ms=-5 answered {code} ({message}); Kafka: INVALID_CONFIG"
    views = await _after_barrier(wire, topic, ["retention.ms"])
    for i, view in views.items():
        assert view["retention.ms"] == ("3600000", DYNAMIC_TOPIC_CONFIG), (
            f"broker #{i} describes retention.ms as {view['retention.ms']} after a refused change; Kafka: unchanged")


@pytest.mark.rule("CONFIGS-VALIDATE-ONLY")
async def test_validate_only_alter_changes_nothing(wire: Wire, evidence: Evidence) -> None:
    topic = unique_name("alter")
    await wire.create_topic(topic, 1, 1, {"retention.ms": "3600000"})
    code, message = await _alter_topic(wire, topic, {"retention.ms": "7200000"}, validate_only=True)
    assert code == 0, f"a valid validate_only change answered {code}: {message}"
    views = await _after_barrier(wire, topic, ["retention.ms"])
    evidence.note("DescribeConfigs per broker after validate_only retention.ms=7200000", views)
    for i, view in views.items():
        assert view["retention.ms"] == ("3600000", DYNAMIC_TOPIC_CONFIG), (
            f"broker #{i} describes retention.ms as {view['retention.ms']} after a validate_only change; Kafka: "
            f"unchanged (3600000)")


async def _create_partitions(wire: Wire, topic: str, count: int) -> tuple[int, str | None]:
    from kafka.protocol.admin import CreatePartitionsRequest as CP
    req = CP(topics=[CP.CreatePartitionsTopic(name=topic, count=count, assignments=None)], timeout_ms=10000,
             validate_only=False)
    (res,) = (await wire.request("CreatePartitions", req)).body.results
    return res.error_code, res.error_message


@pytest.mark.rule("CREATE-PARTITIONS-INCREASE-ONLY")
async def test_create_partitions_refuses_a_count_that_is_no_increase(wire: Wire, evidence: Evidence) -> None:
    topic = await wire.create_topic(unique_name("grow"), 2, 1)
    for count in (1, 2):
        code, message = await _create_partitions(wire, topic, count)
        evidence.note(f"CreatePartitions count {count} of 2", {"error_code": code, "error_message": message})
        assert code == E.InvalidPartitionsError.errno, (
            f"CreatePartitions to {count} of a 2-partition topic answered {code} ({message}); Kafka: "
            f"INVALID_PARTITIONS")
    parts = (await wire.metadata([topic]))[topic]["partitions"]
    assert sorted(parts) == [0, 1], f"the topic has partitions {sorted(parts)} after refused changes; Kafka: [0, 1]"


@pytest.mark.rule("CREATE-PARTITIONS-METADATA")
async def test_new_partitions_are_in_every_brokers_metadata_with_leaders(wire: Wire, evidence: Evidence) -> None:
    brokers = await _every_broker(wire)
    rf = min(len(brokers), 3)
    topic = await wire.create_topic(unique_name("grow"), 1, rf)
    code, message = await _create_partitions(wire, topic, 3)
    assert code == 0, f"CreatePartitions to 3 answered {code}: {message}"
    loop = asyncio.get_running_loop()
    views = {}
    for i, w in enumerate(brokers):
        deadline = loop.time() + PROPAGATION_S
        while True:
            parts = (await w.metadata([topic], record=False))[topic]["partitions"]
            views[i] = {p: (s["error_code"], s["leader"], s["replicas"]) for p, s in sorted(parts.items())}
            led = sorted(parts) == [0, 1, 2] and all(
                s["error_code"] == 0 and s["leader"] in s["replicas"] for s in parts.values())
            if led or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert led, (f"broker #{i} Metadata shows {views[i]} (partition: error, leader, replicas) "
                     f"{PROPAGATION_S:g} s after CreatePartitions to 3; Kafka: partitions 0-2, each led by a replica")
    evidence.note("Metadata per broker (partition: error, leader, replicas)", views)
    leader = await wire.leader(topic, 2)
    produced = await leader.produce(topic, 2, count=2, size=20)
    assert produced.error_code == 0, f"producing to new partition 2 answered {produced.error_code}"


@pytest.mark.rule("LOG-DIRS-SIZE")
async def test_describe_log_dirs_reports_the_log_size(wire: Wire, evidence: Evidence) -> None:
    from kafka.protocol.admin import DescribeLogDirsRequest as DL

    topic = await wire.create_topic(unique_name("dirs"), 1, 1)
    leader = await wire.leader(topic, 0)
    sent = await leader.produce(topic, 0, count=5, size=100)
    req = DL(topics=[DL.DescribableLogDirTopic(topic=topic, partitions=[0])])
    body = (await leader.request("DescribeLogDirs", req)).body
    found = [(d.log_dir, p.partition_size, p.offset_lag) for d in body.results if d.error_code == 0
             for t in d.topics if t.name == topic for p in t.partitions if p.partition_index == 0]
    evidence.note("DescribeLogDirs (log dir, size, lag)", found)
    assert len(found) == 1, f"the leader's DescribeLogDirs lists partition 0 {len(found)} times: {body}"
    _, size, lag = found[0]
    assert (size, lag) == (sent.batch_bytes, 0), (
        f"DescribeLogDirs reports size {size}, lag {lag} after one batch of {sent.batch_bytes} bytes; Kafka: "
        f"size {sent.batch_bytes}, lag 0")
