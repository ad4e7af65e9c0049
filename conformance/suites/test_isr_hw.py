"""ISR and high watermark: what acks=all, min.insync.replicas and the HW promise, checked over the Kafka protocol.

Observed only through what clients see: Metadata (leader, leader epoch, ISR), Produce answers, the Fetch
``high_watermark``, ListOffsets LATEST and OffsetForLeaderEpoch. The single-broker rules run on every target:

- min.insync.replicas above the replication factor counts as the replication factor (a 1-replica topic with
  min.insync.replicas=2 acknowledges acks=all, Kafka >= 3.7);
- Fetch's high watermark, ListOffsets LATEST and acks=all Produce answers agree, and the HW never goes back
  whatever offset or size a Fetch reads.

The replication rules (HW = min LEO over the ISR, ISR shrink after replica.lag.time.max.ms and expand on catch-up,
NOT_ENOUGH_REPLICAS before the append when the ISR is below min.insync.replicas and after it, the HW held below min ISR (KAFKA-15583), HW monotonic per leader epoch, truncation by leader epoch after failover) need
a target with the ``replication`` capability and broker faults (pause/kill); elsewhere they are skipped with the
capability as reason. They assume ``target.broker_ids`` are Kafka node ids and need 3 brokers.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from kafka import errors as E

from conformance.cluster import Cluster, eventually, state
from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import (
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
)
from conformance.rules import rule
from conformance.wire import EARLIEST, LATEST, Wire

SUITE = "isr_hw"
OFFSET_OUT_OF_RANGE = E.OffsetOutOfRangeError.errno
REQUEST_TIMED_OUT = E.RequestTimedOutError.errno
OFFSET_NOT_AVAILABLE = E.OffsetNotAvailableError.errno

rule("ACKS-ALL-MIN-ISR", "Produce with acks=all to a partition whose ISR is smaller than min.insync.replicas is "
     "refused with NOT_ENOUGH_REPLICAS before anything is appended; acks=1 is not affected",
     "kafka.cluster.Partition.appendRecordsToLeader (inSyncSize < minIsr && requiredAcks == -1 → "
     "NotEnoughReplicasException)", SUITE)
rule("ACKS-ALL-MIN-ISR-ABOVE-RF", "min.insync.replicas larger than the replication factor counts as the replication "
     "factor: acks=all to a 1-replica topic with min.insync.replicas=2 is appended and acknowledged once its one "
     "replica has it (Kafka >= 3.7)", "kafka.cluster.Partition.effectiveMinIsr (min(minInSyncReplicas, replicas); "
     "KAFKA-15583), used by appendRecordsToLeader, checkEnoughReplicasReachOffset and isUnderMinIsr", SUITE)
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

rule("HW-DIVERGING-FOLLOWER", "a follower Fetch answered with a diverging epoch (KIP-320) is not that follower's "
     "position: it does not move the high watermark over records the follower has not fetched",
     "kafka.cluster.Partition.fetchRecords (updateFollowerFetchState only when updateFetchState && "
     "!divergingEpoch.isPresent); Partition.readRecords (diverging when the epoch's end offset < fetch offset)", SUITE)

rule("ISR-REJOIN-AFTER-EMPTY-EPOCH", "a replica that led an epoch in which nothing was written and lost it comes "
     "back as a follower, replicates and rejoins the ISR; acks=all keeps being acknowledged with the full ISR",
     "kafka.log.UnifiedLog.truncateTo (at or past the log end the leader-epoch cache is still truncated from the "
     "end: 'a conflicting epoch entry at the end of the log'); AbstractFetcherThread.truncateOnFetchResponse",
     SUITE)

rule("ISR-REJOIN-BEHIND-LOG-START", "a follower that comes back with a log ending below the leader's log start "
     "(DeleteRecords moved it while the follower was down) starts over at the leader's log start, catches up and "
     "rejoins the ISR", "kafka.server.AbstractFetcherThread.fetchOffsetAndTruncate (leaderStartOffset > "
     "replicaEndOffset → truncateFullyAndStartAt); KIP-107", SUITE)

rule("FETCH-LAST-FETCHED-EPOCH", "a Fetch (v12+) carrying last_fetched_epoch is checked against the leader's "
     "epoch history before anything is read, for a consumer as for a follower: an epoch above every epoch the "
     "leader knows is OFFSET_OUT_OF_RANGE; an epoch that ended before the fetch offset is answered with "
     "diverging_epoch (that epoch, its end offset) and no records; a consistent one reads as usual",
     "kafka.cluster.Partition.readRecords (lastFetchedEpoch: UNDEFINED epoch end offset → "
     "OffsetOutOfRangeException; epochEndOffset.leaderEpoch < fetchEpoch || endOffset < fetchOffset → "
     "divergingEpoch); KIP-320, KIP-595", SUITE)

rule("LIST-OFFSETS-NOT-AVAILABLE", "a new leader whose high watermark is still below the start of its leader epoch "
     "answers a consumer's ListOffsets LATEST with OFFSET_NOT_AVAILABLE (v5+) rather than an end offset below the "
     "one the previous leader answered; once the HW reaches the epoch start it answers the HW",
     "kafka.cluster.Partition.fetchOffsetForTimestamp (leaderEpochStartOffsetOpt > highWatermark → "
     "OffsetNotAvailableException for client requests); ReplicaManager.fetchOffset (v5+; LEADER_NOT_AVAILABLE "
     "before)", SUITE)

rule("ISR-IDLE-FOLLOWER", "a follower at the leader's log end is in sync however long ago it fetched: stopped while "
     "nothing is written it stays in the ISR past replica.lag.time.max.ms (until its broker is fenced), and leaves "
     "once a record is written and it does not fetch it", "kafka.cluster.ReplicaState.isCaughtUp (leaderEndOffset "
     "== logEndOffset || lastCaughtUpTime within replicaMaxLagMs); Partition.getOutOfSyncReplicas", SUITE)

pytestmark = pytest.mark.timeout(300)


async def high_watermark(w: Wire, topic: str, partition: int = 0, leader_epoch: int = -1) -> tuple[int, int]:
    """(error, high watermark) from a Fetch that answers at once (min_bytes 0); ``leader_epoch`` ≥ 0 pins the
    answer to that epoch (KIP-320), so an HW is attributed to the right leader."""
    f = await ops.fetch(w, topic, partition, 0, max_wait_ms=10, min_bytes=0, max_bytes=1024,
                        current_leader_epoch=leader_epoch)
    return f.error, f.high_watermark


# ------------------------------------------------------------------------------------------- single broker


@pytest.mark.rule("ACKS-ALL-MIN-ISR-ABOVE-RF")
async def test_acks_all_min_insync_capped_by_replication_factor(wire: Wire) -> None:
    """A 1-replica topic with min.insync.replicas=2: its ISR (the one replica) is all the replicas there are, so
    Kafka (>= 3.7) takes the effective min ISR as 1 and acks=all is acknowledged (the records are appended).
    (Before Kafka 3.7 this was NOT_ENOUGH_REPLICAS; the refusal below min.insync.replicas is checked on a replicated
    partition, ACKS-ALL-MIN-ISR.)"""
    topic = await wire.create_topic(partitions=1, replication_factor=1, configs={"min.insync.replicas": "2"})
    acked = await wire.produce(topic, count=3, acks=-1, check=False)
    assert (acked.error_code, acked.base_offset) == (NONE, 0), (
        f"acks=all to {topic} (1 replica, min.insync.replicas=2) answered error {acked.error_code} at offset "
        f"{acked.base_offset}; Kafka >= 3.7: NONE at 0 (effective min ISR = min(2, replication factor 1))")
    again = await wire.produce(topic, count=1, acks=-1, check=False)
    assert (again.error_code, again.base_offset) == (NONE, 3), (
        f"a second acks=all batch after the first three records: error {again.error_code}, offset "
        f"{again.base_offset}; Kafka >= 3.7: NONE at 3")


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


@pytest.mark.rule("FETCH-LAST-FETCHED-EPOCH")
async def test_last_fetched_epoch_is_checked(wire: Wire, evidence: Evidence) -> None:
    """A consumer Fetch of 3 records' partition (leader epoch E): last fetched epoch E at offset 3 reads as usual
    (empty, at the end); E + 5 at offset 3 is OFFSET_OUT_OF_RANGE; E at offset 5 (past the end of epoch E, which
    is the log end 3) is diverging (E, 3)."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    p = await wire.produce(topic, count=3, acks=-1)
    assert p.base_offset == 0
    epoch = (await state(wire, topic)).leader_epoch
    seen = {}
    for what, offset, last in (("consistent", 3, epoch), ("unknown", 3, epoch + 5), ("diverging", 5, epoch)):
        r = (await wire.fetch([(topic, 0, offset)], max_wait_ms=0, min_bytes=0, last_fetched_epoch=last)).part(topic)
        seen[what] = (offset, last, r.error_code, r.diverging_epoch, r.offsets)
    evidence.note("fetches (offset, last fetched epoch, error, diverging, offsets)", seen)
    assert seen["consistent"][2:] == (NONE, None, []), (
        f"last fetched epoch {epoch} (the leader's) at the log end 3: error {seen['consistent'][2]}, diverging "
        f"{seen['consistent'][3]}; Kafka reads as usual (nothing yet)")
    assert seen["unknown"][2] == OFFSET_OUT_OF_RANGE, (
        f"last fetched epoch {epoch + 5}, above every epoch the leader knows ({epoch}): error {seen['unknown'][2]}, "
        f"diverging {seen['unknown'][3]}; Kafka: OFFSET_OUT_OF_RANGE ({OFFSET_OUT_OF_RANGE})")
    assert seen["diverging"][2:] == (NONE, (epoch, 3), []), (
        f"last fetched epoch {epoch} at offset 5, past that epoch's end 3: error {seen['diverging'][2]}, diverging "
        f"{seen['diverging'][3]}, records {seen['diverging'][4]}; Kafka: no error, diverging ({epoch}, 3), no records")


# ------------------------------------------------------------------------------------------- replicated


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
@pytest.mark.rule("ACKS-ALL-MIN-ISR", "ACKS-ALL-AFTER-SHRINK")
async def test_acks_all_refused_after_isr_shrinks(cluster: Cluster) -> None:
    """RF=3, min.insync.replicas=3: one follower stalls out of the ISR; acks=all is refused with
    NOT_ENOUGH_REPLICAS and nothing is appended, acks=1 still appends."""
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
    st2, new, waited = await cluster.new_leader(topic, st)
    evidence.note("election", {"old": st.leader, "new": st2.leader, "epoch": st2.leader_epoch, "waited_s": round(waited, 1)})
    assert st2.leader in st.isr, f"no clean leader from ISR {st.isr} after kill: {st2}"
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
    st2, new, waited = await cluster.new_leader(topic, st, among=followers)
    evidence.note("election", {"old": old, "new": st2.leader, "epoch": st2.leader_epoch, "waited_s": round(waited, 1)})
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
    _, back, _ = await cluster.new_leader(topic, st3, among=[old])
    want = [(i, f"a-{i}".encode()) for i in range(n)] + [(n + i, f"c-{i}".encode()) for i in range(3)]
    # Read from the old leader's own log start: Kafka 4.4.0 under load (load 25-45), with the old leader killed
    # (-9) and restarted, answered a consumer Fetch at 0 on it, leader again, with OFFSET_OUT_OF_RANGE (HW -1) for
    # 33-65 s, and still after one more acks=all record was appended there (NONE at 6): offset 0 was below its log
    # start. What it holds from there on must be the new leader's records at the same offsets, without b-0, b-1.
    # Once (final loop, run 7 of 7) its log start was 6 = its HW: it held nothing below the new leader's end, which
    # also keeps no B record. That is accepted (a log start up to the new leader's end), noted in the evidence; a
    # replica that kept B (no truncation by epoch) starts at 0 and serves b-0 at 3, and still fails.

    async def read_back() -> tuple[int, int, ops.Fetched]:
        err, start, _ = await back.list_offsets(topic, 0, EARLIEST)
        return err, start, await ops.fetch(back, topic, 0, max(start, 0), max_wait_ms=10, min_bytes=0)

    (err, start, f), waited = await eventually(
        read_back, lambda r: r[0] == NONE and r[2].error == NONE and r[2].high_watermark >= len(want),
        await cluster.election_bound_s())
    got = f.records
    evidence.note("old_leader_serves", {"log_start": start, "fetch_error": f.error, "hw": f.high_watermark,
                                        "records": [[o, v.decode() if v else v] for o, v in got],
                                        "waited_s": round(waited, 1)})
    assert err == NONE and 0 <= start <= len(want) and f.error == NONE, (
        f"the old leader {old}, leader again: ListOffsets EARLIEST error {err} (log start {start}), Fetch there "
        f"error {f.error}, HW {f.high_watermark} after {waited:.0f} s; it must serve its log from a start no later "
        f"than the new leader's end {len(want)}")
    assert got[:len(want) - start] == want[start:], (
        f"the old leader {old} serves {got} from its log start {start}; after truncating by epoch it must hold "
        f"{want[start:]} there (its acks=1 records b-0, b-1 at {n}.. dropped)")

async def new_leader_before_any_write(c: Cluster, topic: str, st: ops.PartitionMeta) -> ops.PartitionMeta:
    """Move leadership before anything is written: stop the leader until the controller fenced it and elected
    another (broker.session.timeout.ms), then resume it and wait for a full ISR. The new leader's epoch starts at
    offset 0, so epoch ``st.leader_epoch`` ends at 0 in its log."""
    c.pause(st.leader)
    try:
        st2, new, _ = await c.new_leader(topic, st)
    finally:
        c.resume(st.leader)
    st3, _ = await eventually(lambda: state(new, topic), lambda s: len(s.isr) == len(s.replicas), 30)
    assert len(st3.isr) == len(st3.replicas), f"{st.leader} never rejoined the ISR: {st3}"
    return st3


@REPL
@pytest.mark.rule("HW-DIVERGING-FOLLOWER")
async def test_diverging_follower_fetch_does_not_move_hw(cluster: Cluster, evidence: Evidence) -> None:
    """An in-sync follower is stopped while the leader appends with acks=1, so it holds the HW. A Fetch in its name
    (replica id, as a follower sends it) with last fetched epoch E, which ended at offset 0 on this leader, at the
    leader's log end is answered with the diverging epoch (E, 0); the HW must stay where the stopped follower
    holds it."""
    if await cluster.lag_ms() < 3000:
        pytest.skip("replica.lag.time.max.ms < 3 s: the stopped follower leaves the ISR before the HW can be read")
    topic, st0 = await cluster.topic(3)
    st = await new_leader_before_any_write(cluster, topic, st0)
    leader = await cluster.to(st.leader)
    err, base, _ = await ops.produce(leader, topic, 0, [b"x0", b"x1", b"x2"], acks=-1)
    assert err == NONE and base == 0, f"acks=all on the new leader {st.leader}: error {err}, base {base}"
    lagging = next(r for r in st.replicas if r != st.leader)
    cluster.pause(lagging)
    try:
        err, base, _ = await ops.produce(leader, topic, 0, [b"y0", b"y1"], acks=1)
        assert err == NONE and base == 3
        await asyncio.sleep(0.5)                  # the running follower fetches 3..4; the stopped one stays at 3
        err, hw_before = await high_watermark(leader, topic)
        now = await state(leader, topic)
        if lagging not in now.isr or hw_before != 3:
            pytest.skip(f"the stopped follower {lagging} does not hold the HW (ISR {now.isr}, HW {hw_before})")
        r = await leader.fetch([(topic, 0, 5)], max_wait_ms=0, min_bytes=1, replica_id=lagging,
                               current_leader_epoch=st.leader_epoch, last_fetched_epoch=st0.leader_epoch)
        part = r.part(topic, 0)
        evidence.note("diverging_fetch", {"replica_id": lagging, "fetch_offset": 5,
                                          "last_fetched_epoch": st0.leader_epoch, "error": part.error_code,
                                          "diverging_epoch": part.diverging_epoch})
        assert part.error_code == NONE and part.diverging_epoch == (st0.leader_epoch, 0), (
            f"a follower fetch at 5 with last fetched epoch {st0.leader_epoch} (which ends at 0 on leader "
            f"{st.leader}) must be answered with diverging epoch ({st0.leader_epoch}, 0): error {part.error_code}, "
            f"diverging {part.diverging_epoch}")
        await asyncio.sleep(0.3)
        err, hw = await high_watermark(leader, topic)
        evidence.note("hw", {"before": hw_before, "after": hw, "isr": now.isr, "stopped": lagging})
        assert err == NONE and hw == hw_before, (
            f"a diverging fetch in follower {lagging}'s name at offset 5 moved the HW from {hw_before} to {hw}: "
            f"the leader took it as the follower's position, over records {hw_before}..4 it never fetched")
    finally:
        cluster.resume(lagging)


@REPL
@pytest.mark.rule("ISR-REJOIN-AFTER-EMPTY-EPOCH")
async def test_replica_rejoins_after_leading_an_empty_epoch(cluster: Cluster, evidence: Evidence) -> None:
    """Records, then two leaders in a row lose leadership before any write in their epoch (each stopped until the
    controller fenced it and elected another, then resumed). The second comes back as a follower whose last epoch
    the new leader never had; it must truncate that epoch away, rejoin the ISR and replicate: acks=all records
    written afterwards are acknowledged with the full ISR."""
    topic, st0 = await cluster.topic(3, {"min.insync.replicas": "2"})
    leader = await cluster.to(st0.leader)
    err, _, _ = await ops.produce(leader, topic, 0, [f"a{i}".encode() for i in range(10)], acks=-1)
    assert err == NONE
    st1 = await new_leader_before_any_write(cluster, topic, st0)
    st2 = await new_leader_before_any_write(cluster, topic, st1)        # st1.leader led epoch st1 with no write
    evidence.note("leaders", {"epochs": [st0.leader_epoch, st1.leader_epoch, st2.leader_epoch],
                              "leaders": [st0.leader, st1.leader, st2.leader], "isr": st2.isr})
    new = await cluster.to(st2.leader)
    err, base, _ = await ops.produce(new, topic, 0, [f"b{i}".encode() for i in range(5)], acks=-1, timeout_ms=15_000)
    now = await state(new, topic)
    assert err == NONE and base == 10, (
        f"acks=all on leader {st2.leader} (epoch {st2.leader_epoch}) with ISR {now.isr} answered error {err}: "
        f"broker {st1.leader}, which led epoch {st1.leader_epoch} without writing, is in the ISR but does not "
        "replicate")
    # The HW through ListOffsets LATEST: on Kafka 4.4.0 a consumer Fetch at offset 0 on this freshly elected leader
    # answered OFFSET_OUT_OF_RANGE in 2 of 13 runs (a Kafka quirk this rule is not about).
    (err, hw), _ = await eventually(lambda: ops.list_offsets(new, topic, 0, LATEST), lambda r: r[1] == 15, 10)
    assert hw == 15 and len(now.isr) == 3, f"HW {hw} (want 15; ListOffsets error {err}), ISR {now.isr}"


@REPL_KILL
@pytest.mark.rule("ISR-REJOIN-BEHIND-LOG-START")
async def test_follower_behind_the_log_start_rejoins(cluster: Cluster, evidence: Evidence) -> None:
    """A follower is killed; records are written without it and DeleteRecords moves the log start past its log
    end; restarted, it must rejoin the ISR, and acks=all must keep working with it."""
    topic, st = await cluster.topic(3, {"min.insync.replicas": "2"})
    leader = await cluster.to(st.leader)
    err, _, _ = await ops.produce(leader, topic, 0, [f"a{i}".encode() for i in range(5)], acks=-1)
    assert err == NONE
    behind = next(r for r in st.replicas if r != st.leader)
    await cluster.kill(behind)
    st2, _ = await eventually(lambda: state(leader, topic), lambda s: behind not in s.isr, 60)
    assert behind not in st2.isr, f"the killed follower {behind} never left the ISR: {st2}"
    err, base, _ = await ops.produce(leader, topic, 0, [f"b{i}".encode() for i in range(10)], acks=-1)
    assert err == NONE and base == 5, f"acks=all with ISR {st2.isr}: error {err}, base {base}"
    err, low = await leader.delete_records(topic, 0, 12)
    assert err == NONE and low == 12, f"DeleteRecords to 12: error {err}, low watermark {low}"
    cluster.restart(behind)
    st3, waited = await eventually(lambda: state(leader, topic), lambda s: behind in s.isr, 60)
    evidence.note("rejoin", {"follower": behind, "log_end_when_killed": 5, "leader_log_start": 12,
                             "isr": st3.isr, "waited_s": round(waited, 1)})
    assert behind in st3.isr, (f"follower {behind} (log end 5) came back behind the leader's log start 12 and never "
                               f"rejoined the ISR in {waited:.0f} s: {st3}")
    err, base, _ = await ops.produce(leader, topic, 0, [b"c0"], acks=-1)
    assert err == NONE and base == 15, f"acks=all with ISR {st3.isr}: error {err}, base {base}"


@REPL_KILL
@pytest.mark.rule("LIST-OFFSETS-NOT-AVAILABLE")
async def test_list_offsets_not_available_while_hw_lags_epoch_start(cluster: Cluster, evidence: Evidence) -> None:
    """min.insync.replicas=2. One follower is stopped; two acks=1 records reach the leader and the other follower
    (the HW stays 10: the stopped follower is in the ISR). The leader is killed; the follower that has the records
    leads an epoch starting at 12 with HW 10, held below min ISR until the stopped one returns: LATEST must be
    OFFSET_NOT_AVAILABLE meanwhile, then 12."""
    topic, st = await cluster.topic(3, {"min.insync.replicas": "2"})
    leader = await cluster.to(st.leader)
    err, _, _ = await ops.produce(leader, topic, 0, [f"a{i}".encode() for i in range(10)], acks=-1)
    assert err == NONE
    heir, stopped = [r for r in st.replicas if r != st.leader]
    cluster.pause(stopped)
    try:
        err, base, _ = await ops.produce(leader, topic, 0, [b"b0", b"b1"], acks=1)
        assert err == NONE and base == 10
        await asyncio.sleep(0.5)                     # `heir` fetches 10..11; the HW stays 10
        await cluster.kill(st.leader)
        st2, new, _ = await cluster.new_leader(topic, st)
        if st2.leader != heir:
            pytest.skip(f"{heir} did not become the leader (state {st2})")
        err, latest, _ = await new.list_offsets(topic, 0, LATEST)
        evidence.note("while_hw_lags", {"leader": heir, "epoch": st2.leader_epoch, "isr": st2.isr, "error": err,
                                        "offset": latest})
        assert err == OFFSET_NOT_AVAILABLE, (
            f"ListOffsets LATEST on the new leader {heir} (epoch {st2.leader_epoch} starting at 12, HW held at 10 "
            f"with ISR {st2.isr}): error {err}, offset {latest}; Kafka: OFFSET_NOT_AVAILABLE ({OFFSET_NOT_AVAILABLE})")
    finally:
        cluster.resume(stopped)
    (err, latest, _), _ = await eventually(lambda: new.list_offsets(topic, 0, LATEST), lambda r: r[:2] == (NONE, 12),
                                           60)
    assert (err, latest) == (NONE, 12), f"once {stopped} is back the HW reaches 12: error {err}, offset {latest}"


@REPL
@pytest.mark.rule("ISR-IDLE-FOLLOWER")
async def test_idle_follower_stays_in_sync(cluster: Cluster, evidence: Evidence) -> None:
    """All followers at the log end; one is stopped and nothing is written for 1.5 x replica.lag.time.max.ms + 2 s:
    it stays in the ISR. Then one record (acks=1): it leaves within the lag check."""
    lag_ms = await cluster.lag_ms()
    session_ms = await cluster.broker_setting("broker.session.timeout.ms", 9000)
    idle_ms = lag_ms * 1.5 + 2000
    if idle_ms + 1500 > session_ms:
        pytest.skip(f"replica.lag.time.max.ms {lag_ms}: an idle wait of {idle_ms:.0f} ms would outlast "
                    f"broker.session.timeout.ms {session_ms} (the stopped broker would be fenced)")
    topic, st = await cluster.topic(3)
    leader = await cluster.to(st.leader)
    err, _, _ = await ops.produce(leader, topic, 0, [b"x0", b"x1", b"x2"], acks=-1)
    assert err == NONE
    await asyncio.sleep(1.0)                          # every follower fetches at the log end (3)
    idle = next(r for r in st.replicas if r != st.leader)
    cluster.pause(idle)
    await asyncio.sleep(idle_ms / 1000)
    now = await state(leader, topic)
    evidence.note("after_idle", {"stopped": idle, "idle_ms": idle_ms, "lag_ms": lag_ms, "isr": now.isr})
    assert idle in now.isr, (
        f"follower {idle}, stopped at the leader's log end with nothing written for {idle_ms:.0f} ms, left the ISR "
        f"{now.isr}; it is caught up (at the log end) whatever replica.lag.time.max.ms ({lag_ms}) says")
    err, _, _ = await ops.produce(leader, topic, 0, [b"y0"], acks=1)
    assert err == NONE
    st2, waited = await eventually(lambda: state(leader, topic), lambda s: idle not in s.isr, lag_ms * 1.5 / 1000 + 5)
    evidence.timing("leaves_after_a_write", waited * 1000, expect_max_ms=lag_ms * 1.5 + 3000)
    assert idle not in st2.isr, f"after a write the stopped follower {idle} is behind and must leave: {st2}"
