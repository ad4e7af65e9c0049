"""Partitioner: murmur2 must match the Java client bit for bit, or keyed records land elsewhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from kct_client_helpers import run

from reference_broker.client.consumer import Consumer
from reference_broker.client.producer import Producer, murmur2, partition_for_key, to_positive
from reference_broker.client.types import TopicPartition

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (Apache Kafka clients module)
JAVA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# kafka-python test/test_partitioner.py::test_murmur2_java_compatibility — partitions out of 1000, "compare
# with output from Kafka's org.apache.kafka.clients.producer.Partitioner"
JAVA_PARTITION_VECTORS_1000 = [(b"", 681), (b"a", 524), (b"ab", 434), (b"abc", 107), (b"123456789", 566), (b"\x00 ", 742)]


@pytest.mark.parametrize("data,expected", JAVA_MURMUR2_VECTORS)
def test_murmur2_matches_java_utils(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize("key,expected", JAVA_PARTITION_VECTORS_1000)
def test_partition_for_key_matches_java_partitioner(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


def test_to_positive_is_sign_bit_mask_not_abs() -> None:
    # Java: toPositive(Integer.MIN_VALUE) == 0, whereas Math.abs(MIN_VALUE) stays negative
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    # kafka-python returns the unsigned-ish int; compare as 32-bit patterns
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data) & 0xFFFFFFFF
    assert -(2**31) <= murmur2(data) < 2**31


def test_producer_places_keyed_records_by_murmur2(broker_bootstrap: str, new_topic) -> None:
    n = 5
    topic = new_topic(n)
    keys = [f"key-{i}".encode() for i in range(40)]

    async def go():
        async with Producer(broker_bootstrap, linger_ms=5) as p:
            futs = [await p.send(topic, b"v-" + k, key=k) for k in keys]
            await p.flush()
            metas = [f.result() for f in futs]
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([TopicPartition(topic, i) for i in range(n)])
            seen = {}
            while len(seen) < len(keys):
                got = await c.poll(2000)
                if not got:
                    break
                for tp, recs in got.items():
                    for r in recs:
                        seen[r.key] = tp.partition
        return metas, seen

    metas, seen = run(go())
    for k, md in zip(keys, metas, strict=True):
        assert md.partition == partition_for_key(k, n)
        assert seen[k] == md.partition
    assert len(set(seen.values())) > 1  # keys really spread
