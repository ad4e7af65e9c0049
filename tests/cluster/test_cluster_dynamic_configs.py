"""A topic's min.insync.replicas changed by IncrementalAlterConfigs counts at once on the leader (Kafka:
LogManager.updateTopicConfig on the ConfigRecord), not only after the partition's next leader or ISR change.

Failed before: the leader read min.insync.replicas only when a partition change reached it, so with the ISR
already shrunk to the leader alone, raising min.insync.replicas to 2 left acks=all produce succeeding.
"""
from __future__ import annotations

import asyncio

from kafka import errors as E
from kafka.protocol.admin import IncrementalAlterConfigsRequest as IR
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kct_cluster_helpers import create_topic, partition_state, wait_for

from reference_broker.client.protocol import Connection

TOPIC = "dyn-min-isr"


def _batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    b.append(0, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
    return bytes(b.build())


async def _produce(c: Connection) -> int:
    T = ProduceRequest.TopicProduceData
    r = await c.request(ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=2000, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=_batch())])]), timeout=30)
    return r.body.responses[0].partition_responses[0].error_code


async def _set_min_isr(c: Connection, value: str) -> int:
    R = IR.AlterConfigsResource
    r = await c.request(IR(resources=[R(resource_type=2, resource_name=TOPIC, configs=[
        R.AlterableConfig(name="min.insync.replicas", config_operation=0, value=value)])], validate_only=False), 1)
    return r.body.responses[0].error_code


def test_min_insync_replicas_altered_counts_without_a_partition_change(make_cluster) -> None:
    cluster = make_cluster(memory=True)
    create_topic(cluster.bootstrap, TOPIC, 1, 2)
    leader, replicas, _ = partition_state(cluster.bootstrap, TOPIC)
    follower = next(r for r in replicas if r != leader)
    alone = f"127.0.0.1:{cluster.ports[leader]}"
    cluster.kill(follower)
    wait_for(lambda: partition_state(alone, TOPIC), lambda s: s[2] == [leader], 60, f"the ISR shrunk to {leader}")

    async def body() -> tuple[int, int, int]:
        c = await Connection.connect("127.0.0.1", cluster.ports[leader])
        try:
            await c.api_versions()
            before = await _produce(c)
            altered = await _set_min_isr(c, "2")       # answered once the live brokers applied the record
            return before, altered, await _produce(c)
        finally:
            await c.close()

    before, altered, after = asyncio.run(body())
    assert (before, altered) == (0, 0), (before, altered)
    assert after == E.NotEnoughReplicasError.errno, (
        f"acks=all produce with ISR [{leader}] after min.insync.replicas=2 answered {after}; Kafka: "
        f"NOT_ENOUGH_REPLICAS")
