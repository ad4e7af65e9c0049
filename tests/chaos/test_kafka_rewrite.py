"""The response-rewriting Kafka toxic, seen from the client side: a real broker behind the proxy, the reference
protocol client and confluent-kafka in front, and the API's 400s for attributes that cannot apply."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from chaos.proxy import ProxyServer
from chaos.proxy.frames import RequestTap
from chaos.proxy.toxics.kafka_rewrite import drop_last_batches
from fixtures.reference import ReferenceTarget
from reference_broker.client.protocol import Connection
from reference_broker.cluster import free_port

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3


class KafkaProxy:
    def __init__(self, server: ProxyServer, broker: ReferenceTarget, proxy) -> None:
        self.server, self.broker, self.proxy = server, broker, proxy
        self.bootstrap = proxy.listen
        self.host, port = proxy.listen.rsplit(":", 1)
        self.port = int(port)

    def toxic(self, name: str):
        """The live toxic object (in-process server), for its hit counter and log."""
        return self.server.collection.proxies["kafka"].get_toxic(name).toxic

    def add(self, name: str, **attributes) -> None:
        self.proxy.add_toxic(name=name, type="kafka_rewrite", stream="downstream", attributes=attributes)


@pytest.fixture
def kafka_proxy(toxiproxy, proxy_server, tmp_path) -> Iterator[KafkaProxy]:
    listen, upstream = free_port(), free_port()
    proxy = toxiproxy.create(upstream=f"127.0.0.1:{upstream}", listen=f"127.0.0.1:{listen}", name="kafka")
    broker = ReferenceTarget({"memory": "true", "port": str(upstream), "kafka.num.partitions": "1",
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
        producer.flush(20)  # one batch per record, so dropping a batch drops a record
    assert producer.flush(20) == 0


def _fetch(topic: str, version: int = 4) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        topics=[T(version=version, topic=topic,
                                  partitions=[T.FetchPartition(version=version, partition=0, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])])


def _latest(topic: str, version: int = 1) -> ListOffsetsRequest:
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(version=version, replica_id=-1, topics=[T(version=version, name=topic, partitions=[
        T.ListOffsetsPartition(version=version, partition_index=0, timestamp=-1)])])


async def test_rewrites_fields_of_one_key_in_order_and_leaves_the_rest(kafka_proxy):
    _produce(kafka_proxy.bootstrap, "rw", 3)
    kafka_proxy.add("hw", api_key=FETCH, field="high_watermark", op="add", value=5)
    kafka_proxy.add("lo", api_key=LIST_OFFSETS, field="offset", op="add", value=-1, count=1)
    async with await Connection.connect(kafka_proxy.host, kafka_proxy.port) as conn:
        # Pipelined on one connection, several keys and versions (v12 flexible: a tagged response header).
        futs = [conn.submit(req, version=v) for req, v in (
            (MetadataRequest(version=1, topics=None), 1), (_fetch("rw", 4), 4), (_latest("rw"), 1),
            (_fetch("rw", 12), 12), (_latest("rw"), 1))]
        answers = [await f for f in futs]
    fetches = [a.body.responses[0].partitions[0] for a in answers if a.api_key == FETCH]
    assert [p.high_watermark for p in fetches] == [8, 8]  # 3 + 5, the records untouched
    assert all(len(p.records) > 0 and p.error_code == 0 for p in fetches)
    offsets = [a.body.topics[0].partitions[0].offset for a in answers if a.api_key == LIST_OFFSETS]
    assert offsets == [2, 3]  # the first one rewritten (count=1), the second as the broker said
    assert answers[0].body.brokers[0].port == kafka_proxy.port
    assert kafka_proxy.toxic("hw").hits == 2 and kafka_proxy.toxic("lo").hits == 1


async def test_set_with_match_and_partition_filter_and_drop_batches(kafka_proxy):
    _produce(kafka_proxy.bootstrap, "rb", 3)
    kafka_proxy.add("only-p1", api_key=FETCH, field="error_code", op="set", value=6, partition=1)
    kafka_proxy.add("match", api_key=FETCH, field="log_start_offset", op="set", value=-7, match=99)
    kafka_proxy.add("cut", api_key=FETCH, field="records", op="drop_batches", value=1)
    async with await Connection.connect(kafka_proxy.host, kafka_proxy.port) as conn:
        full = (await conn.request(_fetch("rb", 5), version=5)).body.responses[0].partitions[0]
    assert full.error_code == 0, "partition filter: only partition 1 would get the error"
    assert full.log_start_offset == 0, "match: only a log start of 99 would be rewritten"
    assert len(full.records) > 0
    assert kafka_proxy.toxic("only-p1").hits == 0 and kafka_proxy.toxic("match").hits == 0
    assert kafka_proxy.toxic("cut").hits == 1
    kafka_proxy.proxy.destroy_toxic("cut")
    async with await Connection.connect(kafka_proxy.host, kafka_proxy.port) as conn:
        whole = (await conn.request(_fetch("rb", 5), version=5)).body.responses[0].partitions[0]
    assert bytes(full.records) == drop_last_batches(bytes(whole.records), 1)
    assert len(drop_last_batches(bytes(whole.records), 1)) < len(whole.records)
    assert drop_last_batches(bytes(whole.records), 10) == b""


async def test_added_to_a_live_connection_then_removed(kafka_proxy):
    """Toxics apply to live connections: the next answer after adding is rewritten, the next after removing not."""
    _produce(kafka_proxy.bootstrap, "live", 2)
    async with await Connection.connect(kafka_proxy.host, kafka_proxy.port) as conn:
        before = await conn.request(_latest("live"), version=1)
        kafka_proxy.add("lo", api_key=LIST_OFFSETS, field="offset", op="set", value=42)
        during = await conn.request(_latest("live"), version=1)
        kafka_proxy.proxy.destroy_toxic("lo")
        after = await conn.request(_latest("live"), version=1)
    assert [a.body.topics[0].partitions[0].offset for a in (before, during, after)] == [2, 42, 2]


def test_confluent_consumer_misses_the_dropped_batch(kafka_proxy):
    """A real client believes the mutant: with the last batch dropped it never sees the last record."""
    _produce(kafka_proxy.bootstrap, "cd", 3)
    kafka_proxy.add("cut", api_key=FETCH, field="records", op="drop_batches", value=1, count=1)
    consumer = Consumer({"bootstrap.servers": kafka_proxy.bootstrap, "group.id": "g-cd",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    got = []
    try:
        consumer.assign([TopicPartition("cd", 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < 2:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        # The next fetch (from offset 2) is answered truthfully: the record was hidden, not lost.
        while time.monotonic() < deadline and len(got) < 3:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == [b"v0", b"v1", b"v2"]
    assert kafka_proxy.toxic("cut").hits == 1


@pytest.mark.parametrize(("attributes", "says"), [
    ({"api_key": FETCH, "field": "no_such_field", "op": "set", "value": 1}, "not in FetchResponse"),
    ({"api_key": 9999, "field": "error_code", "op": "set", "value": 1}, "not a Kafka API key"),
    ({"api_key": FETCH, "field": "high_watermark", "op": "add", "value": "x"}, "op add needs"),
    ({"api_key": FETCH, "field": "error_code", "op": "set", "value": 70000}, "must be an int16"),
    ({"api_key": FETCH, "field": "error_code", "op": "explode", "value": 1}, "op must be one of"),
    ({"api_key": FETCH, "field": "high_watermark", "op": "drop_batches", "value": 1}, "needs a records field"),
    ({"api_key": FETCH, "field": "responses", "op": "set", "value": 1}, "only integer, string"),
    ({"api_key": FETCH, "field": "records", "op": "set", "value": "x"}, "use op drop_batches"),
    ({"api_key": FETCH, "field": "error_code", "op": "set", "value": 1, "bogus": 2}, 'unknown field "bogus"'),
])
def test_bad_attributes_are_400_with_the_reason(proxy_server, toxiproxy, attributes, says):
    toxiproxy.create(upstream="127.0.0.1:9", listen="127.0.0.1:0", name="bad")
    r = requests.post(f"{proxy_server.url}/proxies/bad/toxics", json={
        "type": "kafka_rewrite", "stream": "downstream", "attributes": attributes}, timeout=5)
    assert r.status_code == 400, r.text
    assert says in r.json()["error"], r.json()


def test_upstream_stream_is_refused(proxy_server, toxiproxy):
    toxiproxy.create(upstream="127.0.0.1:9", listen="127.0.0.1:0", name="up")
    r = requests.post(f"{proxy_server.url}/proxies/up/toxics", json={
        "type": "kafka_rewrite", "stream": "upstream",
        "attributes": {"api_key": FETCH, "field": "error_code", "op": "set", "value": 6}}, timeout=5)
    assert r.status_code == 400 and "use stream downstream" in r.json()["error"]
    r = requests.post(f"{proxy_server.url}/proxies/up/toxics", json={
        "type": "kafka_rewrite", "attributes": {"api_key": FETCH, "field": "error_code", "op": "set", "value": 6}},
        timeout=5)
    assert r.status_code == 200 and r.json()["stream"] == "downstream", "downstream is its default"


def test_request_tap_reads_headers_split_anywhere():
    frames = b"".join((8 + 3).to_bytes(4, "big") + k.to_bytes(2, "big") + v.to_bytes(2, "big") +
                      c.to_bytes(4, "big") + b"xyz" for k, v, c in ((1, 12, 7), (3, 1, 8), (2, 5, 9)))
    for step in (1, 2, 3, 5, 7, len(frames)):
        tap = RequestTap()
        for i in range(0, len(frames), step):
            tap.feed(frames[i:i + step])
        assert tap.pending == {7: (1, 12), 8: (3, 1), 9: (2, 5)}, step
        assert tap.lookup(8) == (3, 1) and tap.lookup(10) is None
