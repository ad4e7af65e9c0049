"""Consumer: assign/seek/position/poll, in-batch skipping, fetch limits, offset reset policies."""

from __future__ import annotations

import asyncio
import time

import kafka.errors as Errors
import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecordsBuilder
from kct_client_helpers import raw_batches, run

from reference_broker.client.cluster import Cluster
from reference_broker.client.consumer import Consumer, decode_records
from reference_broker.client.producer import Producer
from reference_broker.client.types import TopicPartition


async def produce(
    bootstrap: str, topic: str, n: int, linger_ms: int | None = None, partition: int = 0, size: int = 0
) -> None:
    """n records; one batch per record unless ``linger_ms`` is given (then batched).

    One batch per record by default because Tansu's ListOffsets LATEST answers last batch base offset + 1
    (see test_client_broker_rules.py); with single-record batches that equals the log end, so tests that are about
    the client's seek/reset logic do not depend on that quirk.
    """
    async with Producer(bootstrap, linger_ms=linger_ms or 0, batch_size=1 << 20) as p:
        values = [b"v%03d" % i + b"." * size for i in range(n)]
        if linger_ms is None:
            for i, v in enumerate(values):
                await p.send_and_wait(topic, v, key=b"k%d" % i, partition=partition)
            return
        futs = [await p.send(topic, v, key=b"k%d" % i, partition=partition) for i, v in enumerate(values)]
        await asyncio.gather(*futs)


def test_decode_records_skips_below_fetch_offset() -> None:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=100)
    for i in range(10):
        b.append(1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")])
    b.close()
    tp = TopicPartition("t", 0)
    recs, nxt = decode_records(tp, bytes(b.buffer()), 105)
    assert [r.offset for r in recs] == [105, 106, 107, 108, 109]
    assert recs[0].key == b"k5" and recs[0].headers == [("h", b"x")] and recs[0].timestamp == 1005
    assert nxt == 110
    # a fetch offset past the whole batch: nothing, but the position still moves past it
    recs, nxt = decode_records(tp, bytes(b.buffer()), 200)
    assert recs == [] and nxt == 200
    assert decode_records(tp, None, 7) == ([], 7)


def test_seek_inside_batch_skips_earlier_records(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 10, linger_ms=100)  # one batch 0..9
        batches = await raw_batches(broker_bootstrap, tp)
        async with Consumer(broker_bootstrap, fetch_max_wait_ms=100) as c:
            c.assign([tp])
            c.seek(tp, 5)
            got = await c.poll(2000)
            pos = await c.position(tp)
        return batches, got, pos

    batches, got, pos = run(go())
    assert len(batches) == 1 and batches[0].base_offset == 0  # the broker returns the whole batch from 0
    assert [r.offset for r in got[tp]] == [5, 6, 7, 8, 9]
    assert [r.value for r in got[tp]] == [b"v%03d" % i for i in range(5, 10)]
    assert pos == 10


def test_seek_to_beginning_end_and_position(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def go():
        await produce(broker_bootstrap, topic, 7, partition=0)
        await produce(broker_bootstrap, topic, 3, partition=1)
        async with Consumer(broker_bootstrap) as c:
            c.assign([tp0, tp1])
            assert c.assignment() == {tp0, tp1}
            await c.seek_to_end()
            end = (await c.position(tp0), await c.position(tp1))
            await c.seek_to_beginning(tp0)
            begin = await c.position(tp0)
            c.seek(tp1, 1)
            mid = await c.position(tp1)
            with pytest.raises(Errors.IllegalStateError):
                c.seek(TopicPartition(topic, 9), 0)
        return end, begin, mid

    end, begin, mid = run(go())
    assert end == (7, 3) and begin == 0 and mid == 1


def test_auto_offset_reset_earliest_and_latest(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 3)
        async with (
            Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as early,
            Consumer(broker_bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=100) as late,
        ):
            early.assign([tp])
            late.assign([tp])
            late_pos = await late.position(tp)
            await produce(broker_bootstrap, topic, 2)
            e, lt = [], []
            for _ in range(10):
                e += (await early.poll(300)).get(tp, [])
                lt += (await late.poll(300)).get(tp, [])
                if len(e) >= 5 and len(lt) >= 2:
                    break
        return late_pos, [r.offset for r in e], [r.offset for r in lt]

    late_pos, early_offsets, late_offsets = run(go())
    assert late_pos == 3
    assert early_offsets == [0, 1, 2, 3, 4]
    assert late_offsets == [3, 4]


def test_auto_offset_reset_none_without_position_raises(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)

    async def go():
        async with Consumer(broker_bootstrap, auto_offset_reset="none") as c:
            c.assign([TopicPartition(topic, 0)])
            await c.poll(100)

    with pytest.raises(Errors.NoOffsetForPartitionError):
        run(go())


async def _broker_says_out_of_range(bootstrap: str, tp: TopicPartition, offset: int) -> bool:
    async with Cluster(bootstrap) as cluster:
        c = Consumer(cluster, fetch_max_wait_ms=0)
        c.assign([tp])
        c.seek(tp, offset)
        conn = await cluster.connection(cluster.leader_for(tp))
        v = conn.versions[1]
        body = (await conn.request(c.build_fetch_request(v, [tp]), v)).body
        codes = [p.error_code for t in body.responses for p in t.partitions]
        return Errors.OffsetOutOfRangeError.errno in codes


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_offset_out_of_range_applies_reset_policy(broker_bootstrap: str, new_topic, policy: str) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 4)
        if not await _broker_says_out_of_range(broker_bootstrap, tp, 1000):
            return None
        async with Consumer(broker_bootstrap, auto_offset_reset=policy, fetch_max_wait_ms=100) as c:
            c.assign([tp])
            c.seek(tp, 1000)
            if policy == "none":
                with pytest.raises(Errors.OffsetOutOfRangeError):
                    await c.poll(1000)
                return "raised"
            got = await c.poll(1000)
            return [r.offset for r in got.get(tp, [])], await c.position(tp)

    result = run(go())
    if result is None:
        pytest.skip("broker does not answer OFFSET_OUT_OF_RANGE for a fetch offset beyond the log end "
                    "(Tansu quirk, see test_client_broker_rules.py); the client's reset path cannot be exercised here")
    if policy == "none":
        assert result == "raised"
    elif policy == "earliest":
        assert result == ([0, 1, 2, 3], 4)
    else:
        assert result == ([], 4)


def test_fetch_settings_reach_the_wire_and_small_limits_still_deliver(broker_bootstrap: str, new_topic) -> None:
    """The configured Fetch knobs are what is encoded at the negotiated version, and with a partition limit
    smaller than the data every record still arrives exactly once, in order (whether the broker honours the
    limit is a broker rule: test_client_broker_rules.py)."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        for _ in range(6):  # six separate batches of ~1 KiB
            await produce(broker_bootstrap, topic, 1, size=1000)
        async with Consumer(
            broker_bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=1200, fetch_max_wait_ms=100
        ) as c:
            c.assign([tp])
            out = []
            for _ in range(20):
                out += (await c.poll(300)).get(tp, [])
                if len(out) >= 6:
                    break
            conn = await c.cluster.connection(c.cluster.leader_for(tp))
            v = conn.versions[1]
            wire = c.build_fetch_request(v, [tp]).encode(version=v)
        return [r.offset for r in out], v, wire

    offsets, v, wire = run(go())
    assert offsets == list(range(6))
    decoded = FetchRequest.decode(wire, version=v)
    assert (decoded.max_wait_ms, decoded.min_bytes) == (100, 1)
    if v >= 3:
        assert decoded.max_bytes == 52428800
    part = decoded.topics[0].partitions[0]
    assert part.partition_max_bytes == 1200 and part.fetch_offset == 6


def test_fetch_max_wait_bounds_an_empty_poll(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=300) as c:
            c.assign([tp])
            await c.position(tp)
            t0 = time.monotonic()
            got = await c.poll(0)
            elapsed = time.monotonic() - t0
            return got, elapsed, c.fetch_responses[-1].rtt_ns

    got, elapsed, rtt = run(go())
    assert got == {}
    assert 0.28 <= elapsed < 2.0
    assert 0.28e9 <= rtt < 2.0e9


def test_poll_wakes_when_data_arrives(broker_bootstrap: str, new_topic) -> None:
    """A parked fetch returns early once a record is produced (long max_wait, short actual wait)."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5000) as c:
            c.assign([tp])
            await c.position(tp)

            async def later() -> None:
                await asyncio.sleep(0.3)
                await produce(broker_bootstrap, topic, 1)

            t0 = time.monotonic()
            task = asyncio.ensure_future(later())
            got = await c.poll(6000)
            elapsed = time.monotonic() - t0
            await task
            return got, elapsed

    got, elapsed = run(go())
    assert [r.value for r in got[tp]] == [b"v000"]
    assert elapsed < 4.0


def test_max_records_keeps_rest_buffered(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 5, linger_ms=50)
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([tp])
            a = await c.poll(2000, max_records=2)
            pos = await c.position(tp)
            b = await c.poll(2000)
        return [r.offset for r in a[tp]], pos, [r.offset for r in b[tp]]

    a, pos, b = run(go())
    assert a == [0, 1] and pos == 2 and b == [2, 3, 4]


@pytest.mark.parametrize("fetch_version", [4, 7, 11, 12, 13, None])
def test_fetch_versions_old_and_new_read_the_same(broker_bootstrap: str, new_topic, fetch_version) -> None:
    """Names up to v12, topic ids from v13, non-flexible before v12: all read the same records."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 5, linger_ms=20)
        async with Consumer(
            broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100, fetch_version=fetch_version
        ) as c:
            c.assign([tp])
            got = await c.poll(3000)
            return [(r.offset, r.key, r.value) for r in got.get(tp, [])], c.fetch_responses[-1].api_version

    recs, used = run(go())
    assert recs == [(i, b"k%d" % i, b"v%03d" % i) for i in range(5)]
    if fetch_version is not None:
        assert used == fetch_version


def test_poll_positions_vouch_for_what_each_poll_read(broker_bootstrap: str, new_topic) -> None:
    """``poll_positions`` (the history contract's poll ``positions``): the fetch offset of a partition whose
    records the poll returns, and of an empty answer at the end of the log; nothing for records it keeps
    buffered (max_records) or returns from an earlier fetch."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        await produce(broker_bootstrap, topic, 5, linger_ms=50)
        async with Consumer(broker_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
            c.assign([tp])
            c.seek(tp, 1)
            a = await c.poll(2000, max_records=2)
            pa = c.history_positions()
            b = await c.poll(2000)  # from the buffer: no fetch, no claim
            pb = c.history_positions()
            e = await c.poll(200)  # at the end: an empty answer
            pe = c.history_positions()
        return [r.offset for r in a[tp]], pa, [r.offset for r in b[tp]], pb, e, pe

    a, pa, b, pb, e, pe = run(go())
    assert a == [1, 2] and pa == {f"{topic}/0": 1}
    assert b == [3, 4] and pb == {}
    assert e == {} and pe == {f"{topic}/0": 5}


def test_close_of_a_consumer_never_started_closes_its_connections(broker_bootstrap: str, new_topic) -> None:
    """A consumer used without ``start()`` opens connections lazily; ``close()`` must close them too (it once
    left them open, with their read tasks pending until the loop died)."""
    tp = TopicPartition(new_topic(1), 0)

    async def go() -> list[str]:
        before = asyncio.all_tasks()
        c = Consumer(broker_bootstrap)
        c.assign([tp])
        await c.seek_to_end()
        await c.position(tp)
        await c.close()
        return [t.get_coro().__qualname__ for t in asyncio.all_tasks() - before]

    assert run(go()) == []
