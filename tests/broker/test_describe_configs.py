"""DescribeConfigs as real admin clients use it (confluent-kafka/librdkafka and kafka-python): topic overrides
and broker settings with their sources, unknown topics and other brokers' ids refused (ConfigHelper)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.reference import ReferenceTarget

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@pytest.fixture
def configured(tmp_path: Path) -> Iterator[ReferenceTarget]:
    with ReferenceTarget({"memory": "true", "kafka.group.min.session.timeout.ms": "500"},
                         work_dir=tmp_path) as t:
        yield t


def test_confluent_admin_describes_topic_and_broker(configured: ReferenceTarget) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    a = AdminClient({"bootstrap.servers": configured.bootstrap})
    a.create_topics([NewTopic("dc", 1, 1, config={"max.message.bytes": "5000"})])["dc"].result(10)
    topic = ConfigResource("topic", "dc")
    got = a.describe_configs([topic])[topic].result(10)
    assert (got["max.message.bytes"].value, got["max.message.bytes"].source) == ("5000", DYNAMIC_TOPIC_CONFIG)
    # the cluster-level dynamic default Kafka 4.x writes at format time (DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (got["min.insync.replicas"].value, got["min.insync.replicas"].source) == ("1", 3)
    assert got["cleanup.policy"].value == "delete"
    (broker_id,) = a.list_topics(timeout=10).brokers
    broker = ConfigResource("broker", str(broker_id))
    b = a.describe_configs([broker])[broker].result(10)
    assert (b["group.min.session.timeout.ms"].value, b["group.min.session.timeout.ms"].source) == (
        "500", STATIC_BROKER_CONFIG)
    assert (b["message.max.bytes"].value, b["message.max.bytes"].source) == ("1048588", DEFAULT_CONFIG)
    missing = ConfigResource("topic", "no-such-topic")
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        a.describe_configs([missing])[missing].result(10)


def test_kafka_python_admin_narrows_to_keys(configured: ReferenceTarget) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    k = KafkaAdminClient(bootstrap_servers=configured.bootstrap)
    try:
        k.create_topics([NewTopic("dk", 1, 1, topic_configs={"retention.ms": "1000"})])
        out = k.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "dk", ["retention.ms", "segment.bytes"])])
        configs = out["topic"]["dk"]
        assert "retention.ms" in configs and set(configs) <= {"retention.ms", "segment.bytes"}, configs
        assert configs["retention.ms"]["value"] == "1000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        k.close()


# Every topic config of Apache Kafka 4.4.0 (its DescribeConfigs for a topic lists these 37), with a value that is
# valid there and not its default.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete", "compression.gzip.level": "5", "compression.lz4.level": "3",
    "compression.type": "zstd", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "errors.deadletterqueue.group.enable": "true", "file.delete.delay.ms": "10", "flush.messages": "100",
    "flush.ms": "1000", "follower.replication.throttled.replicas": "0:0", "index.interval.bytes": "100",
    "leader.replication.throttled.replicas": "*", "local.retention.bytes": "-1", "local.retention.ms": "-1",
    "max.compaction.lag.ms": "100000", "max.decompressed.message.bytes": "1000000", "max.message.bytes": "5000",
    "message.timestamp.after.max.ms": "1000", "message.timestamp.before.max.ms": "1000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "10",
    "min.insync.replicas": "1", "preallocate": "true", "remote.copy.lag.bytes": "10", "remote.copy.lag.ms": "10",
    "remote.log.copy.disable": "true", "remote.log.delete.on.disable": "true", "remote.storage.enable": "false",
    "retention.bytes": "100000", "retention.ms": "100000", "segment.bytes": "2000000",
    "segment.index.bytes": "4096", "segment.jitter.ms": "10", "segment.ms": "100000",
    "unclean.leader.election.enable": "true",
}


def test_every_kafka_topic_config_is_accepted_and_described(configured: ReferenceTarget) -> None:
    """Kafka accepts every topic config its LogConfig defines (names outside it: INVALID_CONFIG "Unknown topic config
    name"); DescribeConfigs echoes each override. (Before: only nine names were known, the others refused.)"""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    a = AdminClient({"bootstrap.servers": configured.bootstrap})
    a.create_topics([NewTopic("every", 1, 1, config=KAFKA_TOPIC_CONFIGS)])["every"].result(10)
    topic = ConfigResource("topic", "every")
    got = a.describe_configs([topic])[topic].result(10)
    assert {k: (got[k].value, got[k].source) for k in KAFKA_TOPIC_CONFIGS} == {
        k: (v, DYNAMIC_TOPIC_CONFIG) for k, v in KAFKA_TOPIC_CONFIGS.items()}
    assert set(got) == set(KAFKA_TOPIC_CONFIGS), set(got) ^ set(KAFKA_TOPIC_CONFIGS)
    # Kafka 4.4.0's answers for unknown names and values out of range (seen with validate_only requests)
    for config, says in [({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
                         ({"segment.bytes": "10"}, "Value must be at least 1048576"),
                         ({"cleanup.policy": "bogus"}, "String must be one of: compact, delete"),
                         ({"compression.gzip.level": "12"}, "Value must be between 1 and 9 or equal to -1"),
                         ({"min.cleanable.dirty.ratio": "2"}, "Value must be no more than 1"),
                         ({"retention.ms": "abc"}, "Not a number of type LONG"),
                         ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled")]:
        with pytest.raises(KafkaException, match="INVALID_CONFIG") as e:
            a.create_topics([NewTopic("bad", 1, 1, config=config)])["bad"].result(10)
        assert says in str(e.value), (config, str(e.value))


def test_metadata_for_all_topics_lists_internal_ones(configured: ReferenceTarget) -> None:
    """Kafka's Metadata for all topics (metadataCache.getAllTopics) includes __consumer_offsets, is_internal true;
    clients leave it out of subscriptions themselves. (Before: internal topics were left out.)"""
    import asyncio

    from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

    from reference_broker.client.protocol import Connection

    async def ask() -> dict[str, bool]:
        host, port = configured.bootstrap.rsplit(":", 1)
        async with await Connection.connect(host, int(port)) as c:
            assert (await c.request(FindCoordinatorRequest(key="g", key_type=0), 3)).body.error_code == 0
            body = (await c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)).body
            return {t.name: t.is_internal for t in body.topics}
    assert asyncio.run(ask()).get("__consumer_offsets") is True
