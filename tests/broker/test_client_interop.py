"""Real clients against the reference broker: kafka-python, confluent-kafka (librdkafka) and kcat.

Each creates a topic, produces 10,000 records with keys and headers (every compression codec librdkafka offers),
the broker is restarted in between (durable log), and every record is read back exactly, in offset order per
partition, by the same client.
"""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest

N = 10_000
PARTITIONS = 3


def _check_exact(produced: dict[int, list[tuple]], consumed: dict[int, list[tuple]]) -> None:
    """Every partition holds exactly the produced records, offsets contiguous from 0, in send order."""
    assert sorted(consumed) == sorted(p for p in produced if produced[p]), "partitions differ"
    for p, recs in produced.items():
        got = consumed.get(p, [])
        assert len(got) == len(recs), f"partition {p}: produced {len(recs)}, consumed {len(got)}"
        assert [r[0] for r in got] == list(range(len(got))), f"partition {p}: offsets not contiguous from 0"
        assert got == sorted(recs), f"partition {p}: records differ"


def test_kafka_python_roundtrip_survives_restart(durable_broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    bs = durable_broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("kp", PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bs, acks="all", compression_type="gzip", linger_ms=5)
    futures = []
    for i in range(N):
        key, value, headers = f"k{i % 97}".encode(), f"value-{i}".encode(), [("seq", str(i).encode())]
        futures.append((producer.send("kp", key=key, value=value, headers=headers), key, value, headers))
    producer.flush()
    produced: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for fut, key, value, headers in futures:
        md = fut.get(timeout=30)
        produced[md.partition].append((md.offset, key, value, tuple(headers)))
    producer.close()

    durable_broker.restart()

    consumer = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("kp", p) for p in range(PARTITIONS)])
    consumed: dict[int, list[tuple]] = {}
    for m in consumer:
        consumed.setdefault(m.partition, []).append((m.offset, m.key, m.value, tuple(m.headers)))
        if sum(map(len, consumed.values())) == N:
            break
    consumer.close()
    _check_exact(produced, consumed)


def test_confluent_kafka_all_codecs_survive_restart(durable_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = durable_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("ck", PARTITIONS, 1)]).values():
        f.result(10)
    produced: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    errors = []

    def delivered(headers):
        # librdkafka's delivery report does not carry headers back: remember what was sent
        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                produced[msg.partition()].append((msg.offset(), msg.key(), msg.value(), headers))
        return on_delivery

    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for c, codec in enumerate(codecs):
        producer = Producer({"bootstrap.servers": bs, "acks": "all", "compression.type": codec,
                             "enable.idempotence": True, "linger.ms": 5})
        for i in range(c * N // len(codecs), (c + 1) * N // len(codecs)):
            headers = (("codec", codec.encode()), ("seq", str(i).encode()))
            producer.produce("ck", key=f"k{i % 89}".encode(), value=f"{codec}-{i}".encode() * 3,
                             headers=list(headers), on_delivery=delivered(headers))
            producer.poll(0)
        assert producer.flush(30) == 0
    assert not errors
    assert sum(map(len, produced.values())) == N

    durable_broker.restart()

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "interop", "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck", p, 0) for p in range(PARTITIONS)])
    consumed: dict[int, list[tuple]] = {}
    deadline = time.monotonic() + 60
    n = 0
    while n < N and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            assert m.error() is None, m.error()
            consumed.setdefault(m.partition(), []).append((m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
            n += 1
    consumer.close()
    _check_exact(produced, consumed)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (./run installs Debian kcat)")
def test_kcat_roundtrip_survives_restart(durable_broker):
    bs = durable_broker.bootstrap
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})   # keep a reference: a destroyed handle fails its futures
    for f in admin.create_topics([NewTopic("kc", PARTITIONS, 1)]).values():
        f.result(10)
    lines = "".join(f"key{i % 50}:value-{i}\n" for i in range(N))
    subprocess.run(["kcat", "-b", bs, "-P", "-t", "kc", "-K:", "-H", "origin=kcat", "-X", "acks=all",
                    "-z", "lz4"], input=lines.encode(), check=True, timeout=60)

    durable_broker.restart()

    out = subprocess.run(["kcat", "-b", bs, "-C", "-t", "kc", "-e", "-q", "-f", "%p|%o|%k|%s|%h\n"],
                         capture_output=True, check=True, timeout=60).stdout.decode().splitlines()
    assert len(out) == N
    consumed: dict[int, list[tuple]] = {}
    for line in out:
        p, o, k, v, h = line.split("|")
        assert h == "origin=kcat"
        consumed.setdefault(int(p), []).append((int(o), k, v))
    seen = []
    for p, recs in consumed.items():
        # kcat prints partitions interleaved; per partition, offsets are in order and contiguous from 0
        assert [r[0] for r in recs] == list(range(len(recs))), f"partition {p} offsets"
        # keyed records: the producer's sticky partitioner keeps send order within a partition
        values = [int(r[2].split("-")[1]) for r in recs]
        assert values == sorted(values), f"partition {p} out of send order"
        seen.extend(values)
        for _, k, v in recs:
            assert k == f"key{int(v.split('-')[1]) % 50}"
    assert sorted(seen) == list(range(N))
