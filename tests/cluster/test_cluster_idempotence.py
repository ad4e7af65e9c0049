"""Idempotent producer state on the reference cluster across truncation, restarts and failover (issue 18 item 5).

Kafka keeps producer state (per producer id: epoch, the last five batches' sequence ranges and offsets) with each
partition log and rebuilds it from snapshots and the log when the log is loaded and when a follower truncates
(UnifiedLog.truncateTo → rebuildProducerState; LogLoader). Real processes throughout: a controller and brokers, kill
-9, SIGSTOP, restarts. Writes come from a real idempotent producer (confluent-kafka, enable.idempotence=true) or,
where the check needs batches of two producers on either side of a truncation point, from batches built by
kafka.record; a retry is always the exact batch again, sent at the protocol level (``conformance.wire``).

- After a follower truncation, a producer whose batches lie below the truncation point still has its retries
  deduplicated (the old follower, made leader again, answers with the original offset), while a producer whose
  only batch was truncated away is not taken for a duplicate of what now sits at that offset.
- After kill -9 and restart of a durable broker (segments rolled, so producer snapshots exist), a retry of the last
  committed batch is a duplicate with its original offset, and the producer's next sequence is checked, not
  accepted blindly; the same after a clean restart, which loads the snapshot written at shutdown.
- After a failover whose new leader restarted since the batch was written, the retry is deduplicated.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Producer
from kct_cluster_helpers import Wires, await_leader

from conformance.properties import ops
from conformance.wire import LATEST, Wire, idempotent_batch

T = TypeVar("T")
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


async def eventually(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout: float, what: str) -> T:
    t0, last = time.monotonic(), None
    while time.monotonic() - t0 < timeout:
        try:
            last = await probe()
            if ok(last):
                return last
        except Exception as e:  # noqa: BLE001 - a broker being killed answers with errors for a while
            last = e
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}")


class Nodes(Wires):
    """One Wire per broker of a reference cluster (kct_cluster_helpers.Wires), plus the partition's metadata."""

    async def state(self, topic: str, via: int) -> ops.PartitionMeta:
        _b, parts = await ops.metadata(await self.to(via), [topic])
        return parts[(topic, 0)]



async def raw_batches(w: Wire, topic: str) -> list[bytes]:
    """The partition's batches up to the HW exactly as stored (producer id, epoch, sequences included)."""
    r = await w.request("Fetch", w.fetch_request([(topic, 0, 0)], max_wait_ms=10, min_bytes=0))
    data = bytes(r.body.responses[0].partitions[0].records or b"")
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        out.append(data[pos:pos + size])
        pos += size
    return out


def producer_fields(batch: bytes) -> tuple[int, int, int, int]:
    """(base offset, producer id, epoch, base sequence) from a v2 batch header."""
    return (int.from_bytes(batch[0:8], "big", signed=True), int.from_bytes(batch[43:51], "big", signed=True),
            int.from_bytes(batch[51:53], "big", signed=True), int.from_bytes(batch[53:57], "big", signed=True))


async def values(w: Wire, topic: str) -> list[tuple[int, bytes | None]]:
    return (await ops.fetch(w, topic, 0, 0, max_wait_ms=10, min_bytes=0)).records


def produce_idempotent(bootstrap: str, topic: str, n: int, size: int = 0) -> list[int]:
    """n records (``size`` bytes of padding) from confluent-kafka with enable.idempotence=true, one batch each
    (linger 0, flushed one by one); returns their offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0})
    offsets: list[int] = []

    def done(err, msg) -> None:
        assert err is None, err
        offsets.append(msg.offset())
    for i in range(n):
        p.produce(topic, f"rec-{i}|".encode() + b"x" * size, partition=0, on_delivery=done)
        p.flush(10)
    assert len(offsets) == n, offsets
    return offsets


@pytest.mark.parametrize("storage", ["durable", "memory"])
async def test_follower_truncation_keeps_producers_below_the_truncation_point(make_cluster, storage: str) -> None:
    """Producer P writes three acks=all batches (on every replica). With the followers paused, the leader L takes
    producer Q's batch B (acks=1) only it holds. L is paused until fenced, a follower N leads and writes C at B's
    offset; L resumes, truncates B away (diverging epoch) and follows. Leadership moves back to L: P's retry is a
    duplicate at its original offset; Q's retry of B is new data (appended after C), not a duplicate of C."""
    cluster = make_cluster(memory=storage == "memory", **{"min.insync.replicas": "1"})
    nodes = Nodes(cluster)
    try:
        boot = await nodes.to(0)
        topic = await boot.create_topic("trunc", partitions=1, replication_factor=3)
        st = await eventually(lambda: nodes.state(topic, 0), lambda s: len(s.isr) == 3 and s.leader >= 0, 30,
                              "a full ISR")
        old = st.leader
        assert old == st.replicas[0], f"the first leader is the preferred replica: {st}"
        followers = [r for r in st.replicas if r != old]
        lw = await nodes.to(old)
        _, p_id, p_epoch = await lw.init_producer_id()
        _, q_id, q_epoch = await lw.init_producer_id()
        p_batches = [idempotent_batch([f"p{i}".encode()], p_id, p_epoch, i) for i in range(3)]
        for i, b in enumerate(p_batches):
            assert await lw.produce_batch(topic, 0, b) == (NONE, i)
        for f in followers:
            cluster.pause(f)
        await asyncio.sleep(1.0)                  # parked follower fetches are answered before B is written
        b_batch = idempotent_batch([b"q0"], q_id, q_epoch, 0)
        assert await lw.produce_batch(topic, 0, b_batch, acks=1) == (NONE, 3)
        cluster.pause(old)
        for f in followers:
            cluster.resume(f)
        st2, nw = await await_leader(cluster, nodes, topic, st, among=followers, down={old})
        assert await nw.produce_batch(topic, 0, idempotent_batch([b"c"], -1, -1, -1), acks=1) == (NONE, 3)
        cluster.resume(old)
        await eventually(lambda: nodes.state(topic, st2.leader), lambda s: old in s.isr, 60,
                         "the old leader back in the ISR (after truncating B)")
        assert await nw.elect_preferred_leader(topic, 0) in (NONE, 84)
        await eventually(lambda: nodes.state(topic, st2.leader), lambda s: s.leader == old, 30,
                         "leadership back on the old leader")
        await nodes.drop(old)
        _, lw = await await_leader(cluster, nodes, topic, st2, among=[old])
        p_retry = await eventually(lambda: lw.produce_batch(topic, 0, p_batches[2]), lambda r: r[0] == NONE, 15,
                                   "the old leader accepting produce")
        q_retry = await lw.produce_batch(topic, 0, b_batch)
        got = await eventually(lambda: values(lw, topic), lambda v: len(v) >= 5, 15, "the HW over every record")
        assert p_retry == (NONE, 2), (
            f"P's retry of its last batch (offset 2, below the truncation point 3) answered {p_retry}: the old "
            f"leader forgot P when it truncated; Kafka rebuilds producer state up to the truncation offset")
        assert q_retry == (NONE, 4), (
            f"Q's retry of its truncated batch answered {q_retry}: the record at 3 is C, not Q's; the retry is new")
        assert got == [(0, b"p0"), (1, b"p1"), (2, b"p2"), (3, b"c"), (4, b"q0")], got
    finally:
        await nodes.close()


async def test_retry_after_kill_and_restart_is_a_duplicate(make_cluster, tmp_path: Path) -> None:
    """One durable broker, small segments (producer snapshots at each roll). kill -9, restart: the retry of the
    last batch is a duplicate and a sequence gap is refused; a clean restart (snapshot at shutdown) likewise."""
    # ~480-byte batches, three to a segment (the controller's metadata batches must fit a segment too)
    cluster = make_cluster(brokers=1, **{"log.segment.bytes": "1500", "offsets.topic.replication.factor": "1"})
    nodes = Nodes(cluster)
    try:
        w = await nodes.to(0)
        topic = await w.create_topic("restart", partitions=1, replication_factor=1)
        offsets = await asyncio.to_thread(produce_idempotent, cluster.bootstrap, topic, 12, 400)
        assert offsets == list(range(12)), offsets
        batches = await raw_batches(w, topic)
        last = batches[-1]
        base, pid, epoch, seq = producer_fields(last)
        assert (base, seq) == (11, 11) and pid >= 0, producer_fields(last)
        data = tmp_path / "data" / "broker-0" / f"{topic}-0"
        assert len(list(data.glob("*.log"))) > 2, "segments rolled"
        for how in ("kill -9", "clean restart"):
            if how == "kill -9":
                cluster.kill(0)
            await nodes.drop(0)
            cluster.restart(0)
            w = await eventually(lambda: nodes.to(0), lambda _w: True, 30, "the restarted broker")
            retry = await eventually(lambda w=w: w.produce_batch(topic, 0, last), lambda r: r[0] == NONE, 30,
                                     f"produce accepted after the {how}")
            assert retry == (NONE, 11), (
                f"after the {how} the retry of the last batch (producer {pid}, epoch {epoch}, sequence 11, offset 11) "
                f"answered {retry}; Kafka rebuilds producer state from snapshots and the log: a duplicate at 11")
            gap = idempotent_batch([b"gap"], pid, epoch, 13)
            assert (await w.produce_batch(topic, 0, gap))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER, (
                f"after the {how} sequence 13 (expected 12) must be out of order: the producer is known")
            err, latest, _ = await w.list_offsets(topic, 0, LATEST)
            assert (err, latest) == (NONE, 12), f"nothing appended by the retries: log end {latest}"
        snapshots = sorted(p.name for p in data.glob("*.snapshot"))
        assert "00000000000000000012.snapshot" in snapshots, f"a producer snapshot at the log end: {snapshots}"
    finally:
        await nodes.close()


async def test_retry_after_failover_to_a_restarted_follower_is_a_duplicate(make_cluster) -> None:
    """A real idempotent producer writes with acks=all; each follower is killed and restarted (its producer state
    comes from its log), then the leader is killed. The retry of the last batch on the new leader is a
    duplicate."""
    cluster = make_cluster(**{"min.insync.replicas": "2"})
    nodes = Nodes(cluster)
    try:
        boot = await nodes.to(0)
        topic = await boot.create_topic("failover", partitions=1, replication_factor=3)
        st = await eventually(lambda: nodes.state(topic, 0), lambda s: len(s.isr) == 3 and s.leader >= 0, 30,
                              "a full ISR")
        offsets = await asyncio.to_thread(produce_idempotent, cluster.bootstrap, topic, 4)
        last = (await raw_batches(await nodes.to(st.leader), topic))[-1]
        assert producer_fields(last)[0] == offsets[-1] == 3
        for f in [r for r in st.replicas if r != st.leader]:
            cluster.kill(f)
            await nodes.drop(f)
            cluster.restart(f)
            await eventually(lambda: nodes.state(topic, st.leader), lambda s: len(s.isr) == 3, 60,
                             f"broker {f} back in the ISR")
        cluster.kill(st.leader)
        await nodes.drop(st.leader)
        st2, nw = await await_leader(cluster, nodes, topic, st, down={st.leader})
        retry = await nw.produce_batch(topic, 0, last)
        assert retry == (NONE, 3), (
            f"the new leader {st2.leader} (restarted since the batch was written) answered the retry with {retry}; "
            f"Kafka: a duplicate at its original offset 3")
        got = await values(nw, topic)
        assert [o for o, _ in got] == [0, 1, 2, 3], f"the retry was appended again: {got}"
    finally:
        await nodes.close()
