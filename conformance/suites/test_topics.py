"""Topics as admin tools and clients see them: the topic configs CreateTopics accepts and DescribeConfigs returns,
and what Metadata for all topics lists.

Both run on any target with a bootstrap broker (a live Kafka included): they create topics of their own and read
them back, nothing else.
"""
from __future__ import annotations

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
