"""The Kafka-aware toxic, seen from the client side: raw protocol (reference client) and confluent-kafka."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from chaos.proxy import ProxyServer
from fixtures.reference import ReferenceTarget
from reference_broker.client.protocol import Connection
from reference_broker.cluster import free_port

FETCH, METADATA, OFFSET_COMMIT = 1, 3, 8


class KafkaProxy:
    def __init__(self, server: ProxyServer, broker: ReferenceTarget, proxy) -> None:
        self.server, self.broker, self.proxy = server, broker, proxy
        self.bootstrap = proxy.listen

    def toxic(self, name: str):
        """The live toxic object (in-process server), for its hit counter and log."""
        return self.server.collection.proxies["kafka"].get_toxic(name).toxic


@pytest.fixture
def kafka_proxy(toxiproxy, proxy_server, tmp_path) -> Iterator[KafkaProxy]:
    listen, upstream = free_port(), free_port()
    proxy = toxiproxy.create(upstream=f"127.0.0.1:{upstream}", listen=f"127.0.0.1:{listen}", name="kafka")
    # The broker advertises the proxy (advertised.listeners), so clients never bypass it.
    broker = ReferenceTarget({"memory": "true", "port": str(upstream), "kafka.num.partitions": "1",
                              "kafka.group.initial.rebalance.delay.ms": "0",
                              "kafka.advertised.listeners": f"127.0.0.1:{listen}"}, work_dir=tmp_path)
    try:
        broker.start()
        yield KafkaProxy(proxy_server, broker, proxy)
    finally:
        broker.stop()


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), key=b"k")
    assert producer.flush(20) == 0


def _fetch(topic: str, version: int = 4) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        topics=[T(version=version, topic=topic,
                                  partitions=[T.FetchPartition(version=version, partition=0, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])])


async def test_error_answers_first_n_fetches_in_order(kafka_proxy):
    _produce(kafka_proxy.bootstrap, "raw", 3)
    kafka_proxy.proxy.add_toxic(name="nl", type="kafka", stream="upstream",
                                attributes={"api_key": FETCH, "action": "error", "error_code": 6, "count": 3})
    host, port = kafka_proxy.bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        # Pipelined, mixed with requests the broker answers: every answer arrives in request order.
        futs = [conn.submit(req, version=v) for req, v in (
            (MetadataRequest(version=1, topics=None), 1), (_fetch("raw"), 4), (MetadataRequest(version=1, topics=None), 1),
            (_fetch("raw"), 4), (_fetch("raw"), 4), (_fetch("raw"), 4))]
        answers = [await f for f in futs]
    assert [a.received_ns for a in answers] == sorted(a.received_ns for a in answers)
    errors = [a.body.responses[0].partitions[0].error_code for a in answers if a.api_key == FETCH]
    assert errors == [6, 6, 6, 0]  # the first three answered by the toxic, the fourth by the broker
    assert len(answers[-1].body.responses[0].partitions[0].records) > 0
    assert kafka_proxy.toxic("nl").hits == 3


async def test_delay_and_close_actions(kafka_proxy):
    host, port = kafka_proxy.bootstrap.rsplit(":", 1)
    kafka_proxy.proxy.add_toxic(name="slow", type="kafka", stream="upstream",
                                attributes={"api_key": METADATA, "action": "delay", "delay": 300})
    async with await Connection.connect(host, int(port)) as conn:
        answer = await conn.request(MetadataRequest(version=1, topics=None), version=1)
        assert answer.rtt_ns >= 290_000_000
    kafka_proxy.proxy.destroy_toxic("slow")
    kafka_proxy.proxy.add_toxic(name="cut", type="kafka", stream="upstream",
                                attributes={"api_key": METADATA, "action": "close"})
    async with await Connection.connect(host, int(port)) as conn:
        conn.submit(MetadataRequest(version=1, topics=None), version=1)
        assert await conn.wait_closed(timeout=5)


def test_confluent_consumer_refreshes_metadata_after_not_leader_and_continues(kafka_proxy):
    _produce(kafka_proxy.bootstrap, "nl", 10)
    kafka_proxy.proxy.add_toxic(name="nl", type="kafka", stream="upstream",
                                attributes={"api_key": FETCH, "error_code": 6, "count": 3})
    kafka_proxy.proxy.add_toxic(name="md", type="kafka", stream="upstream",  # counts Metadata requests
                                attributes={"api_key": METADATA, "action": "delay", "delay": 0})
    consumer = Consumer({"bootstrap.servers": kafka_proxy.bootstrap, "group.id": "g-nl",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 600_000})
    got = []
    try:
        consumer.assign([TopicPartition("nl", 0, 0)])
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(10)]
    nl, md = kafka_proxy.toxic("nl"), kafka_proxy.toxic("md")
    assert nl.hits == 3
    first_error = nl.acted[0][0]
    assert any(t > first_error for t, _, _ in md.acted), "no Metadata request after NOT_LEADER_OR_FOLLOWER"


def test_confluent_commit_times_out_when_offset_commit_dropped(kafka_proxy):
    _produce(kafka_proxy.bootstrap, "oc", 1)
    consumer = Consumer({"bootstrap.servers": kafka_proxy.bootstrap, "group.id": "g-oc",
                         "enable.auto.commit": False, "socket.timeout.ms": 2000})
    try:
        consumer.assign([TopicPartition("oc", 0, 0)])
        consumer.commit(offsets=[TopicPartition("oc", 0, 0)], asynchronous=False)  # coordinator found
        kafka_proxy.proxy.add_toxic(name="drop", type="kafka", stream="upstream",
                                    attributes={"api_key": OFFSET_COMMIT, "action": "drop"})
        t0 = time.monotonic()
        with pytest.raises(KafkaException) as info:
            consumer.commit(offsets=[TopicPartition("oc", 0, 1)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError._TIMED_OUT
        assert 1.5 <= time.monotonic() - t0 <= 15
        assert kafka_proxy.toxic("drop").hits >= 1
        kafka_proxy.proxy.destroy_toxic("drop")
        deadline = time.monotonic() + 15
        while True:  # the fault undone, commits work again
            try:
                consumer.commit(offsets=[TopicPartition("oc", 0, 1)], asynchronous=False)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
        assert consumer.committed([TopicPartition("oc", 0)], timeout=10)[0].offset == 1
    finally:
        consumer.close()
