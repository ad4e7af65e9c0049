"""ISR and high watermark: what acks=all, min.insync.replicas and the HW promise, checked over the Kafka protocol.

Observed only through what clients see: Metadata (leader, leader epoch, ISR), Produce answers, the Fetch
``high_watermark``, ListOffsets LATEST and OffsetForLeaderEpoch. The single-broker rules run on every target:

- acks=all is refused with NOT_ENOUGH_REPLICAS, and nothing is appended, when the ISR is smaller than the topic's
  min.insync.replicas (a 1-replica topic with min.insync.replicas=2);
- Fetch's high watermark, ListOffsets LATEST and acks=all Produce answers agree, and the HW never goes back
  whatever offset or size a Fetch reads.

The replication rules (HW = min LEO over the ISR, ISR shrink after replica.lag.time.max.ms and expand on catch-up,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), the HW held below min ISR (KAFKA-15583), HW monotonic per leader epoch, truncation by leader epoch after failover) need
a target with the ``replication`` capability and broker faults (pause/kill); elsewhere they are skipped with the
capability as reason. They assume ``target.broker_ids`` are Kafka node ids and need 3 brokers.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import (
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
)
from conformance.rules import rule
from conformance.wire import LATEST, Wire, unique_name
from fixtures.target import Target

SUITE = "isr_hw"
REQUEST_TIMED_OUT = 7
DEFAULT_LAG_MS = 30_000  # replica.lag.time.max.ms default
T = TypeVar("T")

rule("ACKS-ALL-MIN-ISR", "Produce with acks=all to a partition whose ISR is smaller than min.insync.replicas is "
     "refused with NOT_ENOUGH_REPLICAS before anything is appended; acks=1 is not affected",
     "kafka.cluster.Partition.appendRecordsToLeader (inSyncSize < minIsr && requiredAcks == -1 → "
     "NotEnoughReplicasException)", SUITE)
rule("HW-CONSISTENT-VIEWS", "the Fetch high_watermark, ListOffsets LATEST (read_uncommitted) and the end of the "
     "last acks=all Produce agree on a partition at rest; with no transaction open the last stable offset (Fetch, "
     "read_committed LATEST) equals them", "Partition.fetchOffsetForTimestamp (LATEST → highWatermark for "
     "consumers, lastStableOffset for read_committed); UnifiedLog.lastStableOffset (firstUnstableOffset, else the "
     "HW); DelayedProduce completes once HW ≥ the batch's end (Partition.checkEnoughReplicasReachOffset)", SUITE)
rule("HW-MONOTONIC", "the high watermark a leader reports never decreases within a leader epoch",
     "kafka.cluster.Partition.maybeIncrementLeaderHW (HW only moves forward; UnifiedLog.maybeIncrementHighWatermark)",
     SUITE)
rule("HW-HOLD-BELOW-MIN-ISR", "while the ISR is smaller than min.insync.replicas the leader's high watermark does "
     "not advance, so acks=1 records appended meanwhile stay invisible to consumers until the ISR grows back",
     "KAFKA-15583 (Kafka ≥ 3.7): kafka.cluster.Partition.maybeIncrementLeaderHW returns early while "
     "isUnderMinIsr", SUITE)
rule("HW-MIN-LEO-ISR", "the high watermark is the smallest log end offset over the ISR: a lagging in-sync follower "
     "holds it back until it catches up or leaves the ISR",
     "kafka.cluster.Partition.maybeIncrementLeaderHW (min LEO over ISR / maximal ISR)", SUITE)
rule("ISR-SHRINK-LAG", "a follower that has not caught up for replica.lag.time.max.ms is removed from the ISR, not "
     "earlier", "kafka.cluster.Partition.maybeShrinkIsr / getOutOfSyncReplicas (isCaughtUp: lastCaughtUpTimeMs "
     "within replica.lag.time.max.ms)", SUITE)
rule("ISR-EXPAND", "a follower that caught up with the leader (LEO ≥ HW in the current epoch) is added back to "
     "the ISR", "kafka.cluster.Partition.maybeExpandIsr / isFollowerInSync", SUITE)
rule("ACKS-ALL-AFTER-SHRINK", "once the ISR shrank below min.insync.replicas, acks=all is refused with "
     "NOT_ENOUGH_REPLICAS and nothing is appended", "Partition.appendRecordsToLeader; KIP-966 ISR semantics", SUITE)
rule("ACKS-ALL-AFTER-APPEND", "an acks=all Produce appended while the ISR was large enough but whose ISR then "
     "shrank below min.insync.replicas never answers NONE: NOT_ENOUGH_REPLICAS_AFTER_APPEND (or REQUEST_TIMED_OUT "
     "where the HW stops below min ISR, KAFKA-15583); the records stay in the leader's log",
     "kafka.cluster.Partition.checkEnoughReplicasReachOffset; kafka.server.DelayedProduce", SUITE)
rule("HW-FAILOVER", "after the leader fails, the new leader (chosen from the ISR) keeps every acks=all record at "
     "its offset, and within each leader epoch the HW never decreases", "KIP-101; kafka.cluster.Partition "
     "(clean leader election from ISR); Partition.maybeIncrementLeaderHW", SUITE)
rule("TRUNCATE-BY-EPOCH", "after a failover the old leader truncates to the end offset of its last epoch on the "
     "new leader (OffsetForLeaderEpoch), dropping its unreplicated acks=1 records, so all replicas hold the same "
     "records below the HW", "KIP-101; KIP-279; kafka.server.AbstractFetcherThread.truncateToEpochEndOffsets; "
     "OffsetForLeaderEpoch (end offset of an epoch = start offset of the next)", SUITE)

pytestmark = pytest.mark.timeout(300)


async def high_watermark(w: Wire, topic: str, partition: int = 0, leader_epoch: int = -1) -> tuple[int, int]:
    """(error, high watermark) from a Fetch that answers at once (min_bytes 0); ``leader_epoch`` ≥ 0 pins the
    answer to that epoch (KIP-320), so an HW is attributed to the right leader."""
    f = await ops.fetch(w, topic, partition, 0, max_wait_ms=10, min_bytes=0, max_bytes=1024,
                        current_leader_epoch=leader_epoch)
    return f.error, f.high_watermark


async def state(w: Wire, topic: str, partition: int = 0) -> ops.PartitionMeta:
    _brokers, parts = await ops.metadata(w, [topic])
    return parts[(topic, partition)]


async def eventually(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float,
                     interval_s: float = 0.1) -> tuple[T, float]:
    """Call ``probe`` until ``ok`` holds or the time is up; returns (last value, seconds waited)."""
    t0 = time.monotonic()
    value = await probe()
    while not ok(value) and time.monotonic() - t0 < timeout_s:
        await asyncio.sleep(interval_s)
        value = await probe()
    return value, time.monotonic() - t0


# ------------------------------------------------------------------------------------------- single broker


@pytest.mark.rule("ACKS-ALL-MIN-ISR")
async def test_acks_all_refused_below_min_insync(wire: Wire) -> None:
    """A 1-replica topic with min.insync.replicas=2 can never satisfy acks=all; Kafka refuses before appending."""
    topic = await wire.create_topic(partitions=1, replication_factor=1, configs={"min.insync.replicas": "2"})
    refused = await wire.produce(topic, count=3, acks=-1, check=False)
    assert refused.error_code == NOT_ENOUGH_REPLICAS, (
        f"acks=all to {topic} (1 replica, min.insync.replicas=2) answered error {refused.error_code} at offset "
        f"{refused.base_offset}; Kafka: NOT_ENOUGH_REPLICAS ({NOT_ENOUGH_REPLICAS})")
    err, latest, _ = await wire.list_offsets(topic, 0, LATEST)
    fetched = (await wire.fetch([(topic, 0, 0)], max_wait_ms=10, min_bytes=0)).part(topic)
    assert (err, latest, fetched.offsets) == (NONE, 0, []), (
        f"a refused acks=all produce must append nothing: ListOffsets LATEST {latest} (error {err}), "
        f"records at 0: {fetched.offsets}")
    accepted = await wire.produce(topic, count=2, acks=1, check=False)
    assert (accepted.error_code, accepted.base_offset) == (NONE, 0), \
        f"acks=1 ignores min.insync.replicas: {accepted}"


@pytest.mark.rule("HW-CONSISTENT-VIEWS")
async def test_hw_views_agree(wire: Wire, evidence: Evidence) -> None:
    """Produce batches of varying size; after each, Fetch HW == ListOffsets LATEST == end of the acks=all batch,
    and (no transaction open) the last stable offset, in Fetch and in read_committed ListOffsets LATEST, equals it.
    The HW is read by a Fetch at that end (no records), so the answer cannot depend on what the read returned."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    seen: list[tuple[int, int, int, int, int]] = []
    for count in (1, 3, 1, 7, 2, 5):
        p = await wire.produce(topic, count=count, acks=-1)
        end = p.base_offset + count
        f = (await wire.fetch([(topic, 0, end)], max_wait_ms=10, min_bytes=0)).part(topic, 0)
        lerr, latest, _ = await wire.list_offsets(topic, 0, LATEST)
        cerr, committed, _ = await wire.list_offsets(topic, 0, LATEST, isolation_level=1)
        seen.append((end, f.high_watermark, latest, f.last_stable_offset, committed))
        evidence.note("end_hw_latest_lso_latest-committed", seen)
        assert f.error_code == NONE and lerr == NONE and cerr == NONE, (
            f"Fetch error {f.error_code}, ListOffsets error {lerr} (read_committed: {cerr})")
        assert f.high_watermark == latest == end, (
            f"after an acks=all batch ending at {end}: Fetch high_watermark {f.high_watermark}, ListOffsets LATEST "
            f"{latest} (history end/hw/latest/lso/latest read_committed: {seen})")
        assert f.last_stable_offset == committed == end, (
            f"no transaction is open, so the last stable offset is the HW {end}: Fetch last_stable_offset "
            f"{f.last_stable_offset}, read_committed ListOffsets LATEST {committed} (history: {seen})")


@pytest.mark.rule("HW-MONOTONIC")
async def test_hw_never_decreases(wire: Wire, evidence: Evidence) -> None:
    """The HW is a property of the partition, not of the read: sampled by Fetches at the log start (one batch
    allowed), in the middle and at the end, interleaved with appends of many-record batches, it never goes back."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    samples: list[tuple[str, int, int]] = []        # (what, fetch offset, HW answered), in time order
    for count in (4, 1, 9, 2, 6, 3):
        p = await wire.produce(topic, count=count, size=64, acks=-1)
        end = p.base_offset + count
        for what, offset, max_bytes in (("end", end, 1 << 20), ("start", 0, 1), ("middle", end // 2, 1),
                                        ("start-all", 0, 1 << 20)):
            f = await ops.fetch(wire, topic, 0, offset, max_wait_ms=10, min_bytes=0, max_bytes=max_bytes)
            assert f.error == NONE, f"Fetch at {offset} answered error {f.error}"
            samples.append((what, offset, f.high_watermark))
    evidence.note("hw_samples", samples)
    back = [(a, b) for a, b in zip(samples, samples[1:], strict=False) if b[2] < a[2]]
    assert not back, (f"the high watermark went back between consecutive Fetches (what, fetch offset, HW): "
                      f"{back[:3]}; all samples: {samples}")


# ------------------------------------------------------------------------------------------- replicated


class Cluster:
    """A replicated target seen through the protocol: which broker leads, who is in the ISR, faults by node id.

    Requests go to a live broker chosen per call (never one this check paused or killed), with one Wire per node
    (dropped when the node is killed), so pausing the bootstrap broker does not hang the check.
    """

    def __init__(self, target: Target, wire: Wire) -> None:
        self.target = target
        self.wire = wire
        self.brokers: dict[int, tuple[str, int]] = {}
        self.wires: dict[int, Wire] = {}
        self.paused: set[int] = set()
        self.killed: set[int] = set()

    async def start(self) -> None:
        self.brokers, _ = await ops.metadata(self.wire, [])

    async def to(self, node: int) -> Wire:
        if node not in self.wires:
            host, port = self.brokers[node]
            self.wires[node] = await Wire.connect(f"{host}:{port}", evidence=self.wire.evidence,
                                                  history=self.wire.history)
        return self.wires[node]

    async def observer(self, avoid: set[int] | None = None) -> Wire:
        """A Wire to a live broker not in ``avoid`` (a paused broker would never answer)."""
        node = next(b for b in sorted(self.brokers) if b not in (avoid or set()) | self.paused | self.killed)
        return await self.to(node)

    async def topic(self, replicas: int = 3, configs: dict[str, str] | None = None) -> tuple[str, ops.PartitionMeta]:
        if len(self.brokers) < replicas:   # a fresh cluster's last broker may still be registering
            (self.brokers, _), _ = await eventually(lambda: ops.metadata(self.wire, []),
                                                    lambda m: len(m[0]) >= replicas, 15)
        if len(self.brokers) < replicas:
            pytest.skip(f"target {self.target.name!r} has {len(self.brokers)} brokers; this check needs {replicas}")
        name = unique_name("isr")
        await self.wire.create_topic(name, partitions=1, replication_factor=replicas, configs=configs)
        st, _ = await eventually(lambda: state(self.wire, name), lambda s: len(s.isr) == replicas, 30)
        assert len(st.isr) == replicas, f"{name} never had a full ISR: {st}"
        return name, st

    async def lag_ms(self) -> int:
        """replica.lag.time.max.ms: DescribeConfigs if served, else the target's settings, else Kafka's default."""
        w = await self.observer()
        for node in sorted(self.brokers):
            try:
                found = await ops.broker_configs(w, node, ["replica.lag.time.max.ms"])
            except AssertionError:      # DescribeConfigs refused (connection closed): fall back below
                break
            if found and "replica.lag.time.max.ms" in found:
                return int(found["replica.lag.time.max.ms"])
        settings = self.target.config().get("settings", {})
        return int(settings.get("replica.lag.time.max.ms", DEFAULT_LAG_MS))

    def pause(self, node: int) -> None:
        self.target.pause_broker(node)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        self.target.resume_broker(node)
        self.paused.discard(node)

    async def kill(self, node: int) -> None:
        self.target.kill_broker(node)
        self.killed.add(node)
        dead = self.wires.pop(node, None)
        if dead is not None:
            with contextlib.suppress(Exception):
                await dead.close()

    def restart(self, node: int) -> None:
        self.target.restart(node)
        self.killed.discard(node)

    def heal(self) -> None:
        for node in list(self.paused):
            self.resume(node)
        for node in list(self.killed):
            self.restart(node)

    async def close(self) -> None:
        for w in self.wires.values():
            with contextlib.suppress(Exception):
                await w.close()
        await self.wire.close()


@pytest.fixture
async def cluster(replicated_target: Target, evidence: Evidence) -> Any:
    """A fresh replicated target (faults would hurt other checks) and a Wire to it; every fault undone after."""
    c = Cluster(replicated_target, await Wire.connect(replicated_target.bootstrap, evidence=evidence))
    try:
        await c.start()
        yield c
    finally:
        c.heal()
        await c.close()


REPL = pytest.mark.requires_capability("replication", "pause_broker")
REPL_KILL = pytest.mark.requires_capability("replication", "kill_broker", "pause_broker", "restart")


async def lagging_follower(c: Cluster, topic: str, st: ops.PartitionMeta) -> tuple[Wire, int, int, int]:
    """Pause one follower, then append with acks=1: the follower is in the ISR but behind. Returns (leader wire,
    paused node, HW before, LEO after)."""
    leader = await c.to(st.leader)
    acked = await leader.produce(topic, count=2, acks=-1)
    hw_before = acked.base_offset + 2
    followers = [r for r in st.replicas if r != st.leader]
    # Not the active controller where it shares a broker's JVM: pausing it stalls every AlterPartition until the
    # quorum elects another, so the ISR shrinks late for a reason that is not the lag rule (Kafka 4.4.0, 3 combined
    # nodes: out of the ISR after ~11 s instead of 3-4.5 s).
    ctl = c.target.active_controller()
    follower = next((r for r in followers if r != ctl), followers[0])
    c.pause(follower)
    p = await leader.produce(topic, count=5, acks=1)
    return leader, follower, hw_before, p.base_offset + 5


@REPL
@pytest.mark.rule("HW-MIN-LEO-ISR")
async def test_hw_is_min_leo_over_isr(cluster: Cluster, evidence: Evidence) -> None:
    if await cluster.lag_ms() < 3000:
        pytest.skip("replica.lag.time.max.ms < 3 s: a lagging follower leaves the ISR before the HW can be read")
    topic, st = await cluster.topic(3)
    leader, lagging, hw_before, leo = await lagging_follower(cluster, topic, st)
    await asyncio.sleep(0.5)                   # the other follower fetches the new records meanwhile
    now = await state(leader, topic)
    err, hw = await high_watermark(leader, topic)
    evidence.note("while_in_isr", {"isr": now.isr, "hw": hw, "hw_before": hw_before, "leo": leo})
    if lagging in now.isr:
        assert err == NONE and hw == hw_before, (
            f"follower {lagging} is in the ISR {now.isr} with LEO {hw_before}; the HW must stay {hw_before}, "
            f"leader reports {hw} (leader LEO {leo})")
    st2, _ = await eventually(lambda: state(leader, topic), lambda s: lagging not in s.isr,
                              await cluster.lag_ms() * 1.5 / 1000 + 10)
    assert lagging not in st2.isr, f"follower {lagging} never left the ISR: {st2}"
    (_, hw2), _ = await eventually(lambda: high_watermark(leader, topic), lambda r: r[1] == leo, 5)
    assert hw2 == leo, f"with ISR {st2.isr} (all at LEO {leo}) the HW must be {leo}, got {hw2}"


@REPL
@pytest.mark.rule("ISR-SHRINK-LAG", "ISR-EXPAND")
async def test_isr_shrinks_after_lag_time_and_expands(cluster: Cluster, evidence: Evidence) -> None:
    lag_ms = await cluster.lag_ms()
    topic, st = await cluster.topic(3)
    paused_at = time.monotonic()
    leader, lagging, _, leo = await lagging_follower(cluster, topic, st)
    st2, _ = await eventually(lambda: state(leader, topic), lambda s: lagging not in s.isr, lag_ms * 1.5 / 1000 + 10,
                              interval_s=0.05)
    shrunk_ms = (time.monotonic() - paused_at) * 1000
    evidence.timing("isr_shrink", shrunk_ms, expect_min_ms=lag_ms, expect_max_ms=lag_ms * 1.5 + 5000)
    assert lagging not in st2.isr, f"follower {lagging} still in ISR {st2.isr} {shrunk_ms:.0f} ms after pausing"
    assert shrunk_ms >= lag_ms * 0.9, (
        f"follower {lagging} left the ISR {shrunk_ms:.0f} ms after it stopped; replica.lag.time.max.ms is {lag_ms}")
    # Kafka checks every lag/2 (ReplicaManager.maybeShrinkIsr), so a stalled follower is out by 1.5 × lag; the slack
    # covers the AlterPartition round trip and our metadata polling. Later means something else removed it (e.g.
    # broker fencing after broker.session.timeout.ms), not the lag rule.
    assert shrunk_ms <= lag_ms * 1.5 + 3000, (
        f"follower {lagging} stopped fetching but left the ISR only {shrunk_ms:.0f} ms later; with "
        f"replica.lag.time.max.ms {lag_ms} the leader must remove it within ~{lag_ms * 1.5:.0f} ms")
    cluster.resume(lagging)
    st3, waited = await eventually(lambda: state(leader, topic), lambda s: lagging in s.isr, 30)
    evidence.timing("isr_expand", waited * 1000, expect_max_ms=30_000)
    assert lagging in st3.isr, f"follower {lagging} caught up (leader LEO {leo}) but was not added back: {st3}"


@REPL
@pytest.mark.rule("ACKS-ALL-AFTER-SHRINK")
async def test_acks_all_refused_after_isr_shrinks(cluster: Cluster) -> None:
    topic, st = await cluster.topic(3, {"min.insync.replicas": "3"})
    leader, lagging, _, leo = await lagging_follower(cluster, topic, st)
    st2, _ = await eventually(lambda: state(leader, topic), lambda s: lagging not in s.isr,
                              await cluster.lag_ms() * 1.5 / 1000 + 10)
    assert lagging not in st2.isr
    refused = await leader.produce(topic, count=3, acks=-1, check=False)
    assert refused.error_code == NOT_ENOUGH_REPLICAS, (
        f"acks=all with ISR {st2.isr} < min.insync.replicas 3 answered {refused.error_code}")
    probe = await leader.produce(topic, count=1, acks=1)
    assert probe.base_offset == leo, f"the refused batch was appended: next offset {probe.base_offset}, LEO was {leo}"


@REPL
@pytest.mark.rule("HW-HOLD-BELOW-MIN-ISR")
async def test_hw_held_while_isr_below_min_insync(cluster: Cluster, evidence: Evidence) -> None:
    topic, st = await cluster.topic(3, {"min.insync.replicas": "3"})
    leader, lagging, hw_before, leo = await lagging_follower(cluster, topic, st)
    st2, _ = await eventually(lambda: state(leader, topic), lambda s: lagging not in s.isr,
                              await cluster.lag_ms() * 1.5 / 1000 + 10)
    assert lagging not in st2.isr, f"follower {lagging} never left the ISR: {st2}"
    # The other follower has every record (the ISR minus the paused one is at the LEO): only the min ISR rule
    # keeps the HW where it was. Give it time to fetch and the leader time to (wrongly) advance.
    await asyncio.sleep(1.0)
    p = await leader.produce(topic, count=2, acks=1)
    await asyncio.sleep(1.0)
    err, hw = await high_watermark(leader, topic)
    evidence.note("below_min_isr", {"isr": st2.isr, "hw_before": hw_before, "leo": p.base_offset + 2, "hw": hw})
    assert err == NONE and hw == hw_before, (
        f"ISR {st2.isr} is below min.insync.replicas 3, yet the HW moved from {hw_before} to {hw} (leader LEO "
        f"{p.base_offset + 2}); since KAFKA-15583 it stays until the ISR is large enough again")
    cluster.resume(lagging)
    (_, hw2), waited = await eventually(lambda: high_watermark(leader, topic), lambda r: r[1] == p.base_offset + 2,
                                        30)
    evidence.timing("hw_after_expand", waited * 1000, expect_max_ms=30_000)
    assert hw2 == p.base_offset + 2, f"after {lagging} came back the HW must reach {p.base_offset + 2}: {hw2}"


@REPL
@pytest.mark.rule("ACKS-ALL-AFTER-APPEND")
async def test_acks_all_isr_shrinks_while_waiting(cluster: Cluster, evidence: Evidence) -> None:
    lag_ms = await cluster.lag_ms()
    topic, st = await cluster.topic(3, {"min.insync.replicas": "3"})
    leader = await cluster.to(st.leader)
    follower = next(r for r in st.replicas if r != st.leader)
    cluster.pause(follower)
    t0 = time.monotonic()
    err, base, _ = await ops.produce(leader, topic, 0, [b"after-append"], acks=-1,
                                     timeout_ms=int(lag_ms * 3 + 10_000))
    evidence.timing("acks_all_answer", (time.monotonic() - t0) * 1000, expect_min_ms=lag_ms)
    assert err in (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT), (
        f"acks=all appended with ISR {st.isr} whose follower {follower} stalled answered {err}; Kafka: "
        f"NOT_ENOUGH_REPLICAS_AFTER_APPEND ({NOT_ENOUGH_REPLICAS_AFTER_APPEND}) or REQUEST_TIMED_OUT")
    probe = await leader.produce(topic, count=1, acks=1)
    assert probe.base_offset >= 1, "the acks=all records must stay appended in the leader's log"


@REPL_KILL
@pytest.mark.rule("HW-FAILOVER", "HW-MONOTONIC")
async def test_hw_monotonic_per_epoch_across_failover(cluster: Cluster, evidence: Evidence) -> None:
    topic, st = await cluster.topic(3, {"min.insync.replicas": "2"})
    leader = await cluster.to(st.leader)
    by_epoch: dict[int, list[int]] = {}
    acked: list[tuple[int, bytes]] = []        # a list: two acknowledged writes at one offset is itself a loss
    for i in range(5):
        value = f"before-{i}".encode()
        err, base, _ = await ops.produce(leader, topic, 0, [value], acks=-1)
        assert err == NONE
        acked.append((base, value))
        by_epoch.setdefault(st.leader_epoch, []).append((await high_watermark(leader, topic, 0, st.leader_epoch))[1])
    await cluster.kill(st.leader)
    obs = await cluster.observer({st.leader})
    st2, _ = await eventually(lambda: state(obs, topic),
                              lambda s: s.leader >= 0 and s.leader != st.leader and s.leader_epoch > st.leader_epoch, 60)
    assert st2.leader != st.leader and st2.leader in st.isr, f"no clean leader from ISR {st.isr} after kill: {st2}"
    new = await cluster.to(st2.leader)
    for i in range(5):
        err, base, _ = await ops.produce(new, topic, 0, [f"after-{i}".encode()], acks=-1)
        assert err == NONE, f"acks=all on the new leader {st2.leader}: {err}"
        acked.append((base, f"after-{i}".encode()))
        by_epoch.setdefault(st2.leader_epoch, []).append((await high_watermark(new, topic, 0, st2.leader_epoch))[1])
    evidence.note("hw_by_epoch", by_epoch)
    for epoch, hws in by_epoch.items():
        assert hws == sorted(hws), f"HW went back within leader epoch {epoch}: {hws}"
    got = dict((await ops.fetch(new, topic, 0, 0, max_wait_ms=10, min_bytes=0)).records)
    lost = [(o, v) for o, v in acked if got.get(o) != v]
    assert not lost, f"acks=all records lost or moved after failover to {st2.leader}: {lost} (log: {got})"


@REPL_KILL
@pytest.mark.rule("TRUNCATE-BY-EPOCH")
async def test_old_leader_truncates_by_leader_epoch(cluster: Cluster, evidence: Evidence) -> None:
    """KIP-101 scenario: acks=1 records only the old leader had are dropped when it comes back as a follower."""
    topic, st = await cluster.topic(3, {"min.insync.replicas": "1"})
    old = st.leader
    leader = await cluster.to(old)
    for i in range(3):
        assert (await ops.produce(leader, topic, 0, [f"a-{i}".encode()], acks=-1))[0] == NONE
    n = 3
    followers = [r for r in st.replicas if r != old]
    for f in followers:
        cluster.pause(f)
    # A follower's fetch parked at the leader when it was paused would still carry B into its socket buffer (read
    # on resume); after replica.fetch.wait.max.ms (Kafka: 500 ms) every parked fetch has been answered empty.
    await asyncio.sleep(1.0)
    err, base_b, _ = await ops.produce(leader, topic, 0, [b"b-0", b"b-1"], acks=1)
    assert err == NONE and base_b == n
    await cluster.kill(old)                               # before the followers leave the ISR: a clean election follows
    for f in followers:
        cluster.resume(f)
    obs = await cluster.observer({old})
    st2, _ = await eventually(lambda: state(obs, topic), lambda s: s.leader in followers, 60)
    assert st2.leader in followers, f"no new leader among {followers}: {st2}"
    new = await cluster.to(st2.leader)
    err, base_c, _ = await ops.produce(new, topic, 0, [b"c-0", b"c-1", b"c-2"], acks=-1)
    assert err == NONE and base_c == n, f"the new leader's log must end at {n} (B was never replicated): {base_c}"
    err, epoch, end = await ops.offset_for_leader_epoch(new, topic, 0, st.leader_epoch)
    evidence.note("offset_for_leader_epoch", {"asked": st.leader_epoch, "epoch": epoch, "end_offset": end})
    assert err == NONE and end == n, (
        f"OffsetForLeaderEpoch({st.leader_epoch}) on the new leader answered end offset {end} (epoch {epoch}, "
        f"error {err}); the next epoch starts at {n} (KIP-279)")
    cluster.restart(old)
    st3, _ = await eventually(lambda: state(new, topic), lambda s: old in s.isr, 60)
    assert old in st3.isr, f"the old leader {old} never rejoined the ISR: {st3}"
    assert await ops.elect_preferred_leader(new, topic, 0) in (NONE, 84), "ElectLeaders failed"  # 84: already
    st4, _ = await eventually(lambda: state(new, topic), lambda s: s.leader == old, 30)
    if st4.leader != old:
        pytest.skip(f"could not move leadership back to {old} (preferred replica {st.replicas[0]}): {st4}")
    back = await cluster.to(old)
    got = (await ops.fetch(back, topic, 0, 0, max_wait_ms=10, min_bytes=0)).records
    want = [(i, f"a-{i}".encode()) for i in range(n)] + [(n + i, f"c-{i}".encode()) for i in range(3)]
    assert got[:len(want)] == want, (
        f"the old leader {old} serves {got}; after truncating by epoch it must hold {want} (its acks=1 "
        f"records b-0, b-1 at {n}.. dropped)")
