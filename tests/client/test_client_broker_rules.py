"""Kafka broker rules observed through the reference client.

These are about the BROKER, not the client: each states an Apache Kafka rule and checks the broker under
test with the client stack. Where Tansu is known to differ, the test is a strict xfail on Tansu (so a fixed
Tansu shows up as XPASS) and the reason records what Tansu does instead. They are seeds for the conformance
suite; the client tests elsewhere avoid depending on these quirks.
"""

from __future__ import annotations

import asyncio

import kafka.errors as Errors
from kafka.protocol.consumer import ListOffsetsRequest
from kct_client_helpers import run

from reference_broker.client.admin import EARLIEST, LATEST, MAX_TIMESTAMP, Admin
from reference_broker.client.cluster import Cluster
from reference_broker.client.consumer import Consumer
from reference_broker.client.producer import Producer
from reference_broker.client.protocol import ConnectionClosedError, Response
from reference_broker.client.types import TopicPartition


async def fetch_once(
    bootstrap: str, tp: TopicPartition, offset: int, max_wait_ms: int = 0, partition_max_bytes: int = 1 << 20
) -> Response:
    async with Cluster(bootstrap) as cluster:
        await cluster.refresh_metadata([tp.topic])
        c = Consumer(cluster, fetch_max_wait_ms=max_wait_ms, max_partition_fetch_bytes=partition_max_bytes)
        c.assign([tp])
        c.seek(tp, offset)
        conn = await cluster.connection(cluster.leader_for(tp))
        v = conn.versions[1]
        return await conn.request(c.build_fetch_request(v, [tp]), v)


async def produce_batches(bootstrap: str, topic: str, sizes: list[int], timestamps: list[int] | None = None) -> None:
    """One record batch per entry of ``sizes`` (that many records each), explicit create timestamps."""
    ts = iter(timestamps or [])
    async with Producer(bootstrap, linger_ms=1000, batch_size=1 << 20) as p:
        for n in sizes:
            futs = [await p.send(topic, b"x" * 20, partition=0, timestamp_ms=next(ts, None)) for _ in range(n)]
            await p.flush()
            await asyncio.gather(*futs)


def test_fetch_beyond_log_end_is_offset_out_of_range(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: fetch offset > log end offset -> OFFSET_OUT_OF_RANGE (Log.read / ReplicaManager.readFromLog)."""
    known_quirk("tansu", "answers error 0 with no records (and parks for max_wait) for offset > LEO")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    run(produce_batches(broker_bootstrap, topic, [3]))
    resp = run(fetch_once(broker_bootstrap, tp, 100, max_wait_ms=100))
    part = resp.body.responses[0].partitions[0]
    assert part.error_code == Errors.OffsetOutOfRangeError.errno


def test_fetch_with_zero_wait_returns_available_data(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: max_wait_ms=0 answers at once with what is there: the partition, its HW and its records."""
    known_quirk("tansu", "max_wait_ms=0 answers responses=[] (no partition entry, no records) even with data")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    run(produce_batches(broker_bootstrap, topic, [2]))
    resp = run(fetch_once(broker_bootstrap, tp, 0, max_wait_ms=0))
    assert len(resp.body.responses) == 1
    part = resp.body.responses[0].partitions[0]
    assert part.partition_index == 0 and part.error_code == 0 and part.high_watermark == 2
    assert part.records


def test_fetch_with_zero_wait_lists_an_empty_partition(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: an immediate answer on an empty partition still lists it (error 0, HW 0, no records)."""
    known_quirk("tansu", "max_wait_ms=0 answers responses=[] (no partition entry)")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    resp = run(fetch_once(broker_bootstrap, tp, 0, max_wait_ms=0))
    assert len(resp.body.responses) == 1
    part = resp.body.responses[0].partitions[0]
    assert part.partition_index == 0 and part.error_code == 0 and part.high_watermark == 0


def test_list_offsets_latest_is_log_end_after_multi_record_batch(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: ListOffsets LATEST = high watermark = last offset + 1, whatever the batching."""
    known_quirk("tansu", "LATEST = base offset of the last batch + 1 (7 records in one batch -> 1, not 7)")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce_batches(broker_bootstrap, topic, [7])
        async with Admin(broker_bootstrap) as a:
            return await a.latest_offsets([tp])

    assert run(go())[tp] == 7


def test_list_offsets_earliest_latest_timestamp_is_minus_one(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka (v1+): EARLIEST/LATEST answers carry timestamp -1."""
    known_quirk("tansu", "EARLIEST/LATEST answers carry a wall-clock timestamp instead of -1")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce_batches(broker_bootstrap, topic, [1, 1])
        async with Admin(broker_bootstrap) as a:
            return await a.list_offsets({tp: EARLIEST}), await a.list_offsets({tp: LATEST})

    e, lt = run(go())
    assert (e[tp].offset, lt[tp].offset) == (0, 2)
    assert e[tp].timestamp == -1 and lt[tp].timestamp == -1


def test_list_offsets_by_timestamp(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: timestamp T -> first offset whose timestamp >= T; none -> offset -1 (UNKNOWN_OFFSET)."""
    known_quirk("tansu", "ignores the timestamp: always answers offset 0 with a wall-clock timestamp")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce_batches(broker_bootstrap, topic, [1, 1, 1, 1], timestamps=[1000, 2000, 3000, 4000])
        async with Admin(broker_bootstrap) as a:
            return {ts: (await a.list_offsets({tp: ts}))[tp] for ts in (500, 2000, 2500, 4000, 9000)}

    got = run(go())
    assert {ts: o.offset for ts, o in got.items()} == {500: 0, 2000: 1, 2500: 2, 4000: 3, 9000: -1}
    assert got[2500].timestamp == 3000


def test_list_offsets_max_timestamp(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka (ListOffsets v7+, KIP-734): MAX_TIMESTAMP -> offset and timestamp of the max-timestamp record."""
    known_quirk("tansu", "MAX_TIMESTAMP (-3): storage error TryFromInt, connection closed (advertises ListOffsets v9)")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce_batches(broker_bootstrap, topic, [1, 1, 1], timestamps=[1000, 5000, 3000])
        async with Admin(broker_bootstrap) as a:
            conn = await a.cluster.any_connection()
            assert conn.versions[2] >= 7, "broker does not offer ListOffsets v7+"
            return (await a.list_offsets({tp: MAX_TIMESTAMP}))[tp]

    o = run(go())
    assert (o.offset, o.timestamp) == (1, 5000)


def test_delete_records_moves_log_start(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka: DeleteRecords(offset) -> low watermark = offset; EARLIEST follows; reads below it are out of range."""
    known_quirk("tansu", "DeleteRecords panics the handler (dynostore.rs 'not yet implemented'), connection closed")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce_batches(broker_bootstrap, topic, [1, 1, 1, 1, 1])
        async with Admin(broker_bootstrap) as a:
            try:
                low = await a.delete_records({tp: 3})
            except ConnectionClosedError as exc:
                raise AssertionError(f"broker closed the connection on DeleteRecords: {exc}") from exc
            return low, await a.earliest_offsets([tp])

    low, earliest = run(go())
    assert low[tp] == 3 and earliest[tp] == 3


def test_partition_max_bytes_is_honoured(broker_bootstrap, new_topic, known_quirk) -> None:
    """Kafka (KIP-74): at most partition_max_bytes per partition, except that the first batch is always whole."""
    known_quirk("tansu", "ignores partition_max_bytes: returns all batches in one answer")
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(broker_bootstrap) as p:
            for _ in range(6):
                await p.send_and_wait(topic, b"y" * 1000, partition=0)
        return await fetch_once(broker_bootstrap, tp, 0, max_wait_ms=100, partition_max_bytes=1200)

    resp = run(go())
    data = resp.body.responses[0].partitions[0].records
    assert data and len(data) <= 1200 + 200  # one ~1.1 KB batch, not six


def test_produce_to_unknown_topic_is_rejected(broker_bootstrap, known_quirk) -> None:
    """Kafka: Produce to a topic that does not exist -> UNKNOWN_TOPIC_OR_PARTITION (Produce never auto-creates)."""
    known_quirk("tansu", "accepts the Produce (error 0, offsets assigned) while Metadata still says UNKNOWN_TOPIC")
    import uuid

    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    name = f"never-{uuid.uuid4().hex[:8]}"

    async def go():
        async with Cluster(broker_bootstrap) as cluster:
            conn = await cluster.any_connection()
            b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1024)
            b.append(0, None, b"z")
            b.close()
            data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(b.buffer()))
            req = ProduceRequest(
                transactional_id=None, acks=-1, timeout_ms=1000,
                topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=[data])],
            )
            v = min(conn.versions[0], 12)  # v13 names topics by id, which an unknown topic has not
            resp = await conn.request(req, v)
            return resp.body.responses[0].partition_responses[0].error_code

    assert run(go()) == Errors.UnknownTopicOrPartitionError.errno


def test_list_offsets_request_encodes_timestamp() -> None:
    """Guard for the rules above: the client really puts the timestamp on the wire."""
    req = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t", partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=2500)]
            )
        ],
    )
    decoded = ListOffsetsRequest.decode(req.encode(version=7), version=7)
    assert decoded.topics[0].partitions[0].timestamp == 2500
