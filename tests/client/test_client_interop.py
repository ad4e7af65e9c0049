"""Interop with independent clients: what our producer writes, kafka-python and librdkafka read exactly;
what librdkafka (confluent-kafka) writes, our consumer reads exactly. Keys, values, headers, compression."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kct_client_helpers import raw_batches, run

from reference_broker.client.consumer import Consumer
from reference_broker.client.producer import Producer, partition_for_key
from reference_broker.client.types import TopicPartition

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def records(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """Varied records: null key/value, empty value, binary, large, several headers (one repeated)."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % i
        if i % 11 == 5:
            value = None
        elif i % 13 == 6:
            value = b""
        else:
            value = bytes(range(256))[: (i * 37) % 256] + b"value-%d" % i * (1 + i % 5)
        headers = [] if i % 4 == 0 else [("h1", b"a%d" % i), ("h2", b"\x00\xff"), ("h1", b"again")][: 1 + i % 3]
        out.append((key, value, headers))
    return out


async def produce_ours(bootstrap: str, topic: str, recs, codec: str | None) -> list[int]:
    async with Producer(bootstrap, linger_ms=20, compression_type=codec) as p:
        futs = [await p.send(topic, v, key=k, headers=h, partition=0, timestamp_ms=1_700_000_000_000 + i)
                for i, (k, v, h) in enumerate(recs)]
        return [m.offset for m in await asyncio.gather(*futs)]


def _norm_headers(h) -> list[tuple[str, bytes]]:
    return [(k, bytes(v) if v is not None else None) for k, v in (h or [])]


@pytest.mark.parametrize("codec", CODECS)
def test_ours_to_kafka_python(broker_bootstrap: str, new_topic, codec) -> None:
    topic = new_topic(1)
    recs = records(40)
    offsets = run(produce_ours(broker_bootstrap, topic, recs, codec))
    assert offsets == list(range(40))

    consumer = KafkaConsumer(
        bootstrap_servers=broker_bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
        group_id=None, consumer_timeout_ms=5000,
    )
    try:
        tp = KPTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 15
        while len(got) < len(recs) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
    finally:
        consumer.close()
    assert [r.offset for r in got] == list(range(40))
    assert [(r.key, r.value, _norm_headers(r.headers)) for r in got] == recs
    assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(40)]


@pytest.mark.parametrize("codec", CODECS)
def test_ours_to_confluent(broker_bootstrap: str, new_topic, codec) -> None:
    topic = new_topic(1)
    recs = records(40)
    run(produce_ours(broker_bootstrap, topic, recs, codec))

    c = CKConsumer({"bootstrap.servers": broker_bootstrap, "group.id": "kct-interop", "enable.auto.commit": False,
                    "broker.address.family": "v4"})
    try:
        c.assign([CKTopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < len(recs) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
    finally:
        c.close()
    assert [m.offset() for m in got] == list(range(40))
    assert [(m.key(), m.value(), _norm_headers(m.headers())) for m in got] == recs


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_to_ours(broker_bootstrap: str, new_topic, codec) -> None:
    topic = new_topic(1)
    recs = records(40)
    conf = {"bootstrap.servers": broker_bootstrap, "linger.ms": 20, "broker.address.family": "v4"}
    if codec:
        conf["compression.type"] = codec
    p = CKProducer(conf)
    errors = []
    for i, (k, v, h) in enumerate(recs):
        p.produce(topic, value=v, key=k, headers=h or None, partition=0, timestamp=1_700_000_000_000 + i,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(15) == 0
    assert errors == []

    async def consume():
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            out = []
            for _ in range(40):
                out += (await c.poll(500)).get(tp, [])
                if len(out) >= len(recs):
                    break
            return out

    got = run(consume())
    batches = run(raw_batches(broker_bootstrap, TopicPartition(topic, 0)))
    # librdkafka really compressed; a batch whose compressed form came out larger (a lone record, when linger ended a
    # batch early under load) it sends uncompressed (rd_kafka_msgset_writer_compress), so 0 may appear beside it
    types = {b.compression_type for b in batches}
    assert CODEC_IDS[codec] in types and types <= {0, CODEC_IDS[codec]}, types
    assert [r.offset for r in got] == list(range(40))
    assert [(r.key, r.value, r.headers) for r in got] == recs
    assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(40)]


def test_confluent_murmur2_partitioner_agrees(broker_bootstrap: str, new_topic) -> None:
    """librdkafka's murmur2 partitioner (the Java-compatible one) places keys where ours computes."""
    n = 6
    topic = new_topic(n)
    keys = [b"user-%d" % i for i in range(60)]
    placed: dict[bytes, int] = {}
    p = CKProducer({"bootstrap.servers": broker_bootstrap, "partitioner": "murmur2", "broker.address.family": "v4"})
    for k in keys:
        p.produce(topic, value=b"v", key=k, on_delivery=lambda err, msg: placed.__setitem__(msg.key(), msg.partition()))
    assert p.flush(15) == 0
    assert set(placed) == set(keys)
    assert all(placed[k] == partition_for_key(k, n) for k in keys)
    assert len(set(placed.values())) > 1
