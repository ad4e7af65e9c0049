"""Offsets & reset: committed offsets (round trip, generation/member checks, durability), ListOffsets, and what
real consumers do with them (``auto.offset.reset`` earliest / latest / none, also after DeleteRecords).

Group and offset requests go over the wire (``wire``) for exact error codes; the reset checks drive
confluent-kafka and kafka-python (``conformance.clients``), because the rule users depend on is the pair "broker
answers OffsetFetch / ListOffsets / Fetch like Kafka" + "client resets like Kafka".
"""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from conformance.clients import CLIENTS, NoOffsetError, consumer
from conformance.rules import rule
from conformance.wire import EARLIEST, LATEST, TargetDiverged, Wire, unique_name

SUITE = "offsets"
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25

rule("OFFSETS-COMMIT-ROUNDTRIP", "OffsetFetch returns the offset and metadata last committed per partition, and "
     "-1 (no metadata) for partitions never committed", "GroupCoordinator.handleCommitOffsets / handleFetchOffsets; "
     "OffsetFetchResponse.INVALID_OFFSET", SUITE)
rule("OFFSETS-COMMIT-GENERATION", "A member's commit with a generation other than the group's is "
     "ILLEGAL_GENERATION and is not stored", "ClassicGroup.validateOffsetCommit (generationId != this.generationId)",
     SUITE)
rule("OFFSETS-COMMIT-UNKNOWN-MEMBER", "A commit from a member id the group does not know (or a generation-less "
     "commit to a non-empty group) is UNKNOWN_MEMBER_ID and is not stored",
     "ClassicGroup.validateOffsetCommit / validateMember (UNKNOWN_MEMBER_ID)", SUITE)
rule("OFFSETS-DURABLE", "Committed offsets survive a broker restart (read back from the offsets log)",
     "GroupMetadataManager.loadGroupsAndOffsets (__consumer_offsets replay)", SUITE)
rule("LIST-OFFSETS-LATEST", "ListOffsets LATEST is the high watermark: the offset after the last committed record, "
     "also after multi-record batches", "UnifiedLog.fetchOffsetByTimestamp(LATEST_TIMESTAMP) -> "
     "highWatermark for consumers (Partition.fetchOffsetForTimestamp)", SUITE)
rule("LIST-OFFSETS-EARLIEST", "ListOffsets EARLIEST is the log start offset (moved by DeleteRecords)",
     "UnifiedLog.fetchOffsetByTimestamp(EARLIEST_TIMESTAMP) -> logStartOffset; KIP-107", SUITE)
rule("LIST-OFFSETS-TIMESTAMP", "ListOffsets for a timestamp returns the first offset whose timestamp is >= it, "
     "or -1 when none is", "KIP-79; UnifiedLog.fetchOffsetByTimestamp (TimeIndex lookup)", SUITE)
rule("RESET-EARLIEST", "auto.offset.reset=earliest with no committed offset starts at the log start offset",
     "KafkaConsumer auto.offset.reset (SubscriptionState.resetInitializingPositions / OffsetFetcher "
     "resetPositions via ListOffsets EARLIEST); OffsetFetch -1 = no offset", SUITE)
rule("RESET-LATEST", "auto.offset.reset=latest with no committed offset starts at the high watermark: only later "
     "records are read", "KafkaConsumer auto.offset.reset; ListOffsets LATEST", SUITE)
rule("RESET-NONE", "auto.offset.reset=none with no committed offset raises NoOffsetForPartition instead of "
     "reading", "KafkaConsumer auto.offset.reset=none (NoOffsetForPartitionException)", SUITE)
rule("RESET-AFTER-DELETE", "After DeleteRecords, earliest starts at the new log start, and a committed offset "
     "below it is out of range and reset by the policy", "KIP-107; Fetch OFFSET_OUT_OF_RANGE -> "
     "Fetcher resets (auto.offset.reset)", SUITE)

pytestmark = pytest.mark.timeout(120)
CLIENT_TIMEOUT_S = 20.0


# -- commit / fetch ---------------------------------------------------------------------------------------------
@pytest.mark.rule("OFFSETS-COMMIT-ROUNDTRIP")
async def test_commit_fetch_round_trip_with_metadata(wire, evidence):
    topic = await wire.create_topic(partitions=3)
    group = unique_name("g")
    co = await wire.coordinator(group)
    codes = await co.offset_commit(group, {(topic, 0): (5, "meta-zero"), (topic, 1): (7, "")})
    assert codes == {(topic, 0): 0, (topic, 1): 0}, f"simple commit answered {codes}"
    got = await co.offset_fetch(group, [(topic, 0), (topic, 1), (topic, 2)])
    evidence.note("offset_fetch", {f"{t}/{p}": v for (t, p), v in got.items()})
    assert got[(topic, 0)][:2] == (5, "meta-zero"), f"partition 0: {got[(topic, 0)]}, committed (5, 'meta-zero')"
    assert got[(topic, 1)][0] == 7, f"partition 1: {got[(topic, 1)]}, committed 7"
    assert got[(topic, 2)][0] == -1, f"partition 2 was never committed: expected -1, got {got[(topic, 2)]}"
    assert all(v[2] == 0 for v in got.values()), f"per-partition errors: {got}"
    await co.offset_commit(group, {(topic, 0): (9, "meta-two")})
    again = await co.offset_fetch(group, [(topic, 0)])
    assert again[(topic, 0)][:2] == (9, "meta-two"), f"a later commit replaces the offset: {again[(topic, 0)]}"


async def _stable_member(wire: Wire, group: str, topic: str, evidence) -> tuple[Wire, str, int]:
    """One member in a Stable group (join, then sync with its own assignment).

    Kafka answers any commit to a group still in CompletingRebalance with REBALANCE_IN_PROGRESS, so the
    generation/member rules can only be checked on a Stable group: a target that cannot get there is skipped
    here with what it answered (the rebalance suite owns that rule).
    """
    co = await wire.coordinator(group)
    joined = await co.join_new_member(group, session_timeout_ms=6000, rebalance_timeout_ms=3000)
    if joined.error_code != 0:
        pytest.skip(f"precondition: JoinGroup answered {joined.error_code}; no group to commit to")
    try:
        synced = await co.sync_group(group, joined.generation_id, joined.member_id, {joined.member_id: b""},
                                     timeout_s=20)
        sync_error = f"error {synced.error_code}"
    except TargetDiverged as exc:
        synced, sync_error = None, str(exc)
    evidence.note("member", {"member_id": joined.member_id, "generation": joined.generation_id,
                             "sync": sync_error})
    if synced is None or synced.error_code != 0:
        with contextlib.suppress(AssertionError):
            await co.leave_group(group, [(joined.member_id, None)])
        pytest.skip(f"precondition: the group never became Stable (JoinGroup gave generation "
                    f"{joined.generation_id}, then SyncGroup: {sync_error}); commit generation checks need a "
                    f"Stable group — see the rebalance suite")
    return co, joined.member_id, joined.generation_id


@pytest.mark.rule("OFFSETS-COMMIT-GENERATION")
async def test_commit_with_wrong_generation_is_illegal_generation(wire, evidence):
    topic = await wire.create_topic()
    group = unique_name("g")
    co, member, gen = await _stable_member(wire, group, topic, evidence)
    try:
        ok = await co.offset_commit(group, {(topic, 0): (3, "ok")}, generation=gen, member_id=member)
        assert ok == {(topic, 0): 0}, f"the member's own commit at generation {gen} answered {ok}"
        for wrong in (gen - 1, gen + 1):
            bad = await co.offset_commit(group, {(topic, 0): (99, "stale")}, generation=wrong, member_id=member)
            assert bad == {(topic, 0): ILLEGAL_GENERATION}, (
                f"commit at generation {wrong} (group at {gen}) answered {bad}, expected ILLEGAL_GENERATION (22)")
        got = await co.offset_fetch(group, [(topic, 0)])
        assert got[(topic, 0)][0] == 3, f"a rejected commit must not be stored: offset is {got[(topic, 0)][0]}"
    finally:
        await co.leave_group(group, [(member, None)])


@pytest.mark.rule("OFFSETS-COMMIT-UNKNOWN-MEMBER")
async def test_commit_from_unknown_member_is_rejected(wire, evidence):
    topic = await wire.create_topic()
    group = unique_name("g")
    co, member, gen = await _stable_member(wire, group, topic, evidence)
    try:
        await co.offset_commit(group, {(topic, 0): (4, "")}, generation=gen, member_id=member)
        ghost = await co.offset_commit(group, {(topic, 0): (50, "")}, generation=gen, member_id="ghost-member")
        assert ghost == {(topic, 0): UNKNOWN_MEMBER_ID}, (
            f"commit from an unknown member id answered {ghost}, expected UNKNOWN_MEMBER_ID (25)")
        admin = await co.offset_commit(group, {(topic, 0): (60, "")}, generation=-1, member_id="")
        assert admin == {(topic, 0): UNKNOWN_MEMBER_ID}, (
            f"a generation-less commit to a group with a live member answered {admin}, expected "
            f"UNKNOWN_MEMBER_ID (25) (only an Empty group takes admin commits)")
        got = await co.offset_fetch(group, [(topic, 0)])
        assert got[(topic, 0)][0] == 4, f"a rejected commit must not be stored: offset is {got[(topic, 0)][0]}"
    finally:
        await co.leave_group(group, [(member, None)])


@pytest.mark.rule("OFFSETS-DURABLE")
@pytest.mark.requires_capability("restart")
async def test_committed_offsets_survive_restart(fresh_target, wire_factory, evidence):
    if not fresh_target.config().get("durable", False):
        pytest.skip(f"target {fresh_target.name!r} runs without durable storage "
                    f"({fresh_target.config().get('storage_engine') or 'memory'}): nothing to survive a restart")
    group = unique_name("g")
    async with await wire_factory(target=fresh_target) as w:
        topic = await w.create_topic(partitions=2)
        co = await w.coordinator(group)
        codes = await co.offset_commit(group, {(topic, 0): (11, "before-restart"), (topic, 1): (2, "x")})
        assert set(codes.values()) == {0}, f"commit answered {codes}"
    fresh_target.restart()
    evidence.note("restarted", fresh_target.describe().get("bootstrap"))
    for _attempt in range(50):  # the coordinator may need a moment to load the offsets log
        async with await wire_factory(target=fresh_target) as w:
            co = await w.coordinator(group)
            got = await co.offset_fetch(group, [(topic, 0), (topic, 1)])
        if all(e not in (14, 15) for _o, _m, e in got.values()):  # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE
            break
        await asyncio.sleep(0.2)
    evidence.note("after_restart", {f"{t}/{p}": v for (t, p), v in got.items()})
    assert got[(topic, 0)][:2] == (11, "before-restart"), f"after restart partition 0: {got[(topic, 0)]}"
    assert got[(topic, 1)][0] == 2, f"after restart partition 1: {got[(topic, 1)]}"


# -- ListOffsets ------------------------------------------------------------------------------------------------
@pytest.mark.rule("LIST-OFFSETS-LATEST")
async def test_list_offsets_latest_after_multi_record_batches(wire, evidence):
    topic = await wire.create_topic()
    await wire.produce(topic, count=4, size=10)
    await wire.produce(topic, count=3, size=10)
    err, latest, _ = await wire.list_offsets(topic, 0, LATEST)
    hw = (await wire.fetch([(topic, 0, 0)], max_wait_ms=100, min_bytes=1)).part(topic).high_watermark
    evidence.note("fetch_high_watermark", hw)
    assert err == 0
    assert latest == 7, f"ListOffsets LATEST after batches of 4 and 3 records: {latest}, expected 7 (HW {hw})"


@pytest.mark.rule("LIST-OFFSETS-EARLIEST")
async def test_list_offsets_earliest_follows_delete_records(wire, evidence):
    topic = await wire.create_topic()
    for _ in range(4):
        await wire.produce(topic, count=1, size=10)
    err, earliest, _ = await wire.list_offsets(topic, 0, EARLIEST)
    assert (err, earliest) == (0, 0), f"EARLIEST on a fresh log: error {err}, offset {earliest}"
    derr, low = await wire.delete_records(topic, 0, 2)
    assert (derr, low) == (0, 2), f"DeleteRecords to 2: error {derr}, low_watermark {low}"
    err, earliest, _ = await wire.list_offsets(topic, 0, EARLIEST)
    assert (err, earliest) == (0, 2), f"EARLIEST after DeleteRecords(2): error {err}, offset {earliest}"


@pytest.mark.rule("LIST-OFFSETS-TIMESTAMP")
async def test_list_offsets_by_timestamp(wire, evidence):
    topic = await wire.create_topic()
    base = 1_700_000_000_000
    await wire.produce(topic, count=3, size=10, timestamp_ms=base)  # offsets 0-2 at base, base+1, base+2
    await wire.produce(topic, count=2, size=10, timestamp_ms=base + 100)  # offsets 3-4 at base+100, base+101
    cases = {base: 0, base + 1: 1, base + 50: 3, base + 101: 4, base + 500: -1}
    got = {}
    for ts in cases:
        err, off, _ = await wire.list_offsets(topic, 0, ts)
        got[ts - base] = (err, off)
    evidence.note("by_timestamp (ts - base -> (error, offset))", got)
    want = {ts - base: (0, off) for ts, off in cases.items()}
    assert got == want, f"ListOffsets by timestamp: got {got}, expected {want}"


# -- auto.offset.reset with real clients ---------------------------------------------------------------------------
async def _topic_with(wire: Wire, n: int) -> str:
    topic = await wire.create_topic()
    for _ in range(n):
        await wire.produce(topic, count=1, size=10)
    return topic


@pytest.mark.rule("RESET-EARLIEST")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_earliest(client, wire, bootstrap, history, evidence):
    topic = await _topic_with(wire, 5)
    with consumer(client, bootstrap, unique_name("g"), "earliest", history, evidence) as c:
        c.assign(topic, [0])
        got = await asyncio.to_thread(c.poll_records, 5, CLIENT_TIMEOUT_S)
    offsets = [o for _t, _p, o, _v in got]
    assert offsets[:5] == [0, 1, 2, 3, 4], f"{client} earliest read offsets {offsets}, expected 0-4"


@pytest.mark.rule("RESET-LATEST")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_latest(client, wire, bootstrap, history, evidence):
    topic = await _topic_with(wire, 5)
    with consumer(client, bootstrap, unique_name("g"), "latest", history, evidence) as c:
        c.assign(topic, [0])
        early = await asyncio.to_thread(c.poll_records, 1, 2.0)  # lets the client reset its position
        assert not early, f"{client} latest read old records {early}"
        await wire.produce(topic, count=2, size=10)
        got = await asyncio.to_thread(c.poll_records, 2, CLIENT_TIMEOUT_S)
    offsets = [o for _t, _p, o, _v in got]
    assert offsets == [5, 6], f"{client} latest read offsets {offsets}, expected only the new records [5, 6]"


@pytest.mark.rule("RESET-NONE")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_none_raises(client, wire, bootstrap, history, evidence):
    topic = await _topic_with(wire, 3)
    with consumer(client, bootstrap, unique_name("g"), "none", history, evidence) as c:
        c.assign(topic, [0])
        try:
            got = await asyncio.to_thread(c.poll_records, 1, 8.0)
        except NoOffsetError as exc:
            evidence.note("client error", str(exc))
            return
    raise AssertionError(f"{client} with auto.offset.reset=none and no committed offset read {got} "
                         f"instead of raising NoOffsetForPartition")


@pytest.mark.rule("RESET-AFTER-DELETE", "RESET-EARLIEST")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_earliest_after_delete_records(client, wire, bootstrap, history, evidence):
    topic = await _topic_with(wire, 5)
    err, low = await wire.delete_records(topic, 0, 3)
    assert (err, low) == (0, 3), f"DeleteRecords to 3: error {err}, low_watermark {low}"
    with consumer(client, bootstrap, unique_name("g"), "earliest", history, evidence) as c:
        c.assign(topic, [0])
        got = await asyncio.to_thread(c.poll_records, 2, CLIENT_TIMEOUT_S)
    offsets = [o for _t, _p, o, _v in got]
    assert offsets == [3, 4], f"{client} earliest after DeleteRecords(3) read {offsets}, expected [3, 4]"


@pytest.mark.rule("RESET-AFTER-DELETE")
@pytest.mark.parametrize("client", CLIENTS)
async def test_committed_offset_below_log_start_is_reset(client, wire, bootstrap, history, evidence):
    """A committed offset the log no longer has: Fetch says OFFSET_OUT_OF_RANGE and the policy (earliest) applies."""
    topic = await _topic_with(wire, 5)
    group = unique_name("g")
    co = await wire.coordinator(group)
    codes = await co.offset_commit(group, {(topic, 0): (1, "")})
    assert codes == {(topic, 0): 0}, f"commit answered {codes}"
    err, low = await wire.delete_records(topic, 0, 3)
    assert (err, low) == (0, 3), f"DeleteRecords to 3: error {err}, low_watermark {low}"
    with consumer(client, bootstrap, group, "earliest", history, evidence) as c:
        c.assign(topic, [0])
        got = await asyncio.to_thread(c.poll_records, 2, CLIENT_TIMEOUT_S)
    offsets = [o for _t, _p, o, _v in got]
    assert offsets == [3, 4], (f"{client}: committed 1 < log start 3, earliest must reset to 3; read {offsets}")
