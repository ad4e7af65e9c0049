"""Producer: acks, batching by linger and size, compression, idempotence, retries, errors."""

from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest
from kafka.protocol.consumer import FetchRequest
from kct_client_helpers import raw_batches, read_all, run

from reference_broker.client.producer import Producer
from reference_broker.client.types import TopicPartition


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks_modes_deliver(broker_bootstrap: str, new_topic, acks: int) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(broker_bootstrap, acks=acks) as p:
            metas = [await p.send_and_wait(topic, f"v{i}".encode(), partition=0) for i in range(5)]
            n_resp = len(p.responses)
            bodies = [r.body for r in p.responses]
            # read while the producer's connection is still open: with acks=0 nothing confirms the writes,
            # and Tansu was seen dropping acks=0 requests still unread when the client closed right after
            recs = await read_all(broker_bootstrap, tp, 5)
        return metas, n_resp, bodies, recs

    metas, n_resp, bodies, recs = run(go())
    assert [r.value for r in recs] == [f"v{i}".encode() for i in range(5)]
    assert n_resp == 5
    if acks == 0:
        assert all(m.offset == -1 for m in metas)  # the broker does not say
        assert all(b is None for b in bodies)  # and sends no response at all
    else:
        assert [m.offset for m in metas] == [r.offset for r in recs] == list(range(5))


def test_linger_batches_records_into_one_request(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        # linger 3 s against 20 sends 5 ms apart: at load 20 on 2 cores the 400 ms of before ran out mid-loop (two
        # requests); what is checked is that records wait for linger, not how fast the loop is
        async with Producer(broker_bootstrap, linger_ms=3000, batch_size=1 << 20) as p:
            futs = []
            for i in range(20):
                futs.append(await p.send(topic, f"v{i}".encode(), partition=0))
                await asyncio.sleep(0.005)  # time passes, the sender runs, but linger has not expired
            early = [f.done() for f in futs]
            metas = await asyncio.gather(*futs)
            n_requests = len(p.responses)
        return early, metas, n_requests, await raw_batches(broker_bootstrap, tp)

    early, metas, n_requests, batches = run(go())
    assert not any(early)  # lingering: nothing sent yet
    assert n_requests == 1
    assert len(batches) == 1 and batches[0].records_count == 20
    assert [m.offset for m in metas] == list(range(20))


def test_no_linger_sends_each_awaited_record_alone(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)

    async def go():
        async with Producer(broker_bootstrap, linger_ms=0) as p:
            for i in range(4):
                await p.send_and_wait(topic, f"v{i}".encode(), partition=0)
            return len(p.responses)

    assert run(go()) == 4


def test_batch_size_splits_batches(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    value = b"x" * 100

    async def go():
        async with Producer(broker_bootstrap, linger_ms=1000, batch_size=400) as p:
            futs = [await p.send(topic, value, partition=0) for _ in range(12)]
            metas = await asyncio.wait_for(asyncio.gather(*futs), 5)  # full batches go before linger
        return metas, await raw_batches(broker_bootstrap, tp)

    metas, batches = run(go())
    assert [m.offset for m in metas] == list(range(12))
    assert len(batches) >= 3
    assert all(b.size_in_bytes <= 400 + 150 for b in batches)  # one record of slack, like Kafka
    assert sum(b.records_count for b in batches) == 12


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(broker_bootstrap: str, new_topic, compression: str) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    codec = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[compression]

    async def go():
        async with Producer(broker_bootstrap, linger_ms=50, compression_type=compression) as p:
            futs = [
                await p.send(topic, b"value-%d" % i * 10, key=b"k%d" % i, headers=[("h", b"%d" % i)], partition=0)
                for i in range(30)
            ]
            await asyncio.gather(*futs)
        return await read_all(broker_bootstrap, tp, 30), await raw_batches(broker_bootstrap, tp)

    recs, batches = run(go())
    assert {b.compression_type for b in batches} == {codec}
    assert [(r.key, r.value, r.headers) for r in recs] == [
        (b"k%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i)]) for i in range(30)
    ]


def test_idempotent_producer_stamps_pid_and_sequences(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(broker_bootstrap, enable_idempotence=True, linger_ms=0) as p:
            for i in range(3):
                await p.send_and_wait(topic, f"a{i}".encode(), partition=0)
            futs = [await p.send(topic, f"b{i}".encode(), partition=0) for i in range(4)]
            await asyncio.gather(*futs)
            pid, epoch = p.producer_id, p.producer_epoch
        return pid, epoch, await raw_batches(broker_bootstrap, tp)

    pid, epoch, batches = run(go())
    assert pid >= 0 and epoch >= 0
    assert all(b.producer_id == pid and b.producer_epoch == epoch for b in batches)
    seqs = []
    for b in batches:
        seqs.extend(range(b.base_sequence, b.base_sequence + b.records_count))
    assert seqs == list(range(7))  # contiguous from 0, one per record


def _drop_after_write(producer: Producer, node: int):
    """Close the producer's connection right after its Produce is written, before the answer is read."""

    async def dropper() -> bool:
        for _ in range(200000):
            conn = producer.cluster._conns.get(node)
            if conn is not None and conn.in_flight > 0:
                await conn.close()  # no await happened since the write: the answer is unread
                return True
            await asyncio.sleep(0)
        return False

    return dropper()


def test_first_requests_in_parallel_write_each_record_once(broker_bootstrap: str, new_topic) -> None:
    """A fresh producer's first batches go out in parallel (one request per partition with linger 0) before any
    connection to the leader exists; all must share one connection, none retried, so no record is written twice."""
    topic = new_topic(6)
    tps = [TopicPartition(topic, p) for p in range(6)]

    async def go():
        async with Producer(broker_bootstrap, linger_ms=0) as p:
            futs = []
            for i in range(60):
                futs.append(await p.send(topic, f"v{i}".encode(), partition=i % 6))
                await asyncio.sleep(0)  # the sender drains each partition's batch alone: one request each
            metas = await asyncio.gather(*futs)
        return metas, [await read_all(broker_bootstrap, tp, 10) for tp in tps]

    metas, logs = run(go())
    assert [len(log) for log in logs] == [10] * 6  # read_all polls once more past 10: a duplicate shows here
    assert sorted(r.value for log in logs for r in log) == sorted(f"v{i}".encode() for i in range(60))
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(10))


@pytest.mark.parametrize("idempotent", [False, True])
def test_retry_after_connection_lost_mid_request(broker_bootstrap: str, new_topic, idempotent) -> None:
    """The write reached the broker but the answer was lost: the producer retries on a new connection.
    Without idempotence the record may be duplicated (at-least-once); with it, exactly one copy must exist."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(
            broker_bootstrap, enable_idempotence=idempotent, retries=3, retry_backoff_ms=20
        ) as p:
            await p.send_and_wait(topic, b"warmup", partition=0)  # connection to the leader exists
            node = p.cluster.leader_for(tp)
            dropper = asyncio.ensure_future(_drop_after_write(p, node))
            meta = await p.send_and_wait(topic, b"payload", partition=0)
            dropped = await dropper
        return dropped, meta, await read_all(broker_bootstrap, tp, 2)

    dropped, meta, recs = run(go())
    assert dropped
    values = [r.value for r in recs]
    assert values[0] == b"warmup"
    assert b"payload" in values  # delivered despite the lost answer
    assert recs[meta.offset].value == b"payload"
    if idempotent:
        assert values.count(b"payload") == 1
    else:
        # the first write did land (so the drop happened after the broker had it): at-least-once shows it
        assert values.count(b"payload") == 2


def test_unknown_topic_fails_after_metadata_wait(broker_bootstrap: str) -> None:
    async def go():
        async with Producer(broker_bootstrap, metadata_max_wait_ms=300, retry_backoff_ms=50) as p:
            await p.send_and_wait("no-such-topic-zz9", b"v")

    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        run(go())


def test_bad_partition_is_rejected(broker_bootstrap: str, new_topic) -> None:
    topic = new_topic(2)

    async def go():
        async with Producer(broker_bootstrap) as p:
            await p.send_and_wait(topic, b"v", partition=7)

    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        run(go())


def test_sticky_partitioner_keeps_unkeyed_batch_together(broker_bootstrap: str, new_topic) -> None:
    import random

    topic = new_topic(4)

    async def go():
        async with Producer(broker_bootstrap, linger_ms=200, rng=random.Random(7)) as p:
            futs = [await p.send(topic, b"v%d" % i) for i in range(10)]
            first = await asyncio.gather(*futs)
            futs = [await p.send(topic, b"w%d" % i) for i in range(10)]
            second = await asyncio.gather(*futs)
        return first, second

    first, second = run(go())
    assert len({m.partition for m in first}) == 1  # one sticky partition per batch
    assert len({m.partition for m in second}) == 1
    assert [m.offset for m in first] == list(range(first[0].offset, first[0].offset + 10))


def test_fetch_request_helper_is_real_fetch(broker_bootstrap: str, new_topic) -> None:
    """raw_batches (used above) really returns what was produced: guards the helpers themselves."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(broker_bootstrap) as p:
            await p.send_and_wait(topic, b"only", partition=0)
        return await raw_batches(broker_bootstrap, tp)

    batches = run(go())
    assert [r.value for b in batches for r in b] == [b"only"]
    assert FetchRequest.max_version >= 4


@pytest.mark.parametrize("produce_version", [3, 7, 8, 9, None])
def test_produce_versions_old_and_new(broker_bootstrap: str, new_topic, produce_version) -> None:
    """v3 (first with record batch v2) through the flexible versions: same records, same offsets."""
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)

    async def go():
        async with Producer(broker_bootstrap, produce_version=produce_version, linger_ms=10) as p:
            futs = [await p.send(topic, b"v%d" % i, key=b"k", partition=0) for i in range(3)]
            metas = await asyncio.gather(*futs)
            used = {r.api_version for r in p.responses}
        return metas, used, await read_all(broker_bootstrap, tp, 3)

    metas, used, recs = run(go())
    assert [m.offset for m in metas] == [0, 1, 2]
    assert [(r.key, r.value) for r in recs] == [(b"k", b"v%d" % i) for i in range(3)]
    if produce_version is not None:
        assert used == {produce_version}


def test_retriable_error_code_is_retried_then_surfaces(broker_kind: str, tmp_path) -> None:
    """A retriable error (NOT_ENOUGH_REPLICAS) on every try: the producer must retry exactly ``retries`` times, then
    fail the record with that error. The error comes from a reference broker of its own under the
    isr.min_isr_not_capped switch, which refuses acks=all on RF=1 with min.insync.replicas=2 as Kafka < 3.7 did
    (Kafka >= 3.7 caps min.insync.replicas at the replication factor and accepts it)."""
    if broker_kind != "reference":
        pytest.skip("the retriable error comes from a reference broker under a fault switch, started here")
    import uuid

    from fixtures import make_target
    from reference_broker.client.admin import Admin, NewTopic

    topic = f"misr-{uuid.uuid4().hex[:8]}"
    target = make_target("reference", config={"memory": "true", "faults": "isr.min_isr_not_capped"},
                         work_dir=tmp_path).start()
    broker_bootstrap = target.bootstrap

    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.create_topics([NewTopic(topic, 1, 1, {"min.insync.replicas": "2"})])
        async with Producer(broker_bootstrap, acks=-1, retries=2, retry_backoff_ms=20) as p:
            err = None
            try:
                await p.send_and_wait(topic, b"v", partition=0)
            except Errors.KafkaError as exc:
                err = exc
            codes = [pp.error_code for r in p.responses for t in r.body.responses for pp in t.partition_responses]
        return err, codes

    try:
        err, codes = run(go())
    finally:
        target.stop()
    assert isinstance(err, Errors.NotEnoughReplicasError)
    assert codes == [Errors.NotEnoughReplicasError.errno] * 3  # first try + 2 retries
