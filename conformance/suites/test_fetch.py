"""Fetch: Kafka's DelayedFetch rules — when a fetch answers, what it counts, how much it returns, where reads end.

Every check talks the wire protocol (``wire`` fixture) so codes and round-trip times are exact; timings go into
the evidence and become the report's timing plots. Timing windows are generous on the slow side (a loaded CI box
or Docker adds latency) and strict on the rule's side (answering *before* max_wait, or long *after* an append
made the fetch satisfiable, is the divergence).
"""
from __future__ import annotations

import asyncio
import time

import pytest

from conformance.rules import rule

SUITE = "fetch"
OOR = 1  # OFFSET_OUT_OF_RANGE
SLACK_MS = 1500  # how late an answer may be, over the time the rule names, before we call it wrong
EARLY_MS = 1000  # an answer the rule says is due "at once" must come within this
TICK_MS = 5  # Kafka's purgatory timer wheel rounds expirations down to its 1 ms tick; allow a few ms early

rule("FETCH-MAXWAIT-IDLE", "A fetch that cannot reach min_bytes on an idle partition is held for max_wait_ms, "
     "then answered empty without error", "ReplicaManager.fetchMessages (delayed when bytes < fetchMinBytes); "
     "DelayedFetch.onExpiration", SUITE)
rule("FETCH-MAXWAIT-ZERO", "max_wait_ms=0 answers at once with whatever is readable",
     "ReplicaManager.fetchMessages: respond immediately if params.maxWaitMs <= 0", SUITE)
rule("FETCH-MINBYTES-GE", "Readable record bytes >= min_bytes complete a fetch at once; exactly min_bytes suffices, "
     "one byte less parks it", "DelayedFetch.tryComplete Case G (accumulatedSize >= fetchMinBytes); "
     "ReplicaManager.fetchMessages", SUITE)
rule("FETCH-WAKE-ON-APPEND", "A parked fetch completes as soon as an append makes min_bytes readable, not at "
     "max_wait", "Partition.tryCompleteDelayedRequests after appendRecordsToLeader; DelayedFetch.tryComplete "
     "Case G", SUITE)
rule("FETCH-HW-CAP", "Consumers (replica_id -1) only receive records below the high watermark; a fetch between "
     "the HW and the LEO is empty, not an error", "FetchIsolation.HIGH_WATERMARK; Partition.fetchRecords / "
     "UnifiedLog.read(maxOffset = highWatermark)", SUITE)
rule("FETCH-PARTITION-MAX-BYTES", "Each partition returns at most partition_max_bytes, in whole batches, unless its "
     "first batch alone is larger (KIP-74)", "KIP-74; ReplicaManager.readFromLocalLog (partitionFetchSize)", SUITE)
rule("FETCH-MAX-BYTES", "The whole response holds at most max_bytes of records (whole batches), partitions filled "
     "in request order", "KIP-74; ReplicaManager.readFromLocalLog (limitBytes shrinks per partition)", SUITE)
rule("FETCH-FIRST-BATCH-WHOLE", "The first batch is returned whole even when larger than max_bytes and "
     "partition_max_bytes, so a consumer always makes progress", "KIP-74 (minOneMessage until a partition "
     "returned data)", SUITE)
rule("FETCH-OOR-ABOVE-LEO", "A fetch offset above the log end offset is OFFSET_OUT_OF_RANGE, answered at once",
     "UnifiedLog.read / LocalLog.read: startOffset > endOffset -> OffsetOutOfRangeException; "
     "ReplicaManager.readFromLocalLog", SUITE)
rule("FETCH-AT-LEO-EMPTY", "A fetch at exactly the log end offset is valid: empty, no error (held for max_wait)",
     "LocalLog.read: startOffset == endOffset -> empty FetchDataInfo", SUITE)
rule("FETCH-OOR-BELOW-LOG-START", "After DeleteRecords, a fetch below the new log start offset is "
     "OFFSET_OUT_OF_RANGE and the partition reports the new log start offset",
     "UnifiedLog.read (startOffset < logStartOffset); KIP-107 DeleteRecords; DelayedFetch.tryComplete Case C",
     SUITE)
rule("FETCH-MULTI-PARTITION", "min_bytes counts bytes summed over all partitions of a fetch: appends to several "
     "partitions together complete it", "DelayedFetch.tryComplete Case G (accumulatedSize over "
     "fetchPartitionStatus)", SUITE)

pytestmark = pytest.mark.timeout(120)


def _timing(evidence, label: str, measured: float, lo: float | None, hi: float | None, **ctx) -> None:
    evidence.timing(label, measured, expect_min_ms=lo, expect_max_ms=hi, **ctx)


# -- max wait -------------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-MAXWAIT-IDLE")
@pytest.mark.parametrize("max_wait_ms", [300, 800])
async def test_max_wait_honoured_on_idle_partition(wire, evidence, max_wait_ms):
    topic = await wire.create_topic()
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=max_wait_ms, min_bytes=1, label="idle fetch")
    _timing(evidence, f"idle fetch, max_wait {max_wait_ms} ms", res.rtt_ms, max_wait_ms, max_wait_ms + SLACK_MS,
            max_wait_ms=max_wait_ms)
    p = res.part(topic)
    assert p.error_code == 0, f"idle partition answered error {p.error_code}"
    assert p.records_bytes == 0, "an idle partition returned records"
    assert res.rtt_ms >= max_wait_ms - TICK_MS, f"answered after {res.rtt_ms:.0f} ms, before max_wait_ms={max_wait_ms}"
    assert res.rtt_ms <= max_wait_ms + SLACK_MS, f"answered after {res.rtt_ms:.0f} ms, long after max_wait"


@pytest.mark.rule("FETCH-MAXWAIT-ZERO")
async def test_max_wait_zero_answers_at_once_with_data(wire, evidence):
    topic = await wire.create_topic()
    sent = await wire.produce(topic, count=3, size=20)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=0, min_bytes=1 << 20, label="max_wait 0, huge min_bytes")
    _timing(evidence, "max_wait 0", res.rtt_ms, None, EARLY_MS, max_wait_ms=0)
    p = res.part(topic)
    assert res.rtt_ms <= EARLY_MS, f"max_wait_ms=0 took {res.rtt_ms:.0f} ms"
    assert p.error_code == 0
    assert p.offsets == [0, 1, 2], (f"max_wait_ms=0 must return what is readable ({sent.batch_bytes} bytes at "
                                    f"offsets 0-2), got offsets {p.offsets} ({p.records_bytes} bytes)")


# -- min bytes ------------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-MINBYTES-GE")
async def test_min_bytes_equal_completes_at_once(wire, evidence):
    topic = await wire.create_topic()
    sent = await wire.produce(topic, count=2, size=100)
    size = sent.batch_bytes
    evidence.note("batch_bytes", size)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=3000, min_bytes=size, label="min_bytes == readable")
    _timing(evidence, "min_bytes == readable bytes", res.rtt_ms, None, EARLY_MS, max_wait_ms=3000, min_bytes=size)
    p = res.part(topic)
    assert p.records_bytes == size, f"expected the {size}-byte batch, got {p.records_bytes} bytes"
    assert res.rtt_ms <= EARLY_MS, (f"exactly min_bytes ({size}) readable must complete at once (>=), "
                                    f"answered after {res.rtt_ms:.0f} ms of max_wait 3000")


@pytest.mark.rule("FETCH-MINBYTES-GE")
async def test_min_bytes_one_more_parks(wire, evidence):
    topic = await wire.create_topic()
    sent = await wire.produce(topic, count=2, size=100)
    size = sent.batch_bytes
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=500, min_bytes=size + 1, label="min_bytes == readable + 1")
    _timing(evidence, "min_bytes == readable + 1", res.rtt_ms, 500, 500 + SLACK_MS, max_wait_ms=500,
            min_bytes=size + 1)
    p = res.part(topic)
    assert res.rtt_ms >= 500 - TICK_MS, f"{size} bytes < min_bytes {size + 1} yet answered after {res.rtt_ms:.0f} ms"
    assert p.records_bytes == size, f"at max_wait the readable {size} bytes are returned, got {p.records_bytes}"


@pytest.mark.rule("FETCH-MINBYTES-GE", "FETCH-WAKE-ON-APPEND")
async def test_min_bytes_reached_by_append_exactly(wire, wire_factory, evidence):
    """Park with min_bytes = the size of the batch about to be appended: the append alone must complete it."""
    topic = await wire.create_topic()
    async with await wire_factory() as producer:
        first = await producer.produce(topic, count=1, size=64)  # learn the size of such a batch
        size = first.batch_bytes
        pending = wire.submit_fetch([(topic, 0, 1)], max_wait_ms=5000, min_bytes=size, label="parked, min=1 batch")
        await asyncio.sleep(0.3)
        t_append = time.monotonic()
        await producer.produce(topic, count=1, size=64)
        res = await pending
        after_append = (time.monotonic() - t_append) * 1000
    _timing(evidence, "completion after an append of exactly min_bytes", after_append, None, EARLY_MS,
            max_wait_ms=5000, min_bytes=size, fetch_rtt_ms=res.rtt_ms)
    p = res.part(topic)
    assert p.records_bytes == size, f"expected the appended {size}-byte batch, got {p.records_bytes} bytes"
    assert after_append <= EARLY_MS, (f"an append of exactly min_bytes ({size}) did not complete the parked fetch "
                                      f"at once: answered {after_append:.0f} ms after the append (max_wait 5000)")


# -- early completion on append --------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-WAKE-ON-APPEND")
async def test_parked_fetch_wakes_on_append(wire, wire_factory, evidence):
    topic = await wire.create_topic()
    async with await wire_factory() as producer:
        pending = wire.submit_fetch([(topic, 0, 0)], max_wait_ms=5000, min_bytes=1, label="parked fetch")
        await asyncio.sleep(0.3)
        t_append = time.monotonic()
        sent = await producer.produce(topic, count=1, size=10)
        res = await pending
        after_append = (time.monotonic() - t_append) * 1000
    evidence.note("append_rtt_ms", sent.rtt_ms)
    _timing(evidence, "completion after append (max_wait 5000)", after_append, None, EARLY_MS, max_wait_ms=5000,
            fetch_rtt_ms=res.rtt_ms)
    p = res.part(topic)
    assert p.offsets == [0], f"the parked fetch returned offsets {p.offsets}, expected the appended record [0]"
    assert after_append <= EARLY_MS, (f"parked fetch answered {after_append:.0f} ms after the append that made it "
                                      f"satisfiable (fetch rtt {res.rtt_ms:.0f} ms, max_wait 5000)")


# -- high watermark -------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-HW-CAP")
async def test_reads_never_pass_reported_high_watermark(wire, evidence):
    """Any target: every record a consumer gets is below the HW the same answer reports; at the HW it is empty."""
    topic = await wire.create_topic()
    for _ in range(3):
        await wire.produce(topic, count=2, size=10)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1)
    p = res.part(topic)
    evidence.note("high_watermark", p.high_watermark)
    assert p.offsets, "no records returned"
    assert max(p.offsets) < p.high_watermark, (f"records up to offset {max(p.offsets)} returned with "
                                               f"high_watermark {p.high_watermark}")
    at_hw = (await wire.fetch([(topic, 0, p.high_watermark)], max_wait_ms=100, min_bytes=1)).part(topic)
    assert at_hw.error_code == 0 and at_hw.records_bytes == 0, (
        f"fetch at the HW ({p.high_watermark}): error {at_hw.error_code}, {at_hw.records_bytes} bytes")


@pytest.mark.rule("FETCH-HW-CAP")
@pytest.mark.requires_capability("replication", "pause_broker")
async def test_consumer_read_capped_at_hw_while_follower_lags(replicated_target, wire_factory, evidence):
    """HW < LEO needs a follower that has not caught up: pause one, append with acks=1, read as a consumer."""
    target = replicated_target
    async with await wire_factory(target=target) as wire:
        await _read_capped_at_hw(target, wire, evidence)


async def _read_capped_at_hw(target, wire, evidence) -> None:
    topic = await wire.create_topic(partitions=1, replication_factor=len(target.broker_ids))
    md = await wire.metadata([topic])
    part = md[topic]["partitions"][0]
    follower = next(r for r in part["replicas"] if r != part["leader"])
    leader = await wire.leader(topic)
    await leader.produce(topic, count=1, size=10)  # committed: every replica has it
    await asyncio.sleep(0.5)
    target.pause_broker(follower)
    try:
        await leader.produce(topic, count=3, size=10, acks=1)  # in the leader's log, not on the paused follower
        _e, hw_offset, _ = await leader.list_offsets(topic, 0, -1)
        res = await leader.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1)
        p = res.part(topic)
        evidence.note("leader_view", {"high_watermark": p.high_watermark, "list_offsets_latest": hw_offset})
        assert p.high_watermark < 4, f"HW {p.high_watermark} moved past the paused follower's log (LEO 4)"
        assert all(o < p.high_watermark for o in p.offsets), f"consumer got {p.offsets} past HW {p.high_watermark}"
        between = (await leader.fetch([(topic, 0, 3)], max_wait_ms=0, min_bytes=1)).part(topic)
        assert between.error_code == 0 and between.records_bytes == 0, (
            f"fetch between HW and LEO: error {between.error_code}, {between.records_bytes} bytes")
    finally:
        target.resume_broker(follower)


# -- sizes ----------------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-PARTITION-MAX-BYTES")
async def test_partition_max_bytes_caps_in_whole_batches(wire, evidence):
    topic = await wire.create_topic()
    sizes = [(await wire.produce(topic, count=1, size=200)).batch_bytes for _ in range(5)]
    cap = sizes[0] * 2 + sizes[0] // 2  # room for two whole batches and half a third
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1, partition_max_bytes=cap)
    p = res.part(topic)
    evidence.note("batch_bytes", sizes[0])
    evidence.note("partition_max_bytes", cap)
    assert p.records_bytes <= cap, (f"partition_max_bytes {cap} (2.5 batches of {sizes[0]}) but the partition "
                                    f"returned {p.records_bytes} bytes ({len(p.batches)} batches)")
    assert [b.base_offset for b in p.batches] == [0, 1], (
        f"expected exactly the two whole batches that fit (offsets 0, 1), got "
        f"{[(b.base_offset, b.size) for b in p.batches]} ({p.records_bytes} bytes)")


@pytest.mark.rule("FETCH-MAX-BYTES")
async def test_max_bytes_caps_the_response(wire, evidence):
    topic = await wire.create_topic(partitions=2)
    size = 0
    for part in (0, 1):
        for _ in range(3):
            size = (await wire.produce(topic, part, count=1, size=200)).batch_bytes
    max_bytes = size * 3 + size // 2  # 3.5 batches: all of p0 (3), nothing whole left for p1
    res = await wire.fetch([(topic, 0, 0), (topic, 1, 0)], max_wait_ms=100, min_bytes=1, max_bytes=max_bytes)
    evidence.note("batch_bytes", size)
    evidence.note("max_bytes", max_bytes)
    got = {p.partition: [b.base_offset for b in p.batches] for p in res.partitions}
    assert res.records_bytes <= max_bytes, (f"max_bytes {max_bytes} but the response holds {res.records_bytes} "
                                            f"bytes: {got}")
    assert got.get(0) == [0, 1, 2], f"the first partition in request order fills first; got {got}"
    assert not got.get(1), f"no whole batch of partition 1 fits the remaining budget; got {got}"


@pytest.mark.rule("FETCH-FIRST-BATCH-WHOLE")
async def test_first_batch_returned_whole_when_larger_than_limits(wire, evidence):
    topic = await wire.create_topic()
    big = await wire.produce(topic, count=4, size=1000)
    await wire.produce(topic, count=1, size=10)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1, max_bytes=100, partition_max_bytes=100)
    p = res.part(topic)
    evidence.note("first_batch_bytes", big.batch_bytes)
    assert p.error_code == 0
    assert p.batches and p.batches[0].base_offset == 0 and p.batches[0].size == big.batch_bytes, (
        f"the first batch ({big.batch_bytes} bytes > max_bytes 100) must come back whole; got "
        f"{p.records_bytes} bytes, batches {[(b.base_offset, b.size) for b in p.batches]}")
    assert len(p.batches) == 1, "only the first batch may exceed the limits"


# -- out of range ---------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-OOR-ABOVE-LEO")
async def test_fetch_above_leo_is_out_of_range(wire, evidence):
    topic = await wire.create_topic()
    await wire.produce(topic, count=3, size=10)
    res = await wire.fetch([(topic, 0, 4)], max_wait_ms=2000, min_bytes=1, label="offset LEO+1")
    p = res.part(topic)
    _timing(evidence, "fetch at LEO+1 (max_wait 2000)", res.rtt_ms, None, EARLY_MS, max_wait_ms=2000)
    assert p.error_code == OOR, f"fetch at LEO+1 (LEO 3): error {p.error_code}, expected OFFSET_OUT_OF_RANGE (1)"
    assert res.rtt_ms <= EARLY_MS, f"an error answers at once; took {res.rtt_ms:.0f} ms"


@pytest.mark.rule("FETCH-AT-LEO-EMPTY")
async def test_fetch_at_leo_is_empty_not_error(wire, evidence):
    topic = await wire.create_topic()
    await wire.produce(topic, count=3, size=10)
    res = await wire.fetch([(topic, 0, 3)], max_wait_ms=400, min_bytes=1, label="offset == LEO")
    p = res.part(topic)
    _timing(evidence, "fetch at LEO (max_wait 400)", res.rtt_ms, 400, 400 + SLACK_MS, max_wait_ms=400)
    assert p.error_code == 0, f"fetch at the LEO: error {p.error_code}, expected none"
    assert p.records_bytes == 0
    assert res.rtt_ms >= 400 - TICK_MS, f"nothing readable at the LEO, yet answered after {res.rtt_ms:.0f} ms (< max_wait)"


@pytest.mark.rule("FETCH-OOR-BELOW-LOG-START")
async def test_fetch_below_log_start_after_delete_records(wire, evidence):
    topic = await wire.create_topic()
    for _ in range(5):
        await wire.produce(topic, count=1, size=10)
    err, low = await wire.delete_records(topic, 0, 3)
    assert err == 0 and low == 3, f"DeleteRecords to offset 3: error {err}, low_watermark {low}"
    below = await wire.fetch([(topic, 0, 1)], max_wait_ms=2000, min_bytes=1, label="below log start")
    pb = below.part(topic)
    _timing(evidence, "fetch below log start (max_wait 2000)", below.rtt_ms, None, EARLY_MS, max_wait_ms=2000)
    assert pb.error_code == OOR, f"fetch at 1 after DeleteRecords(3): error {pb.error_code}, expected 1"
    assert below.rtt_ms <= EARLY_MS, f"an error answers at once; took {below.rtt_ms:.0f} ms"
    at = (await wire.fetch([(topic, 0, 3)], max_wait_ms=100, min_bytes=1)).part(topic)
    assert at.error_code == 0 and at.offsets and at.offsets[0] == 3, (
        f"fetch at the new log start 3: error {at.error_code}, offsets {at.offsets}")
    assert at.log_start_offset == 3, f"log_start_offset reported {at.log_start_offset}, expected 3"


@pytest.mark.rule("FETCH-OOR-BELOW-LOG-START")
async def test_parked_fetch_answers_when_log_start_passes_it(wire, wire_factory, evidence):
    """Case C: DeleteRecords moving the log start past a parked fetch's offset completes it with the error."""
    topic = await wire.create_topic()
    await wire.produce(topic, count=3, size=10)
    async with await wire_factory() as admin:
        pending = wire.submit_fetch([(topic, 0, 3)], max_wait_ms=5000, min_bytes=1 << 20, label="parked, big min")
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        await admin.produce(topic, count=1, size=10)  # LEO 4
        err, low = await admin.delete_records(topic, 0, 4)  # log start 4 > parked offset 3
        res = await pending
        after = (time.monotonic() - t0) * 1000
    _timing(evidence, "parked fetch after log start passed it", after, None, EARLY_MS, max_wait_ms=5000)
    assert err == 0 and low == 4, f"DeleteRecords to 4: error {err}, low_watermark {low}"
    p = res.part(topic)
    assert after <= EARLY_MS, f"the log start passed the parked offset, yet it answered after {after:.0f} ms"
    assert p.error_code == OOR, f"parked fetch below the new log start: error {p.error_code}, expected 1"


# -- several partitions -----------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-MULTI-PARTITION")
async def test_min_bytes_accumulates_over_partitions(wire, wire_factory, evidence):
    topic = await wire.create_topic(partitions=2)
    async with await wire_factory() as producer:
        size = (await producer.produce(topic, 0, count=1, size=100)).batch_bytes  # p0 at 1, p1 at 0
        need = size + size // 2  # one partition's batch is not enough; both together are
        res = await wire.fetch([(topic, 0, 0), (topic, 1, 0)], max_wait_ms=300, min_bytes=need,
                               label="only p0 has data")
        assert res.rtt_ms >= 300 - TICK_MS, f"{size} bytes < min_bytes {need}, yet answered after {res.rtt_ms:.0f} ms"
        pending = wire.submit_fetch([(topic, 0, 1), (topic, 1, 0)], max_wait_ms=5000, min_bytes=need,
                                    label="parked on p0+p1")
        await asyncio.sleep(0.3)
        await producer.produce(topic, 0, count=1, size=100)  # p0 alone: size bytes < need
        await asyncio.sleep(0.5)
        t_second = time.monotonic()
        await producer.produce(topic, 1, count=1, size=100)  # p0 + p1: 2*size >= need
        res = await pending
        after = (time.monotonic() - t_second) * 1000
    _timing(evidence, "completion after the 2nd partition's append", after, None, EARLY_MS, max_wait_ms=5000,
            min_bytes=need, fetch_rtt_ms=res.rtt_ms)
    got = {p.partition: p.offsets for p in res.partitions}
    assert res.rtt_ms >= 700, (f"completed after {res.rtt_ms:.0f} ms, before the second partition had data "
                               f"(one batch of {size} < min_bytes {need})")
    assert got == {0: [1], 1: [0]}, f"expected both partitions' new records, got {got}"
    assert after <= EARLY_MS, (f"bytes over both partitions reached min_bytes {need}, yet answered "
                               f"{after:.0f} ms later (max_wait 5000)")
