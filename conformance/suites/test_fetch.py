"""Fetch: Kafka's DelayedFetch rules — when a fetch answers, what it counts, how much it returns, where reads end.

Every check talks the wire protocol (``wire`` fixture) so codes and round-trip times are exact; timings go into
the evidence and become the report's timing plots. Timing windows are generous on the slow side (a loaded CI box
or Docker adds latency) and strict on the rule's side (answering *before* max_wait, or long *after* an append
made the fetch satisfiable, is the divergence).

Boundary checks (ids name the boundary: ``zero``, ``first-1``, ``leo+1``, ``int32-max`` ...) use realistic logs —
batches of 10-20 records, one gzip — and measure the batch sizes the target stores instead of assuming them;
size expectations come from a small model of Kafka's readFromLocalLog (``_kafka_whole_batches``). Each rule has a
reference-broker fault switch that breaks it (conformance/coverage.py BREAKS), so every check here is shown able
to fail.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from conformance.rules import rule
from conformance.wire import GZIP, PartitionFetch

SUITE = "fetch"
OOR = 1  # OFFSET_OUT_OF_RANGE
SLACK_MS = 1500  # how late an answer may be, over the time the rule names, before we call it wrong
EARLY_MS = 1000  # an answer the rule says is due "at once" must come within this
TICK_MS = 5  # Kafka's purgatory timer wheel rounds expirations down to its 1 ms tick; allow a few ms early
READ_MS = 200  # max_wait of reads with data readable (they answer at once; max_wait 0 is its own rule's business)
PARK_MS = 400  # max_wait of boundary checks that must park: long enough to tell parked from answered at once
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
# Realistic batch shapes for boundary checks: (records, payload bytes each, codec). Offsets: 0-9, 10-29 (gzip),
# 30-39, 40-49.
SHAPES = ((10, 60, 0), (20, 60, GZIP), (10, 60, 0), (10, 60, 0))

rule("FETCH-MAXWAIT-IDLE", "A fetch that cannot reach min_bytes on an idle partition is held for max_wait_ms, "
     "then answered empty without error", "ReplicaManager.fetchMessages (delayed when bytes < fetchMinBytes); "
     "DelayedFetch.onExpiration", SUITE)
rule("FETCH-MAXWAIT-ZERO", "max_wait_ms <= 0 (0 or negative) answers at once with whatever is readable",
     "ReplicaManager.fetchMessages: respond immediately if params.maxWaitMs <= 0", SUITE)
rule("FETCH-MINBYTES-GE", "Readable record bytes >= min_bytes complete a fetch at once; exactly min_bytes suffices, "
     "one byte less parks it", "DelayedFetch.tryComplete Case G (accumulatedSize >= fetchMinBytes); "
     "ReplicaManager.fetchMessages", SUITE)
rule("FETCH-MINBYTES-PARTITION-CAP", "Toward min_bytes a partition counts at most its partition_max_bytes: when "
     "the caps sum to less than min_bytes the fetch waits for max_wait, however much the log holds",
     "DelayedFetch.tryComplete (bytesAvailable = min(positionDiff, fetchInfo.maxBytes)); ReplicaManager."
     "fetchMessages (bytesReadable counts what was read)", SUITE)
rule("FETCH-WAKE-ON-APPEND", "A parked fetch completes as soon as an append makes min_bytes readable, not at "
     "max_wait", "Partition.tryCompleteDelayedRequests after appendRecordsToLeader; DelayedFetch.tryComplete "
     "Case G", SUITE)
rule("FETCH-HW-CAP", "Consumers (replica_id -1) only receive records below the high watermark; a fetch between "
     "the HW and the LEO is empty, not an error", "FetchIsolation.HIGH_WATERMARK; Partition.fetchRecords / "
     "UnifiedLog.read(maxOffset = highWatermark)", SUITE)
rule("FETCH-PARTITION-MAX-BYTES", "Each partition returns at most partition_max_bytes of records (a trailing "
     "batch may be cut, clients drop it), unless its first batch alone is larger (KIP-74)",
     "KIP-74; ReplicaManager.readFromLocalLog (partitionFetchSize); LogSegment.read (log.slice)", SUITE)
rule("FETCH-MAX-BYTES", "The whole response holds at most max_bytes of records, partitions filled in request order: "
     "each partition's bytes (a cut trailing batch included) shrink what later ones may return",
     "KIP-74; ReplicaManager.readFromLocalLog (limitBytes shrinks per partition)", SUITE)
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
     "UnifiedLog.read (startOffset < logStartOffset); KIP-107 DeleteRecords (a parked fetch is answered at expiry: "
     "DelayedFetch.tryComplete has no case for a moved log start)",
     SUITE)
rule("FETCH-MID-BATCH", "A fetch offset inside a batch (compressed or not) returns that batch whole, from its "
     "base offset; records below the fetch offset are the client's to skip",
     "LogSegment.read / LogSegment.translateOffset (the batch whose last offset >= the fetch offset); "
     "consumer CompletedFetch skips records below the fetch position", SUITE)
rule("FETCH-MULTI-PARTITION", "min_bytes counts bytes summed over all partitions of a fetch: appends to several "
     "partitions together complete it", "DelayedFetch.tryComplete Case G (accumulatedSize over "
     "fetchPartitionStatus)", SUITE)

pytestmark = pytest.mark.timeout(120)


def _timing(evidence, label: str, measured: float, lo: float | None, hi: float | None, **ctx) -> None:
    evidence.timing(label, measured, expect_min_ms=lo, expect_max_ms=hi, **ctx)


async def _fill(wire, topic: str, shapes, partition: int = 0) -> PartitionFetch:
    """Append one batch per shape, then read the partition back whole: the batch sizes the checks reason about
    are the target's (measured), not the ones we sent."""
    for count, size, codec in shapes:
        await wire.produce(topic, partition, count=count, size=size, compression=codec)
    p = (await wire.fetch([(topic, partition, 0)], max_wait_ms=500, min_bytes=1, label="layout")).part(topic, partition)
    want = sum(count for count, _s, _c in shapes)
    assert p.error_code == 0 and p.offsets == list(range(want)), (
        f"setup: {len(shapes)} batches ({want} records) appended, a full read returned error {p.error_code}, "
        f"offsets {p.offsets[:5]}..{p.offsets[-3:]}")
    return p


def _bytes(spec, sizes: list[int]) -> int:
    """A byte limit: an int as is, or (k, delta) = the first k batch sizes summed, plus delta."""
    if isinstance(spec, int):
        return spec
    k, delta = spec
    return sum(sizes[:k]) + delta


def _kafka_whole_batches(layouts: list[list[int]], max_bytes: int, caps: list[int]) -> list[int]:
    """Whole batches per partition (request order) Kafka's ReplicaManager.readFromLocalLog returns: each
    partition reads min(partition_max_bytes, bytes left), at least its first batch until a partition returned
    data (minOneMessage, KIP-74); the log is sliced by bytes, so a cut trailing batch still uses up the budget."""
    left, min_one, out = max_bytes, True, []
    for sizes, cap in zip(layouts, caps, strict=True):
        n = min(cap, left)
        if min_one and sizes:
            n = max(n, sizes[0])
        sliced = min(n, sum(sizes))
        whole = 0
        while whole < len(sizes) and sum(sizes[:whole + 1]) <= sliced:
            whole += 1
        if sliced:
            min_one = False
        left = max(0, left - sliced)
        out.append(whole)
    return out


# -- max wait -------------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-MAXWAIT-IDLE")
@pytest.mark.parametrize("max_wait_ms", [1, 50, 300, 800])
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
@pytest.mark.parametrize("max_wait_ms", [0, -1], ids=["zero", "negative"])
async def test_max_wait_zero_answers_at_once_with_data(wire, evidence, max_wait_ms):
    topic = await wire.create_topic()
    sent = await wire.produce(topic, count=3, size=20)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=max_wait_ms, min_bytes=1 << 20,
                           label=f"max_wait {max_wait_ms}, huge min_bytes")
    _timing(evidence, f"max_wait {max_wait_ms}", res.rtt_ms, None, EARLY_MS, max_wait_ms=max_wait_ms)
    p = res.part(topic)
    assert res.rtt_ms <= EARLY_MS, f"max_wait_ms={max_wait_ms} took {res.rtt_ms:.0f} ms"
    assert p.error_code == 0
    assert p.offsets == [0, 1, 2], (f"max_wait_ms={max_wait_ms} must return what is readable ({sent.batch_bytes} "
                                    f"bytes at offsets 0-2), got offsets {p.offsets} ({p.records_bytes} bytes)")


@pytest.mark.rule("FETCH-MAXWAIT-ZERO")
async def test_max_wait_zero_answers_at_once_on_empty_log(wire, evidence):
    """Nothing readable and min_bytes 1: with max_wait 0 the empty answer still comes at once."""
    topic = await wire.create_topic()
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=0, min_bytes=1, label="max_wait 0, empty log")
    _timing(evidence, "max_wait 0, empty log", res.rtt_ms, None, EARLY_MS, max_wait_ms=0)
    p = res.part(topic)
    assert p.error_code == 0 and p.records_bytes == 0, f"error {p.error_code}, {p.records_bytes} bytes"
    assert res.rtt_ms <= EARLY_MS, f"max_wait_ms=0 on an empty log took {res.rtt_ms:.0f} ms"


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


MIN_BYTES_CASES = [  # (id, min_bytes from the readable bytes A, parks until max_wait?)
    ("zero", lambda a: 0, False), ("one", lambda a: 1, False), ("available-1", lambda a: a - 1, False),
    ("exactly-available", lambda a: a, False), ("available+1", lambda a: a + 1, True),
    ("int32-max", lambda a: INT32_MAX, True)]


@pytest.mark.rule("FETCH-MINBYTES-GE")
@pytest.mark.parametrize(("min_bytes_of", "parks"), [c[1:] for c in MIN_BYTES_CASES],
                         ids=[c[0] for c in MIN_BYTES_CASES])
async def test_min_bytes_boundaries(wire, evidence, min_bytes_of, parks):
    """Three batches (one gzip) readable: min_bytes up to their size answers at once, above it parks to max_wait
    and then returns what is readable."""
    topic = await wire.create_topic()
    layout = await _fill(wire, topic, SHAPES[:3])
    avail = sum(b.size for b in layout.batches)
    min_bytes = min_bytes_of(avail)
    wait = PARK_MS if parks else 3000
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=wait, min_bytes=min_bytes, label=f"min_bytes {min_bytes}")
    evidence.note("readable_bytes", avail)
    p = res.part(topic)
    if parks:
        _timing(evidence, f"min_bytes {min_bytes} > readable {avail}", res.rtt_ms, wait, wait + SLACK_MS,
                max_wait_ms=wait, min_bytes=min_bytes)
        assert res.rtt_ms >= wait - TICK_MS, (f"{avail} readable bytes < min_bytes {min_bytes}, yet answered after "
                                              f"{res.rtt_ms:.0f} ms (max_wait {wait})")
        assert res.rtt_ms <= wait + SLACK_MS, f"answered {res.rtt_ms:.0f} ms after a max_wait of {wait}"
    else:
        _timing(evidence, f"min_bytes {min_bytes} <= readable {avail}", res.rtt_ms, None, EARLY_MS,
                max_wait_ms=wait, min_bytes=min_bytes)
        assert res.rtt_ms <= EARLY_MS, (f"{avail} readable bytes >= min_bytes {min_bytes} must answer at once, "
                                        f"answered after {res.rtt_ms:.0f} ms (max_wait {wait})")
    assert p.error_code == 0 and p.records_bytes == avail, (
        f"expected all {avail} readable bytes, got error {p.error_code}, {p.records_bytes} bytes")


@pytest.mark.rule("FETCH-MINBYTES-GE")
async def test_min_bytes_zero_on_empty_log_answers_at_once(wire, evidence):
    """0 readable bytes >= min_bytes 0: even an empty log answers at once (ReplicaManager.fetchMessages)."""
    topic = await wire.create_topic()
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=3000, min_bytes=0, label="min_bytes 0, empty log")
    _timing(evidence, "min_bytes 0, empty log", res.rtt_ms, None, EARLY_MS, max_wait_ms=3000, min_bytes=0)
    p = res.part(topic)
    assert p.error_code == 0 and p.records_bytes == 0, f"error {p.error_code}, {p.records_bytes} bytes"
    assert res.rtt_ms <= EARLY_MS, f"min_bytes 0 must answer at once; took {res.rtt_ms:.0f} ms of max_wait 3000"


@pytest.mark.parametrize(("cap_batches", "parks"), [
    # (a broker that ignores partition_max_bytes in its reads counts every byte too: FETCH-PARTITION-MAX-BYTES)
    pytest.param(1, True, id="cap-below-min_bytes",
                 marks=pytest.mark.rule("FETCH-MINBYTES-PARTITION-CAP", "FETCH-PARTITION-MAX-BYTES")),
    pytest.param(2, False, id="cap-equals-min_bytes",
                 marks=pytest.mark.rule("FETCH-MINBYTES-PARTITION-CAP", "FETCH-MINBYTES-GE"))])
async def test_min_bytes_capped_by_partition_max_bytes(wire, evidence, cap_batches, parks):
    """Four batches readable, min_bytes = the first two: with partition_max_bytes one batch the partition counts
    one batch and the fetch waits for max_wait (then returns that batch); with two batches it answers at once."""
    topic = await wire.create_topic()
    layout = (await _fill(wire, topic, SHAPES)).batches
    sizes = [b.size for b in layout]
    min_bytes, cap = sum(sizes[:2]), sum(sizes[:cap_batches])
    wait = PARK_MS if parks else 3000
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=wait, min_bytes=min_bytes, partition_max_bytes=cap,
                           label=f"min_bytes {min_bytes}, partition_max_bytes {cap}")
    p = res.part(topic)
    evidence.note("batch_sizes", sizes)
    if parks:
        _timing(evidence, "partition cap < min_bytes", res.rtt_ms, wait, wait + SLACK_MS, max_wait_ms=wait)
        assert res.rtt_ms >= wait - TICK_MS, (
            f"partition_max_bytes {cap} < min_bytes {min_bytes}: the partition counts at most {cap} bytes, yet the "
            f"fetch answered after {res.rtt_ms:.0f} ms (< max_wait {wait}) although {sum(sizes)} bytes are in the log")
    else:
        _timing(evidence, "partition cap == min_bytes", res.rtt_ms, None, EARLY_MS, max_wait_ms=wait)
        assert res.rtt_ms <= EARLY_MS, (f"partition_max_bytes {cap} == min_bytes: answered after {res.rtt_ms:.0f} ms "
                                        f"(max_wait {wait})")
    # (how much comes back is FETCH-PARTITION-MAX-BYTES' business; here: the readable data, from the first batch)
    assert p.error_code == 0 and p.batches and p.batches[0].base_offset == 0, (
        f"expected the readable batches from offset 0, got error {p.error_code}, "
        f"{[(b.base_offset, b.size) for b in p.batches]}")


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
    """Any target: every record a consumer gets is below the HW the same answer reports, and that HW is the end of
    what acks=all acknowledged."""
    topic = await wire.create_topic()
    for _ in range(3):
        await wire.produce(topic, count=2, size=10)
    res = await wire.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1)
    p = res.part(topic)
    evidence.note("high_watermark", p.high_watermark)
    assert p.offsets, "no records returned"
    assert max(p.offsets) < p.high_watermark, (f"records up to offset {max(p.offsets)} returned with "
                                               f"high_watermark {p.high_watermark}")
    # Six records acknowledged with acks=all and nothing else written: the HW is exactly their end (it is at least
    # that, or the acks lied, and never past the LEO). No fetch at the HW here: with every replica caught up the HW
    # is the LEO, and an empty answer there is FETCH-AT-LEO-EMPTY's case (at max_wait 0 FETCH-MAXWAIT-ZERO's); reads
    # at an HW below the LEO are test_consumer_read_capped_at_hw_while_follower_lags.
    assert p.high_watermark == 6, (f"six records acknowledged with acks=all and nothing more written, yet the "
                                   f"fetch answer reports high_watermark {p.high_watermark} (expected 6)")


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
        hw = p.high_watermark
        for off, what in ((hw, "at the HW"), (3, "between the HW and the LEO"), (4, "at the LEO")):
            if off < hw:
                continue
            q = (await leader.fetch([(topic, 0, off)], max_wait_ms=0, min_bytes=1, label=f"{what}")).part(topic)
            assert q.error_code == 0 and q.records_bytes == 0, (
                f"consumer fetch {what} (offset {off}, HW {hw}, LEO 4): error {q.error_code}, offsets {q.offsets}; "
                f"expected empty, no error")
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


PMB_CASES = [  # (id, batch index the fetch starts at, partition_max_bytes: int or (k batches, +delta bytes))
    ("0", 0, 0), ("1", 0, 1), ("first-1", 0, (1, -1)), ("first", 0, (1, 0)), ("first+1", 0, (1, 1)),
    ("two-1", 0, (2, -1)), ("two", 0, (2, 0)), ("two+1", 0, (2, 1)), ("int32-max", 0, INT32_MAX),
    ("gzip-first-1", 1, (1, -1)), ("gzip-first", 1, (1, 0))]


@pytest.mark.rule("FETCH-PARTITION-MAX-BYTES")
@pytest.mark.parametrize(("start", "cap_spec"), [c[1:] for c in PMB_CASES], ids=[c[0] for c in PMB_CASES])
async def test_partition_max_bytes_boundaries(wire, evidence, start, cap_spec):
    """Four batches of 10-20 records (the second gzip): the partition returns the whole batches that fit in
    partition_max_bytes and no more bytes than it; below the first batch's size, at most that batch (whether it
    comes is FETCH-FIRST-BATCH-WHOLE's business)."""
    topic = await wire.create_topic()
    layout = (await _fill(wire, topic, SHAPES)).batches[start:]
    sizes = [b.size for b in layout]
    cap = _bytes(cap_spec, sizes)
    (n,) = _kafka_whole_batches([sizes], 50 << 20, [cap])
    res = await wire.fetch([(topic, 0, layout[0].base_offset)], max_wait_ms=READ_MS, min_bytes=1, partition_max_bytes=cap,
                           label=f"partition_max_bytes {cap}")
    p = res.part(topic)
    got = [(b.base_offset, b.size) for b in p.batches]
    want = [(b.base_offset, b.size) for b in layout[:n]]
    evidence.note("batch_sizes", sizes)
    evidence.note("partition_max_bytes", cap)
    assert p.error_code == 0, f"error {p.error_code}"
    assert p.records_bytes <= max(cap, sizes[0]), (
        f"partition_max_bytes {cap} (batches of {sizes} bytes) but the partition returned {p.records_bytes} bytes")
    if cap >= sizes[0]:
        assert got == want, f"partition_max_bytes {cap}, batches {sizes}: expected whole batches {want}, got {got}"
    else:
        assert got == want[:len(got)], f"partition_max_bytes {cap} < the first batch: expected at most {want}, got {got}"


FIRST_CASES = [  # (id, batch index the fetch starts at, max_bytes, partition_max_bytes; (k, delta) as above)
    ("partition_max_bytes-0", 0, INT32_MAX, 0), ("partition_max_bytes-1", 0, INT32_MAX, 1),
    ("partition_max_bytes-first-1", 0, INT32_MAX, (1, -1)), ("max_bytes-0", 0, 0, INT32_MAX),
    ("max_bytes-first-1", 0, (1, -1), INT32_MAX), ("both-1", 0, 1, 1), ("gzip-both-1", 1, 1, 1)]


@pytest.mark.rule("FETCH-FIRST-BATCH-WHOLE")
@pytest.mark.parametrize(("start", "max_spec", "cap_spec"), [c[1:] for c in FIRST_CASES],
                         ids=[c[0] for c in FIRST_CASES])
async def test_first_batch_whole_despite_limits(wire, evidence, start, max_spec, cap_spec):
    """Limits from 0 to one byte below the first batch: that batch (10 or 20 gzip records) still comes whole."""
    topic = await wire.create_topic()
    layout = (await _fill(wire, topic, SHAPES)).batches[start:]
    sizes = [b.size for b in layout]
    max_bytes, cap = _bytes(max_spec, sizes), _bytes(cap_spec, sizes)
    res = await wire.fetch([(topic, 0, layout[0].base_offset)], max_wait_ms=READ_MS, min_bytes=1, max_bytes=max_bytes,
                           partition_max_bytes=cap, label=f"max_bytes {max_bytes}, partition_max_bytes {cap}")
    p = res.part(topic)
    evidence.note("first_batch_bytes", sizes[0])
    first = layout[0]
    assert p.error_code == 0 and p.batches and (p.batches[0].base_offset, p.batches[0].size) == (
        first.base_offset, first.size), (
        f"the first batch ({first.size} bytes at offset {first.base_offset}) must come back whole under max_bytes "
        f"{max_bytes} / partition_max_bytes {cap}; got error {p.error_code}, {p.records_bytes} bytes, batches "
        f"{[(b.base_offset, b.size) for b in p.batches]}")


MAX_BYTES_CASES = [  # (id, max_bytes: int or (k batches in request order, +delta))
    ("0", 0), ("1", 1), ("first-1", (1, -1)), ("first", (1, 0)), ("first-partition", (2, 0)),
    ("next-batch-1", (3, -1)), ("next-batch", (3, 0)), ("next-batch+1", (3, 1)), ("two-partitions", (4, 0)),
    ("int32-max", INT32_MAX)]
MAX_BYTES_ORDER = (2, 0, 1)  # request order, on purpose not the partitions' numbering
MAX_BYTES_SHAPES = {2: SHAPES[2:4], 0: SHAPES[0:2], 1: SHAPES[2:4]}  # p0's second batch is gzip


@pytest.mark.rule("FETCH-MAX-BYTES")
@pytest.mark.parametrize("max_spec", [c[1] for c in MAX_BYTES_CASES], ids=[c[0] for c in MAX_BYTES_CASES])
async def test_max_bytes_shared_in_request_order(wire, evidence, max_spec):
    """Three partitions of two batches each, asked for in the order 2, 0, 1: max_bytes is one budget that each
    partition's bytes shrink, in request order; below the first batch, at most that batch comes."""
    topic = await wire.create_topic(partitions=3)
    layouts = {i: (await _fill(wire, topic, MAX_BYTES_SHAPES[i], i)).batches for i in MAX_BYTES_ORDER}
    sizes = [[b.size for b in layouts[i]] for i in MAX_BYTES_ORDER]
    max_bytes = _bytes(max_spec, [s for ss in sizes for s in ss])
    counts = _kafka_whole_batches(sizes, max_bytes, [1 << 20] * 3)
    res = await wire.fetch([(topic, i, 0) for i in MAX_BYTES_ORDER], max_wait_ms=READ_MS, min_bytes=1, max_bytes=max_bytes,
                           label=f"max_bytes {max_bytes}")
    got = {i: [(b.base_offset, b.size) for b in res.part(topic, i).batches] for i in MAX_BYTES_ORDER}
    want = {i: [(b.base_offset, b.size) for b in layouts[i][:n]]
            for i, n in zip(MAX_BYTES_ORDER, counts, strict=True)}
    evidence.note("batch_sizes_in_request_order", sizes)
    evidence.note("max_bytes", max_bytes)
    assert not any(res.part(topic, i).error_code for i in MAX_BYTES_ORDER)
    assert res.records_bytes <= max(max_bytes, sizes[0][0]), (
        f"max_bytes {max_bytes} but the response holds {res.records_bytes} bytes: {got}")
    if max_bytes >= sizes[0][0]:
        assert got == want, (f"max_bytes {max_bytes}, batch sizes {sizes} in request order {MAX_BYTES_ORDER}: "
                             f"expected {want}, got {got}")
    else:
        first = MAX_BYTES_ORDER[0]
        assert got[first] == want[first][:len(got[first])] and not any(got[i] for i in MAX_BYTES_ORDER[1:]), (
            f"max_bytes {max_bytes} < the first batch: at most partition {first}'s first batch may come; got {got}")


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
    """DeleteRecords moving the log start past a parked fetch's offset: the fetch is answered OFFSET_OUT_OF_RANGE
    with no records, no later than its max_wait. Apache Kafka answers at max_wait (DelayedFetch.tryComplete has no
    case for a moved log start; the read at expiry finds the offset below it, UnifiedLog.read); an earlier answer
    is allowed, a later one or records from below the log start are not."""
    max_wait = 2000
    topic = await wire.create_topic()
    await wire.produce(topic, count=3, size=10)
    async with await wire_factory() as admin:
        t0 = time.monotonic()
        pending = wire.submit_fetch([(topic, 0, 3)], max_wait_ms=max_wait, min_bytes=1 << 20, label="parked, big min")
        await asyncio.sleep(0.3)
        await admin.produce(topic, count=1, size=10)  # LEO 4
        err, low = await admin.delete_records(topic, 0, 4)  # log start 4 > parked offset 3
        res = await pending
        after = (time.monotonic() - t0) * 1000
    _timing(evidence, "parked fetch whose offset fell below the log start", after, None, max_wait + SLACK_MS,
            max_wait_ms=max_wait)
    assert err == 0 and low == 4, f"DeleteRecords to 4: error {err}, low_watermark {low}"
    p = res.part(topic)
    assert after <= max_wait + SLACK_MS, (
        f"the log start passed the parked offset, yet it answered after {after:.0f} ms (max_wait {max_wait} ms)")
    assert (p.error_code, p.offsets) == (OOR, []), (
        f"parked fetch below the new log start: error {p.error_code}, records {p.offsets}; expected "
        f"OFFSET_OUT_OF_RANGE ({OOR}) and none")


def _pos(case_id: str, delete_to: int | None, offset, max_wait_ms: int, expect: str, *rules: str):
    return pytest.param(delete_to, offset, max_wait_ms, expect, id=case_id, marks=pytest.mark.rule(*rules))


POSITION_CASES = [  # fetch offset: an int, or "hw" / "leo" / "leo+1" of the 40-record log (batches 0-9, 10-29, 30-39)
    _pos("log-start-mid-batch", 15, 15, READ_MS, "from", "FETCH-OOR-BELOW-LOG-START", "FETCH-MID-BATCH"),
    _pos("log-start-1", 15, 14, 2000, "oor", "FETCH-OOR-BELOW-LOG-START"),
    _pos("zero-below-log-start", 15, 0, 2000, "oor", "FETCH-OOR-BELOW-LOG-START"),
    _pos("batch-base", None, 10, READ_MS, "from", "FETCH-MID-BATCH"),
    _pos("batch-last-offset", None, 9, READ_MS, "from", "FETCH-MID-BATCH"),
    _pos("mid-batch", None, 5, READ_MS, "from", "FETCH-MID-BATCH"),
    _pos("mid-gzip-batch", None, 25, READ_MS, "from", "FETCH-MID-BATCH"),
    _pos("at-leo", None, "leo", PARK_MS, "empty", "FETCH-AT-LEO-EMPTY"),
    _pos("at-leo-no-wait", None, "leo", 0, "empty", "FETCH-AT-LEO-EMPTY"),
    _pos("leo+1", None, "leo+1", 2000, "oor", "FETCH-OOR-ABOVE-LEO"),
    _pos("int64-max", None, INT64_MAX, 2000, "oor", "FETCH-OOR-ABOVE-LEO"),
]


@pytest.mark.parametrize(("delete_to", "offset", "max_wait_ms", "expect"), POSITION_CASES)
async def test_fetch_offset_positions(wire, evidence, delete_to, offset, max_wait_ms, expect):
    """Where a fetch may start: from the log start (even inside a batch) up to the LEO; outside, an error at once;
    inside a batch, that whole batch; at the HW and the LEO, nothing (at the LEO: held for max_wait)."""
    topic = await wire.create_topic()
    layout = await _fill(wire, topic, SHAPES[:3])
    leo = layout.offsets[-1] + 1
    if delete_to is not None:
        err, low = await wire.delete_records(topic, 0, delete_to)
        assert err == 0 and low == delete_to, f"DeleteRecords to {delete_to}: error {err}, low_watermark {low}"
    off = {"hw": layout.high_watermark, "leo": leo, "leo+1": leo + 1}.get(offset, offset)
    res = await wire.fetch([(topic, 0, off)], max_wait_ms=max_wait_ms, min_bytes=1, label=f"fetch at {off}")
    p = res.part(topic)
    evidence.note("fetch_offset", off)
    evidence.note("log", {"batches": [[b.base_offset, b.last_offset, b.size] for b in layout.batches],
                          "log_start_after_delete": delete_to, "leo": leo})
    if expect == "oor":
        _timing(evidence, f"fetch at {off}, out of range", res.rtt_ms, None, EARLY_MS, max_wait_ms=max_wait_ms)
        assert p.error_code == OOR, (f"fetch at {off} (log start {delete_to or 0}, LEO {leo}): error {p.error_code}, "
                                     f"{p.records_bytes} bytes; expected OFFSET_OUT_OF_RANGE (1)")
        assert res.rtt_ms <= EARLY_MS, f"an error answers at once; took {res.rtt_ms:.0f} ms"
    elif expect == "empty":
        assert p.error_code == 0 and p.records_bytes == 0, (
            f"fetch at {off} (HW {layout.high_watermark}, LEO {leo}): error {p.error_code}, {p.records_bytes} bytes; "
            f"expected empty, no error")
        if max_wait_ms > 0:  # (how fast max_wait 0 answers is FETCH-MAXWAIT-ZERO's business, not checked here)
            _timing(evidence, f"fetch at {off}", res.rtt_ms, max_wait_ms, max_wait_ms + SLACK_MS, max_wait_ms=max_wait_ms)
            assert res.rtt_ms >= max_wait_ms - TICK_MS, (f"nothing readable at {off}, yet answered after "
                                                          f"{res.rtt_ms:.0f} ms (< max_wait {max_wait_ms})")
    else:
        holder = next(b for b in layout.batches if b.base_offset <= off <= b.last_offset)
        assert p.error_code == 0 and p.batches, f"fetch at {off}: error {p.error_code}, {p.records_bytes} bytes"
        first = p.batches[0]
        assert (first.base_offset, first.size) == (holder.base_offset, holder.size), (
            f"fetch at {off}: the batch holding it ({holder.base_offset}-{holder.last_offset}, {holder.size} bytes) "
            f"must come first and whole; got {[(b.base_offset, b.last_offset, b.size) for b in p.batches]}")
        assert [o for o in p.offsets if o >= off] == list(range(off, leo)), (
            f"fetch at {off}: records from {off} to {leo - 1} expected, got {p.offsets}")
        if delete_to is not None:
            assert p.log_start_offset == delete_to, f"log_start_offset {p.log_start_offset}, expected {delete_to}"


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
