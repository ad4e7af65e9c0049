"""Fetch as Kafka's ReplicaManager.fetchMessages + DelayedFetch: measured with the protocol-level client."""
from __future__ import annotations

import asyncio

from kafka import errors as E
from kafka.record.memory_records import MemoryRecords

from ._wire import (
    batch,
    connect,
    create_topic,
    delete_records,
    delete_topic,
    fetch_request,
    only_partition,
    produce,
)

MS = 1_000_000


def offsets_in(records: bytes) -> list[int]:
    out = []
    recs = MemoryRecords(bytes(records or b""))
    while (b := recs.next_batch()) is not None:
        out.extend(r.offset for r in b)
    return out


async def test_idle_partition_answers_at_max_wait(broker):
    """DelayedFetch.onExpiration: min_bytes unsatisfied → the answer comes at max_wait, empty, no error."""
    c = await connect(broker)
    await create_topic(c, "idle")
    for max_wait in (100, 400):
        r = await c.request(fetch_request([("idle", 0, 0)], max_wait_ms=max_wait, min_bytes=1))
        p = only_partition(r.body)
        assert p.error_code == 0 and p.records in (b"", None)
        assert max_wait * MS <= r.rtt_ns < (max_wait + 250) * MS, f"answered after {r.rtt_ns / MS:.1f} ms"
    await c.close()


async def test_append_during_park_completes_early_with_data(broker):
    """Case G: an append that makes min_bytes readable wakes the parked fetch at once, carrying the data."""
    fetcher, producer = await connect(broker), await connect(broker)
    await create_topic(fetcher, "wake")
    fut = fetcher.submit(fetch_request([("wake", 0, 0)], max_wait_ms=5000, min_bytes=1))
    await asyncio.sleep(0.2)
    assert not fut.done(), "fetch answered before any data existed"
    ack = await produce(producer, "wake", batch([b"hello"]), acks=1)
    assert ack.error_code == 0
    r = await asyncio.wait_for(fut, 2)
    assert r.rtt_ns < 1500 * MS, f"woken only after {r.rtt_ns / MS:.0f} ms"
    p = only_partition(r.body)
    assert p.error_code == 0 and offsets_in(p.records) == [0] and p.high_watermark == 1
    await fetcher.close()
    await producer.close()


async def test_min_bytes_counts_record_bytes_and_is_inclusive(broker):
    """Case G counts batch bytes between fetch offset and HW, and completes at accumulated >= min_bytes."""
    fetcher, producer = await connect(broker), await connect(broker)
    await create_topic(fetcher, "mb")
    one = batch([b"x" * 100])
    need = 2 * len(one)
    fut = fetcher.submit(fetch_request([("mb", 0, 0)], max_wait_ms=5000, min_bytes=need))
    await produce(producer, "mb", one)
    await asyncio.sleep(0.3)
    assert not fut.done(), f"completed with {len(one)} bytes < min_bytes {need}"
    await produce(producer, "mb", batch([b"y" * 100]))   # now exactly min_bytes readable
    r = await asyncio.wait_for(fut, 2)
    assert r.rtt_ns < 2000 * MS
    assert offsets_in(only_partition(r.body).records) == [0, 1]
    await fetcher.close()
    await producer.close()


async def test_partition_max_bytes_caps_what_counts_towards_min_bytes(broker):
    """DelayedFetch: bytesAvailable = min(positionDiff, partition max bytes): a small cap keeps the fetch parked."""
    c, producer = await connect(broker), await connect(broker)
    await create_topic(c, "cap")
    one = batch([b"z" * 200])
    r0 = await produce(producer, "cap", one)
    assert r0.error_code == 0
    r = await c.request(fetch_request([("cap", 0, 0)], max_wait_ms=300, min_bytes=len(one) + 1,
                                      partition_max_bytes=len(one) // 2))
    assert r.rtt_ns >= 300 * MS, "a capped partition must not satisfy min_bytes"
    p = only_partition(r.body)
    assert offsets_in(p.records) == [0], "the first batch is returned whole even above partition_max_bytes"
    await c.close()
    await producer.close()


async def test_immediate_answers(broker):
    """Respond at once: max_wait <= 0, bytes already >= min_bytes, or an error in any partition."""
    c = await connect(broker)
    await create_topic(c, "now")
    r = await c.request(fetch_request([("now", 0, 0)], max_wait_ms=0, min_bytes=1))
    assert r.rtt_ns < 200 * MS and only_partition(r.body).error_code == 0
    r = await c.request(fetch_request([("nosuchtopic", 0, 0)], max_wait_ms=5000, min_bytes=1))
    assert r.rtt_ns < 1000 * MS
    assert only_partition(r.body).error_code == E.UnknownTopicOrPartitionError.errno
    await produce(c, "now", batch([b"a", b"b"]))
    r = await c.request(fetch_request([("now", 0, 0)], max_wait_ms=5000, min_bytes=1))
    assert r.rtt_ns < 1000 * MS and offsets_in(only_partition(r.body).records) == [0, 1]
    await c.close()


async def test_topic_deleted_while_parked_completes_with_error(broker):
    """Case C: a partition this broker no longer knows completes the parked fetch at once."""
    fetcher, admin = await connect(broker), await connect(broker)
    await create_topic(fetcher, "gone")
    fut = fetcher.submit(fetch_request([("gone", 0, 0)], max_wait_ms=5000, min_bytes=1))
    await asyncio.sleep(0.2)
    assert await delete_topic(admin, "gone") == 0
    r = await asyncio.wait_for(fut, 2)
    assert only_partition(r.body).error_code == E.UnknownTopicOrPartitionError.errno
    await fetcher.close()
    await admin.close()


async def test_offset_edges(broker):
    """UnifiedLog.read: offset > LEO or < log start → OFFSET_OUT_OF_RANGE; offset == LEO → empty, no error."""
    c = await connect(broker)
    await create_topic(c, "edges")
    for i in range(3):
        await produce(c, "edges", batch([b"r%d" % i]))
    leo = 3
    p = only_partition((await c.request(fetch_request([("edges", 0, leo)], 0, 1))).body)
    assert p.error_code == 0 and not p.records and p.high_watermark == leo
    p = only_partition((await c.request(fetch_request([("edges", 0, leo + 1)], 0, 1))).body)
    assert p.error_code == E.OffsetOutOfRangeError.errno
    dr = await delete_records(c, "edges", 2)
    assert dr.error_code == 0 and dr.low_watermark == 2
    p = only_partition((await c.request(fetch_request([("edges", 0, 1)], 0, 1))).body)
    assert p.error_code == E.OffsetOutOfRangeError.errno
    p = only_partition((await c.request(fetch_request([("edges", 0, 2)], 0, 1))).body)
    assert p.error_code == 0 and offsets_in(p.records) == [2] and p.log_start_offset == 2
    assert (await delete_records(c, "edges", leo + 1)).error_code == E.OffsetOutOfRangeError.errno
    await c.close()


async def test_delete_records_wakes_fetch_parked_below_new_log_start(broker):
    """A parked fetch whose offset falls below the log start completes and answers OFFSET_OUT_OF_RANGE."""
    fetcher, admin = await connect(broker), await connect(broker)
    await create_topic(fetcher, "trim")
    await produce(admin, "trim", batch([b"a"]))
    await produce(admin, "trim", batch([b"b"]))
    fut = fetcher.submit(fetch_request([("trim", 0, 2)], max_wait_ms=5000, min_bytes=1))
    await asyncio.sleep(0.1)
    await produce(admin, "trim", batch([b"c"]))          # wakes it: not what we test
    await asyncio.wait_for(fut, 2)
    fut = fetcher.submit(fetch_request([("trim", 0, 3)], max_wait_ms=5000, min_bytes=1))
    await asyncio.sleep(0.1)
    assert not fut.done()
    # moving the log start to the HW (-1) leaves the fetch at offset 3 == LEO in range: it keeps waiting
    assert (await delete_records(admin, "trim", -1)).low_watermark == 3
    await asyncio.sleep(0.1)
    assert not fut.done()
    r = await asyncio.wait_for(fut, 6)
    assert r.rtt_ns >= 5000 * MS
    await fetcher.close()
    await admin.close()


async def test_max_bytes_across_partitions_first_batch_whole(broker):
    """KIP-74: request max_bytes bounds the total, but the first non-empty partition's first batch is whole."""
    c = await connect(broker)
    await create_topic(c, "mp", partitions=2)
    big = batch([b"B" * 3000])
    for p in (0, 1):
        await produce(c, "mp", big, partition=p)
        await produce(c, "mp", big, partition=p)
    r = await c.request(fetch_request([("mp", 0, 0), ("mp", 1, 0)], 0, 1, max_bytes=1000))
    parts = {p.partition_index: p for p in r.body.responses[0].partitions}
    assert offsets_in(parts[0].records) == [0], "first batch whole although above max_bytes"
    assert offsets_in(parts[1].records) == [], "budget spent: nothing more"
    r = await c.request(fetch_request([("mp", 0, 0), ("mp", 1, 0)], 0, 1, max_bytes=2 * len(big) + 10))
    parts = {p.partition_index: p for p in r.body.responses[0].partitions}
    assert offsets_in(parts[0].records) == [0, 1] and offsets_in(parts[1].records) == []
    await c.close()


async def test_multi_partition_accumulation(broker):
    """Case G sums readable bytes over all partitions of the fetch."""
    fetcher, producer = await connect(broker), await connect(broker)
    await create_topic(fetcher, "acc", partitions=2)
    one = batch([b"q" * 100])
    fut = fetcher.submit(fetch_request([("acc", 0, 0), ("acc", 1, 0)], max_wait_ms=5000,
                                       min_bytes=2 * len(one)))
    await produce(producer, "acc", one, partition=0)
    await asyncio.sleep(0.3)
    assert not fut.done()
    await produce(producer, "acc", one, partition=1)
    r = await asyncio.wait_for(fut, 2)
    assert r.rtt_ns < 2000 * MS
    await fetcher.close()
    await producer.close()
