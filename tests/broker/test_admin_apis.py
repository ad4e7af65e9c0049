"""The admin APIs behind Kafka's command-line tools (issue 27), on a reference broker process: IncrementalAlterConfigs
/ AlterConfigs change what the broker enforces and what DescribeConfigs shows, and the change survives a restart
(it is a record in the metadata log); CreatePartitions adds partitions a producer can write to at once;
DescribeLogDirs sizes them; DescribeCluster lists the broker. Each of these failed before (the APIs were not
served: UNSUPPORTED_VERSION / no ApiVersions entry)."""
from __future__ import annotations

import asyncio

from kafka import errors as E
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)

from fixtures.reference import ReferenceTarget

from ._wire import batch, connect, create_topic, produce

IR = IncrementalAlterConfigsRequest
DR = DescribeConfigsRequest
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 5


def _resource(rtype: int, name: str, changes: list[tuple[str, int, str | None]]):
    return IR.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
        IR.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes])


async def _alter(c, rtype: int, name: str, changes, validate_only: bool = False) -> tuple[int, str | None]:
    r = await c.request(IR(resources=[_resource(rtype, name, changes)], validate_only=validate_only), 1)
    (x,) = r.body.responses
    return x.error_code, x.error_message


async def _describe(c, rtype: int, name: str, keys: list[str]) -> dict[str, tuple[str | None, int, list]]:
    r = await c.request(DR(resources=[DR.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                                 configuration_keys=keys)],
                           include_synonyms=True, include_documentation=False), 4)
    (res,) = r.body.results
    assert res.error_code == 0, res
    return {e.name: (e.value, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
            for e in res.configs}


def test_topic_config_change_is_described_enforced_and_survives_a_restart(durable_broker: ReferenceTarget) -> None:
    big = batch([b"x" * 600])

    async def before_restart() -> None:
        c = await connect(durable_broker)
        await create_topic(c, "alter-me")
        assert (await _alter(c, TOPIC, "alter-me", [("max.message.bytes", SET, "300")], True)) == (0, None)
        assert (await _describe(c, TOPIC, "alter-me", ["max.message.bytes"]))["max.message.bytes"][:2] == (
            "1048588", DEFAULT_CONFIG), "validate_only changed the config"
        assert (await _alter(c, TOPIC, "alter-me", [("max.message.bytes", SET, "300"),
                                                   ("cleanup.policy", APPEND, "compact")])) == (0, None)
        got = await _describe(c, TOPIC, "alter-me", ["max.message.bytes", "cleanup.policy"])
        assert got["max.message.bytes"] == ("300", DYNAMIC_TOPIC_CONFIG, [
            ("max.message.bytes", "300", DYNAMIC_TOPIC_CONFIG), ("message.max.bytes", "1048588", DEFAULT_CONFIG)])
        assert got["cleanup.policy"][:2] == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
        assert (await produce(c, "alter-me", big)).error_code == E.MessageSizeTooLargeError.errno
        err, msg = await _alter(c, TOPIC, "alter-me", [("retention.ms", APPEND, "5")])
        assert (err, msg) == (E.InvalidConfigurationError.errno,
                              "Can't APPEND to key retention.ms because its type is not LIST.")
        await c.close()

    async def after_restart() -> None:
        c = await connect(durable_broker)
        got = await _describe(c, TOPIC, "alter-me", ["max.message.bytes"])
        assert got["max.message.bytes"][:2] == ("300", DYNAMIC_TOPIC_CONFIG), "the change did not survive a restart"
        assert (await produce(c, "alter-me", big)).error_code == E.MessageSizeTooLargeError.errno
        assert (await _alter(c, TOPIC, "alter-me", [("max.message.bytes", DELETE, None)])) == (0, None)
        assert (await produce(c, "alter-me", big)).error_code == 0
        await c.close()

    asyncio.run(before_restart())
    durable_broker.restart()
    asyncio.run(after_restart())


def test_dynamic_broker_configs_change_what_the_broker_enforces(broker: ReferenceTarget) -> None:
    async def body() -> None:
        c = await connect(broker)
        await create_topic(c, "dyn")
        node = str(broker.broker_ids[0])
        big = batch([b"y" * 600])
        assert (await _alter(c, BROKER, "", [("message.max.bytes", SET, "300")])) == (0, None)
        assert (await produce(c, "dyn", big)).error_code == E.MessageSizeTooLargeError.errno
        got = await _describe(c, TOPIC, "dyn", ["max.message.bytes", "min.insync.replicas"])
        assert got["max.message.bytes"][:2] == ("300", DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert got["min.insync.replicas"][:2] == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)
        # retention.ms: alone, the topic default without synonyms; below a cluster value, log.retention.hours too
        assert (await _describe(c, TOPIC, "dyn", ["retention.ms"]))["retention.ms"] == ("604800000", DEFAULT_CONFIG,
                                                                                      [])
        assert (await _alter(c, BROKER, "", [("log.retention.ms", SET, "600000")])) == (0, None)
        assert (await _describe(c, TOPIC, "dyn", ["retention.ms"]))["retention.ms"] == (
            "600000", DYNAMIC_DEFAULT_BROKER_CONFIG, [("log.retention.ms", "600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
                                                      ("log.retention.hours", "168", DEFAULT_CONFIG)])
        assert (await _alter(c, BROKER, node, [("message.max.bytes", SET, "5000")])) == (0, None)
        assert (await produce(c, "dyn", big)).error_code == 0
        got = await _describe(c, BROKER, node, ["message.max.bytes"])
        assert got["message.max.bytes"] == ("5000", DYNAMIC_BROKER_CONFIG, [
            ("message.max.bytes", "5000", DYNAMIC_BROKER_CONFIG),
            ("message.max.bytes", "300", DYNAMIC_DEFAULT_BROKER_CONFIG),
            ("message.max.bytes", "1048588", DEFAULT_CONFIG)])
        assert await _alter(c, BROKER, node, [("num.partitions", SET, "3")]) == (
            E.InvalidRequestError.errno, "Cannot update these configs dynamically: [num.partitions]")
        assert await _alter(c, BROKER, node, [("min.insync.replicas", SET, "2")]) == (
            E.InvalidConfigurationError.errno, "Broker-level min.insync.replicas cannot be altered while ELR is "
                                               "enabled.")
        assert await _alter(c, BROKER, str(int(node) + 1), [("message.max.bytes", SET, "1")]) == (
            E.InvalidRequestError.errno, f"Unexpected broker id, expected {node}, but received {int(node) + 1}")
        # AlterConfigs replaces the whole set: the per-broker override goes, the cluster default stays
        A = AlterConfigsRequest
        r = await c.request(A(resources=[A.AlterConfigsResource(resource_type=BROKER, resource_name=node, configs=[])],
                              validate_only=False), 2)
        assert r.body.responses[0].error_code == 0, r.body
        assert (await _describe(c, BROKER, node, ["message.max.bytes"]))["message.max.bytes"][:2] == (
            "300", DYNAMIC_DEFAULT_BROKER_CONFIG)
        await c.close()

    asyncio.run(body())


def test_create_partitions_log_dirs_and_cluster(broker: ReferenceTarget) -> None:
    CP = CreatePartitionsRequest
    DL = DescribeLogDirsRequest

    async def body() -> None:
        c = await connect(broker)
        await create_topic(c, "grow")
        r = await c.request(CP(topics=[CP.CreatePartitionsTopic(name="grow", count=1, assignments=None)],
                               timeout_ms=5000, validate_only=False), 3)
        assert (r.body.results[0].error_code, r.body.results[0].error_message) == (
            E.InvalidPartitionsError.errno, "Topic already has 1 partition(s).")
        r = await c.request(CP(topics=[CP.CreatePartitionsTopic(name="grow", count=3, assignments=None)],
                               timeout_ms=5000, validate_only=False), 3)
        assert r.body.results[0].error_code == 0, r.body
        data = batch([b"z" * 100, b"z" * 100])
        assert (await produce(c, "grow", data, partition=2)).error_code == 0
        r = await c.request(DL(topics=[DL.DescribableLogDirTopic(topic="grow", partitions=[0, 1, 2, 7])]), 4)
        (res,) = r.body.results
        (t,) = res.topics
        sizes = {p.partition_index: (p.partition_size, p.offset_lag) for p in t.partitions}
        assert sizes == {0: (0, 0), 1: (0, 0), 2: (len(data), 0)}, sizes
        assert res.total_bytes == -1 and res.log_dir == "memory"
        r = await c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1,
                                                   include_fenced_brokers=False), 1)
        assert r.body.error_code == 0 and [b.port for b in r.body.brokers] == [broker.port], r.body
        # kafka-python decodes cluster_authorized_operations as the set of operation codes, INT32_MIN as None
        assert r.body.authorized_operations is None, "not asked: the schema default (INT32_MIN)"
        # asked, with no authorizer: every CLUSTER operation (AuthHelper.computeDescribeClusterResponse), CREATE,
        # ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, as Kafka 4.4.0 answered
        # in the differential mode (before: INT32_MIN, the flag ignored)
        r = await c.request(DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1,
                                                   include_fenced_brokers=False), 1)
        assert r.body.authorized_operations == {5, 7, 8, 9, 10, 11, 12}, r.body
        await c.close()

    asyncio.run(body())
