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
    assert (got["min.insync.replicas"].value, got["min.insync.replicas"].source) == ("1", DEFAULT_CONFIG)
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
