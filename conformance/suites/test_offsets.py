"""Offsets & reset: committed offsets (round trip, metadata and leader epoch, generation/member checks, durability),
ListOffsets (every special timestamp, timestamp boundaries, the HW while a follower lags), and what real consumers
do with them (``auto.offset.reset`` earliest / latest / none, also after DeleteRecords; resuming and seeking inside
a compressed batch).

Group and offset requests go over the wire (``wire``) for exact error codes; the consumer checks drive
confluent-kafka and kafka-python (``conformance.clients``) over realistic data (multi-record batches, a gzip batch,
keys and headers), because the rule users depend on is the pair "broker answers OffsetFetch / ListOffsets / Fetch
like Kafka" + "client positions itself like Kafka".
"""
from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from kafka import errors as E

from conformance.clients import CLIENTS, NoOffsetError, RecordedConsumer, consumer
from conformance.recording import decode_value
from conformance.rules import rule
from conformance.wire import EARLIEST, LATEST, TargetDiverged, Wire, unique_name

SUITE = "offsets"
ILLEGAL_GENERATION = E.IllegalGenerationError.errno
UNKNOWN_MEMBER_ID = E.UnknownMemberIdError.errno
REBALANCE_IN_PROGRESS = E.RebalanceInProgressError.errno
OFFSET_METADATA_TOO_LARGE = E.OffsetMetadataTooLargeError.errno
MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -3, -4, -5
GZIP = 1

rule("OFFSETS-COMMIT-ROUNDTRIP", "OffsetFetch returns the offset and metadata last committed per partition (null "
     "metadata as \"\"; any offset, 0 and -1 included, exactly), and -1 with metadata \"\" and no error for "
     "partitions never committed, also partitions or topics that do not exist", "GroupCoordinator.handleCommitOffsets "
     "/ handleFetchOffsets; OffsetAndMetadata.fromRequest (NO_METADATA); OffsetMetadataManager.fetchOffsets "
     "(INVALID_OFFSET)", SUITE)
rule("OFFSETS-COMMIT-GENERATION", "A member's commit with a generation other than the group's is "
     "ILLEGAL_GENERATION and is not stored", "ClassicGroup.validateOffsetCommit (generationId != this.generationId)",
     SUITE)
rule("OFFSETS-COMMIT-UNKNOWN-MEMBER", "A commit from a member id the group does not know (or a generation-less "
     "commit to a non-empty group) is UNKNOWN_MEMBER_ID and is not stored; once the group is Empty a "
     "generation-less commit is accepted",
     "ClassicGroup.validateOffsetCommit / validateMember (UNKNOWN_MEMBER_ID)", SUITE)
rule("OFFSETS-DURABLE", "Committed offsets survive a broker restart (read back from the offsets log)",
     "GroupMetadataManager.loadGroupsAndOffsets (__consumer_offsets replay)", SUITE)
rule("OFFSETS-TOPIC-REPLICATION-FACTOR", "__consumer_offsets is created with offsets.topic.replication.factor "
     "replicas, never fewer: a first group lookup while a broker is down (registered but fenced) still gets a topic "
     "with the full factor, that broker holding a replica outside the ISR",
     "kafka.server.AutoTopicCreationManager.creatableTopic (offsetsTopicReplicationFactor); "
     "ReplicationControlManager.createTopic with StripedReplicaPlacer (fenced brokers are usable, leaders unfenced; "
     "INVALID_REPLICATION_FACTOR only above the registered brokers)", SUITE)
rule("OFFSETS-VISIBLE-WHEN-COMMITTED", "OffsetFetch serves a commit only once it is committed in the group's "
     "__consumer_offsets partition (its high watermark passed the commit's records): while an in-sync follower of "
     "that partition stalls, a parked commit is not visible and the previous offset is served",
     "org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime (CoordinatorReadEvent reads at "
     "lastCommittedOffset; a write completes when onHighWatermarkUpdated passes it); "
     "GroupCoordinatorService.fetchOffsets (scheduleReadOperation)", SUITE)
rule("LIST-OFFSETS-LATEST", "ListOffsets LATEST is the high watermark: the offset after the last committed record, "
     "also after multi-record batches", "UnifiedLog.fetchOffsetByTimestamp(LATEST_TIMESTAMP) -> "
     "highWatermark for consumers (Partition.fetchOffsetForTimestamp)", SUITE)
rule("LIST-OFFSETS-EARLIEST", "ListOffsets EARLIEST is the log start offset (moved by DeleteRecords)",
     "UnifiedLog.fetchOffsetByTimestamp(EARLIEST_TIMESTAMP) -> logStartOffset; KIP-107", SUITE)
rule("LIST-OFFSETS-TIMESTAMP", "ListOffsets for a timestamp returns the first offset whose timestamp is >= it, "
     "with that record's timestamp, or offset -1 and timestamp -1 when none is", "KIP-79; UnifiedLog.fetchOffsetByTimestamp (TimeIndex lookup)", SUITE)
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
rule("OFFSETS-METADATA-MAX", "OffsetCommit metadata up to offset.metadata.max.bytes (default 4096) characters is "
     "stored; one more is OFFSET_METADATA_TOO_LARGE and not stored (the length is Java's String.length, not bytes)",
     "OffsetMetadataManager.isMetadataInvalid (metadata.length() > offsetMetadataMaxSize)", SUITE)
rule("OFFSETS-LEADER-EPOCH", "The committed leader epoch (OffsetCommit v6+) comes back from OffsetFetch (v5+), -1 "
     "when none was given", "KIP-320; OffsetAndMetadata.fromRequest / OffsetMetadataManager.fetchOffsets "
     "(committedLeaderEpoch)", SUITE)
rule("OFFSETS-FETCH-ALL", "OffsetFetch with topics null (v2+) answers every partition the group has committed, "
     "with its offset", "KIP-88; OffsetMetadataManager.fetchAllOffsets", SUITE)
rule("LIST-OFFSETS-MAX-TIMESTAMP", "ListOffsets MAX_TIMESTAMP (-3, v7+) answers the offset and timestamp of the "
     "record with the largest timestamp (the first such record), not its batch's last offset; -1 on an empty log",
     "KIP-734; UnifiedLog.fetchOffsetByTimestamp (batch.offsetOfMaxTimestamp, KAFKA-16310)", SUITE)
rule("LIST-OFFSETS-EARLIEST-LOCAL", "ListOffsets EARLIEST_LOCAL (-4, v8+) answers the local log start offset: the "
     "log start (moved by DeleteRecords) on a topic without tiered storage", "KIP-405; UnifiedLog."
     "fetchOffsetByTimestamp(EARLIEST_LOCAL_TIMESTAMP) -> localLogStartOffset", SUITE)
rule("LIST-OFFSETS-LATEST-TIERED", "ListOffsets LATEST_TIERED (-5, v9+) answers offset -1 on a topic without remote "
     "storage (nothing tiered), without an error", "KIP-1005; UnifiedLog.fetchOffsetByTimestamp("
     "LATEST_TIERED_TIMESTAMP): remoteLogEnabled() false -> offset -1", SUITE)
rule("CONSUMER-RESUME-COMMITTED", "A consumer starts exactly at its group's last committed offset, also inside a "
     "batch and inside a compressed batch (the broker returns the whole batch, the consumer skips the records "
     "before its position); a seek inside a batch does the same", "KafkaConsumer: ConsumerCoordinator."
     "refreshCommittedOffsetsIfNeeded / seek; Fetcher (CompletedFetch skips records below the fetch position)",
     SUITE)

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("group_coordinator_ready")]
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


@pytest.mark.rule("OFFSETS-COMMIT-ROUNDTRIP")
async def test_commit_fetch_value_boundaries(wire, bootstrap, evidence):
    """Null metadata is stored as "" (Kafka's NO_METADATA), offset 0 is an offset, a huge one round-trips exactly;
    what was never committed — a partition, a partition the topic lacks, a topic that does not exist — is -1 and
    "" with no error."""
    topic = await wire.create_topic(partitions=4)
    group = unique_name("g")
    co = await wire.coordinator(group)
    big = 2**62 + 3
    codes = await co.offset_commit(group, {(topic, 0): (4, None), (topic, 1): (0, ""), (topic, 2): (big, "big")})
    assert set(codes.values()) == {0}, f"simple commits answered {codes}"
    asked = [(topic, 0), (topic, 1), (topic, 2), (topic, 3), (topic, 99), (unique_name("no-such-topic"), 0)]
    err, got = await co.offset_fetch_full(group, asked)
    evidence.note("offset_fetch (offset, epoch, metadata, error)", {f"{t}/{p}": v for (t, p), v in got.items()})
    assert err == 0, f"OffsetFetch answered top-level error {err}"
    view = {tp: (got[tp][0], got[tp][2], got[tp][3]) for tp in asked if tp in got}
    want = {(topic, 0): (4, "", 0), (topic, 1): (0, "", 0), (topic, 2): (big, "big", 0)}
    want.update({tp: (-1, "", 0) for tp in asked[3:]})
    assert view == want, (f"OffsetFetch (offset, metadata, error): got {view}, expected {want} — null metadata is "
                          f"stored as \"\", never-committed partitions answer -1 and \"\" without an error")
    # Offset -1 is stored like any other (Kafka validates no offset) and reads back as -1 with its metadata. A
    # separate connection without history: the history's committed-offsets model reads -1 as "no offset".
    async with await Wire.connect(bootstrap, evidence=evidence) as quiet:
        qco = await quiet.coordinator(group)
        minus = await qco.offset_commit(group, {(topic, 3): (-1, "minus-one")})
        assert minus == {(topic, 3): 0}, f"a commit of offset -1 answered {minus}, expected NONE"
        _e, back = await qco.offset_fetch_full(group, [(topic, 3)])
    assert back[(topic, 3)][0::2] == (-1, "minus-one"), f"after committing -1 with metadata: {back[(topic, 3)]}"


@pytest.mark.rule("OFFSETS-METADATA-MAX")
async def test_commit_metadata_size_limit(wire, bootstrap, evidence):
    topic = await wire.create_topic(partitions=4)
    md = await wire.metadata([topic], record=False)
    configs: dict[str, str] = {}
    with contextlib.suppress(TargetDiverged):  # on its own connection: a target may close it on DescribeConfigs
        async with await Wire.connect(bootstrap, evidence=evidence) as probe:
            configs = await probe.broker_configs(min(md["_brokers"]), ["offset.metadata.max.bytes"]) or {}
    limit = int(configs.get("offset.metadata.max.bytes", 4096))
    evidence.note("offset.metadata.max.bytes", {"value": limit, "from": "DescribeConfigs" if configs else "default"})
    group = unique_name("g")
    co = await wire.coordinator(group)
    at, over, wide = "m" * limit, "m" * (limit + 1), "\u00e9" * limit  # é: 2 UTF-8 bytes, one Java char
    # Two requests: the history records a commit as ok only when every partition was accepted.
    codes = await co.offset_commit(group, {(topic, 0): (10, at), (topic, 2): (12, wide)})
    codes.update(await co.offset_commit(group, {(topic, 1): (11, over)}))
    evidence.note("commit codes", {f"{t}/{p}": c for (t, p), c in codes.items()})
    assert codes[(topic, 0)] == 0, f"metadata of exactly {limit} characters answered {codes[(topic, 0)]}, expected NONE"
    assert codes[(topic, 1)] == OFFSET_METADATA_TOO_LARGE, (
        f"metadata of {limit + 1} characters answered {codes[(topic, 1)]}, expected OFFSET_METADATA_TOO_LARGE (12)")
    assert codes[(topic, 2)] == 0, (f"metadata of {limit} two-byte characters answered {codes[(topic, 2)]}: Kafka "
                                    f"counts characters (String.length), not bytes")
    _e, got = await co.offset_fetch_full(group, [(topic, 0), (topic, 1), (topic, 2)])
    assert (got[(topic, 0)][0], len(got[(topic, 0)][2] or "")) == (10, limit), (
        f"the {limit}-character commit read back as offset {got[(topic, 0)][0]}, {len(got[(topic, 0)][2] or '')} chars")
    assert got[(topic, 1)][0] == -1, f"a rejected commit must not be stored: offset {got[(topic, 1)][0]}"
    assert got[(topic, 2)][0::2] == (12, wide), (
        f"the {limit} two-byte characters read back as offset {got[(topic, 2)][0]}, "
        f"{len(got[(topic, 2)][2] or '')} characters")


@pytest.mark.rule("OFFSETS-LEADER-EPOCH")
async def test_committed_leader_epoch_comes_back(wire, evidence):
    if wire.version("OffsetCommit") < 6 or wire.version("OffsetFetch") < 5:
        pytest.skip(f"target serves OffsetCommit v{wire.version('OffsetCommit')} / OffsetFetch "
                    f"v{wire.version('OffsetFetch')}: committed leader epochs need v6 / v5")
    topic = await wire.create_topic(partitions=2)
    group = unique_name("g")
    co = await wire.coordinator(group)
    codes = await co.offset_commit(group, {(topic, 0): (3, ""), (topic, 1): (4, "")},
                                   leader_epochs={(topic, 0): 7, (topic, 1): -1})
    assert set(codes.values()) == {0}, f"commits answered {codes}"
    _e, got = await co.offset_fetch_full(group, [(topic, 0), (topic, 1)])
    epochs = {p: got[(topic, p)][:2] for p in (0, 1)}
    evidence.note("(offset, leader epoch) by partition", epochs)
    assert epochs == {0: (3, 7), 1: (4, -1)}, f"committed (3, epoch 7) and (4, epoch -1), read back {epochs}"


@pytest.mark.rule("OFFSETS-FETCH-ALL")
async def test_offset_fetch_all_partitions(wire, evidence):
    if wire.version("OffsetFetch") < 2:
        pytest.skip(f"target serves OffsetFetch v{wire.version('OffsetFetch')}: topics null needs v2")
    a, b = await wire.create_topic(partitions=3), await wire.create_topic(partitions=2)
    group = unique_name("g")
    co = await wire.coordinator(group)
    committed = {(a, 0): 5, (a, 2): 0, (b, 1): 9}
    codes = await co.offset_commit(group, {tp: (o, f"m{o}") for tp, o in committed.items()})
    assert set(codes.values()) == {0}, f"commits answered {codes}"
    err, got = await co.offset_fetch_full(group, None)
    view = {tp: v[0] for tp, v in got.items()}
    evidence.note("all offsets", {f"{t}/{p}": o for (t, p), o in view.items()})
    assert err == 0 and view == committed, f"OffsetFetch(all) answered {view} (error {err}), committed {committed}"


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
        for wrong in (gen - 1, gen + 1, -1):  # -1 with a member id: not an admin commit, a stale member's
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
        for g in (gen, -1):
            ghost = await co.offset_commit(group, {(topic, 0): (50, "")}, generation=g, member_id="ghost-member")
            assert ghost == {(topic, 0): UNKNOWN_MEMBER_ID}, (
                f"commit from an unknown member id at generation {g} answered {ghost}, expected UNKNOWN_MEMBER_ID "
                f"(25)")
        admin = await co.offset_commit(group, {(topic, 0): (60, "")}, generation=-1, member_id="")
        assert admin == {(topic, 0): UNKNOWN_MEMBER_ID}, (
            f"a generation-less commit to a group with a live member answered {admin}, expected "
            f"UNKNOWN_MEMBER_ID (25) (only an Empty group takes admin commits)")
        got = await co.offset_fetch(group, [(topic, 0)])
        assert got[(topic, 0)][0] == 4, f"a rejected commit must not be stored: offset is {got[(topic, 0)][0]}"
    finally:
        await co.leave_group(group, [(member, None)])
    # The last member left: once the group is Empty it takes a standalone commit (generation -1, no member id).
    for _ in range(25):
        empty = await co.offset_commit(group, {(topic, 0): (70, "standalone")})
        if empty not in ({(topic, 0): UNKNOWN_MEMBER_ID}, {(topic, 0): REBALANCE_IN_PROGRESS}):
            break
        await asyncio.sleep(0.2)
    assert empty == {(topic, 0): 0}, (f"a generation-less commit after the last member left answered {empty}, "
                                      f"expected NONE (an Empty group takes standalone commits)")


@pytest.mark.rule("OFFSETS-DURABLE")
@pytest.mark.requires_capability("restart")
async def test_committed_offsets_survive_restart(fresh_target, wire_factory, evidence):
    if not fresh_target.config().get("durable", False):
        pytest.skip(f"target {fresh_target.name!r} runs without durable storage "
                    f"({fresh_target.config().get('storage_engine') or 'memory'}): nothing to survive a restart")
    group = unique_name("g")
    async with await wire_factory(target=fresh_target) as w:
        topic = await w.create_topic(partitions=2)
        await w.coordinator_ready(group)          # setup: a fresh target's coordinator may still be loading
        co = await w.coordinator(group)
        codes = await co.offset_commit(group, {(topic, 0): (11, "before-restart"), (topic, 1): (2, "x")})
        assert set(codes.values()) == {0}, f"commit answered {codes}"
    fresh_target.restart()
    evidence.note("restarted", fresh_target.describe().get("bootstrap"))
    async with await wire_factory(target=fresh_target) as w:
        await w.coordinator_ready(group)          # the restarted coordinator loads the offsets log first
        co = await w.coordinator(group)
        got = await co.offset_fetch(group, [(topic, 0), (topic, 1)])
    evidence.note("after_restart", {f"{t}/{p}": v for (t, p), v in got.items()})
    assert got[(topic, 0)][:2] == (11, "before-restart"), f"after restart partition 0: {got[(topic, 0)]}"
    assert got[(topic, 1)][0] == 2, f"after restart partition 1: {got[(topic, 1)]}"


@pytest.mark.rule("OFFSETS-TOPIC-REPLICATION-FACTOR")
@pytest.mark.requires_capability("replication", "kill_broker", "restart")
async def test_offsets_topic_waits_for_its_replication_factor(replicated_target, wire_factory, evidence):
    """Kill a broker of a fresh cluster before any group lookup, wait until Metadata no longer lists it, then look
    up a group until a coordinator is named: every __consumer_offsets partition has the configured factor."""
    target = replicated_target
    async with await wire_factory(target=target) as w:
        md = await w.metadata(["__consumer_offsets"])
        if md.get("__consumer_offsets", {}).get("error_code", 3) == 0:
            pytest.skip("precondition: __consumer_offsets exists already on this target")
        brokers = sorted(md["_brokers"])
        found = await w.broker_configs(brokers[0], ["offsets.topic.replication.factor"])
        rf = int((found or {}).get("offsets.topic.replication.factor")
                 or target.config().get("settings", {}).get("offsets.topic.replication.factor", 3))
        if rf < 2 or len(brokers) < rf:
            pytest.skip(f"offsets.topic.replication.factor {rf} with {len(brokers)} brokers: nothing to take away")
        victim = brokers[-1]
        target.kill_broker(victim)
        try:
            deadline = time.monotonic() + 30
            while victim in (await w.metadata([], record=False))["_brokers"] and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            if victim in (await w.metadata([], record=False))["_brokers"]:
                pytest.skip(f"broker {victim} was still listed 30 s after it was killed")
            deadline = time.monotonic() + 30          # Kafka creates the topic asynchronously: retry the lookup
            while True:
                err, _host, _port = await w.find_coordinator(unique_name("early"))
                if err == 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            early = await w.metadata(["__consumer_offsets"])
        finally:
            target.restart(victim)
        rfs = sorted({len(p["replicas"]) for p in early.get("__consumer_offsets", {}).get("partitions", {}).values()})
        evidence.note("while a broker was down", {"find_coordinator": err, "offsets topic replicas": rfs})
        assert err == 0 and rfs == [rf], (
            f"with broker {victim} down FindCoordinator answered {err} and __consumer_offsets has {rfs} replicas per "
            f"partition; Kafka creates it with offsets.topic.replication.factor {rf}, fenced brokers included")


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's GroupCoordinatorService.partitionFor: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions,
    with Java's String.hashCode over UTF-16 code units."""
    h = 0
    data = group.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


@pytest.mark.rule("OFFSETS-VISIBLE-WHEN-COMMITTED")
@pytest.mark.requires_capability("replication", "pause_broker")
async def test_commit_visible_once_committed(replicated_target, wire_factory, evidence):
    """Pause an in-sync follower of the group's offsets partition, commit (the answer parks until the HW passes the
    commit) and ask OffsetFetch on another connection meanwhile: the previous offset. Once the follower is back the
    commit completes and is served."""
    target = replicated_target
    async with await wire_factory(target=target) as w:
        topic = await w.create_topic(partitions=1, replication_factor=1)
        group = unique_name("visible")
        co = await w.coordinator(group)               # creates __consumer_offsets where it does not exist yet
        assert (await co.offset_commit(group, {(topic, 0): (5, "")}))[(topic, 0)] == 0, "the first commit failed"
        md = await w.metadata(["__consumer_offsets"])
        parts = md["__consumer_offsets"]["partitions"]
        state = parts[offsets_partition(group, len(parts))]
        evidence.note("offsets partition", state)
        followers = [r for r in state["isr"] if r != state["leader"]]
        if not followers:
            pytest.skip(f"the group's offsets partition has no in-sync follower ({state}): nothing to stall")
        host, port = md["_brokers"][state["leader"]]
        # The parked commit holds a connection (and a history process) of its own: not a sibling, which may be
        # this very connection.
        committer = await Wire.connect(f"{host}:{port}", evidence=w.evidence, history=w.history)
        try:
            target.pause_broker(followers[0])
            try:
                parked = asyncio.ensure_future(committer.offset_commit(group, {(topic, 0): (9, "")}))
                await asyncio.sleep(0.3)
                seen = (await co.offset_fetch(group, [(topic, 0)]))[(topic, 0)][0]
                answered_early = parked.done()
            finally:
                target.resume_broker(followers[0])
            codes = await parked
        finally:
            await committer.close()
        evidence.note("stalled", {"fetched": seen, "commit answered before the follower was back": answered_early,
                                  "commit answer": codes})
        if answered_early:
            pytest.skip(f"precondition: the commit was answered ({codes}) while the follower was paused — the ISR "
                        f"shrank first; nothing to tell a committed from an uncommitted offset")
        assert seen == 5, (f"OffsetFetch served offset {seen} while the commit of 9 waited for the offsets partition's "
                           f"HW (follower {followers[0]} paused); Kafka serves the committed 5 until the HW passes it")
        after = (await co.offset_fetch(group, [(topic, 0)]))[(topic, 0)][0]
        if codes[(topic, 0)] == 0:
            assert after == 9, f"the commit answered NONE once the follower was back, but OffsetFetch serves {after}"


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
    # read_committed: the last stable offset, which is the HW when no transaction is open
    cerr, committed, _ = await wire.list_offsets(topic, 0, LATEST, isolation_level=1)
    assert (cerr, committed) == (0, 7), f"ListOffsets LATEST read_committed: error {cerr}, offset {committed}, " \
                                        f"expected 7 (no open transaction: LSO = HW)"


@pytest.mark.rule("LIST-OFFSETS-LATEST")
@pytest.mark.requires_capability("replication", "pause_broker")
async def test_latest_is_hw_while_follower_lags(replicated_target, wire_factory, evidence):
    """HW < LEO needs an in-sync follower that has not fetched yet: pause one, append with acks=1, and ask the
    leader before replica.lag.time.max.ms drops the follower from the ISR. LATEST must be the HW, not the LEO."""
    target = replicated_target
    async with await wire_factory(target=target) as w:
        topic = await w.create_topic(partitions=1, replication_factor=len(target.broker_ids))
        part = (await w.metadata([topic]))[topic]["partitions"][0]
        follower = next(r for r in part["replicas"] if r != part["leader"])
        leader = await w.leader(topic)
        await leader.produce(topic, count=2, size=10)  # acks=all: on every replica, HW 2
        await asyncio.sleep(0.3)
        target.pause_broker(follower)
        try:
            await leader.produce(topic, count=3, size=10, acks=1)  # LEO 5 on the leader only
            got = {iso: await leader.list_offsets(topic, 0, LATEST, isolation_level=iso) for iso in (0, 1)}
            hw = (await leader.fetch([(topic, 0, 0)], max_wait_ms=0, min_bytes=1)).part(topic).high_watermark
        finally:
            target.resume_broker(follower)
    evidence.note("leader view", {"fetch_high_watermark": hw, "latest_read_uncommitted": got[0][:2],
                                  "latest_read_committed": got[1][:2], "log_end_offset": 5})
    if hw >= 5:
        pytest.skip(f"precondition: the HW reached the LEO ({hw}) while the follower was paused — the ISR shrank "
                    f"before the check could ask; nothing to tell LATEST from the LEO")
    for iso, (err, latest, _ts) in got.items():
        assert (err, latest) == (0, hw), (f"ListOffsets LATEST (isolation {iso}) answered offset {latest} (error "
                                          f"{err}) while the HW is {hw} and the LEO 5: consumers see the HW")


@pytest.mark.rule("LIST-OFFSETS-TIMESTAMP")
async def test_list_offsets_timestamp_boundaries(wire, evidence):
    """Batches whose records have differing (also equal and decreasing) timestamps: the answer is the first record,
    in log order, with timestamp >= the target — its own offset and timestamp, not its batch's. Also an empty
    partition, and records below the log start after DeleteRecords."""
    topic = await wire.create_topic(partitions=2)
    b = 1_700_000_000_000
    e_err, e_off, e_ts = await wire.list_offsets(topic, 1, b)
    assert (e_err, e_off, e_ts) == (0, -1, -1), f"a timestamp on an empty partition: {(e_err, e_off, e_ts)}, " \
                                                f"expected (0, -1, -1)"
    ends = [await wire.list_offsets(topic, 1, t) for t in (EARLIEST, LATEST)]
    assert [x[:2] for x in ends] == [(0, 0), (0, 0)], f"EARLIEST / LATEST on an empty partition: {ends}"
    await wire.produce_records(topic, count=3, timestamps=[b + 10, b + 20, b + 30])         # offsets 0-2
    await wire.produce_records(topic, count=3, timestamps=[b + 40, b + 40, b + 60],        # offsets 3-5
                               compression_type=GZIP)
    await wire.produce_records(topic, count=3, timestamps=[b + 100, b + 80, b + 120])      # offsets 6-8
    # target - b -> (offset, timestamp - b) of the answer
    cases = {0: (0, 10), 10: (0, 10), 20: (1, 20), 25: (2, 30), 40: (3, 40), 41: (5, 60), 61: (6, 100),
             90: (6, 100), 101: (8, 120), 120: (8, 120), 121: (-1, None)}
    got = {}
    for d in cases:
        err, off, ts = await wire.list_offsets(topic, 0, b + d)
        got[d] = (off, ts - b if ts >= 0 else None) if err == 0 else ("error", err)
    evidence.note("by timestamp (target - base -> (offset, timestamp - base))", got)
    assert got == cases, f"ListOffsets by timestamp: got {got}, expected {cases}"
    derr, low = await wire.delete_records(topic, 0, 4)  # inside the compressed batch
    assert (derr, low) == (0, 4), f"DeleteRecords to 4: error {derr}, low_watermark {low}"
    after = {d: (await wire.list_offsets(topic, 0, b + d))[1] for d in (0, 40, 41)}
    assert after == {0: 4, 40: 4, 41: 5}, (f"after DeleteRecords(4) the lookup starts at the log start: got "
                                           f"{after}, expected {{0: 4, 40: 4, 41: 5}}")


@pytest.mark.rule("LIST-OFFSETS-MAX-TIMESTAMP")
async def test_list_offsets_max_timestamp(wire, evidence):
    if wire.version("ListOffsets") < 7:
        pytest.skip(f"target serves ListOffsets up to v{wire.version('ListOffsets')}: MAX_TIMESTAMP needs v7")
    topic = await wire.create_topic(partitions=2)
    empty = await wire.list_offsets(topic, 1, MAX_TIMESTAMP)
    assert empty == (0, -1, -1), f"MAX_TIMESTAMP on an empty partition: {empty}, expected (0, -1, -1)"
    b = 1_700_000_000_000
    await wire.produce_records(topic, count=4, timestamps=[b + 5, b + 50, b + 50, b + 10])  # offsets 0-3
    await wire.produce_records(topic, count=2, timestamps=[b + 20, b + 30], compression_type=GZIP)  # 4-5
    err, off, ts = await wire.list_offsets(topic, 0, MAX_TIMESTAMP)
    evidence.note("max_timestamp", {"offset": off, "timestamp - base": ts - b if ts >= 0 else ts})
    assert (err, off, ts) == (0, 1, b + 50), (
        f"MAX_TIMESTAMP answered offset {off}, timestamp {ts - b if ts >= 0 else ts} (base+) error {err}; expected "
        f"offset 1 (the first record with the largest timestamp, base+50), not its batch's last offset 3")


async def _version_at_least(wire: Wire, version: int, what: str) -> None:
    have = wire.broker_max_version("ListOffsets")
    if have is None or have < version:
        pytest.skip(f"target's ApiVersions offers ListOffsets up to v{have}: {what} needs v{version}")


@pytest.mark.rule("LIST-OFFSETS-EARLIEST-LOCAL")
async def test_list_offsets_earliest_local(wire, evidence):
    await _version_at_least(wire, 8, "EARLIEST_LOCAL (-4, KIP-405)")
    topic = await wire.create_topic()
    await wire.produce_records(topic, count=3)
    await wire.produce_records(topic, count=3, compression_type=GZIP)
    first = await wire.list_offsets_full(topic, 0, EARLIEST_LOCAL, version=8)
    derr, low = await wire.delete_records(topic, 0, 2)
    assert (derr, low) == (0, 2), f"DeleteRecords to 2: error {derr}, low_watermark {low}"
    moved = await wire.list_offsets_full(topic, 0, EARLIEST_LOCAL, version=8)
    evidence.note("earliest_local (error, offset, timestamp, epoch)", {"before_delete": first, "after": moved})
    assert (first[:2], moved[:2]) == ((0, 0), (0, 2)), (
        f"EARLIEST_LOCAL without tiered storage is the log start: got {first[:2]} then {moved[:2]} after "
        f"DeleteRecords(2), expected (0, 0) then (0, 2)")


@pytest.mark.rule("LIST-OFFSETS-LATEST-TIERED")
async def test_latest_tiered_without_remote_storage(wire, evidence):
    await _version_at_least(wire, 9, "LATEST_TIERED (-5, KIP-1005)")
    topic = await wire.create_topic()  # no remote.storage.enable: nothing is ever tiered
    await wire.produce_records(topic, count=4)
    got = await wire.list_offsets_full(topic, 0, LATEST_TIERED, version=9)
    evidence.note("latest_tiered (error, offset, timestamp, epoch)", got)
    assert got[:2] == (0, -1), (f"LATEST_TIERED on a topic without remote storage answered offset {got[1]} "
                                f"(error {got[0]}), expected -1: nothing has been tiered")


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
    # asked timestamp → (offset, timestamp of that record): Kafka answers the found record's own timestamp
    cases = {base: (0, base), base + 1: (1, base + 1), base + 50: (3, base + 100), base + 101: (4, base + 101),
             base + 500: (-1, -1)}
    got = {}
    for ts in cases:
        err, off, found_ts = await wire.list_offsets(topic, 0, ts)
        got[ts - base] = (err, off, found_ts - base if found_ts >= 0 else found_ts)
    evidence.note("by_timestamp (ts - base -> (error, offset, found timestamp - base))", got)
    want = {ts - base: (0, off, t - base if t >= 0 else t) for ts, (off, t) in cases.items()}
    assert got == want, (f"ListOffsets by timestamp (asked - base: (error, offset, answered timestamp - base)): "
                         f"got {got}, expected {want}")


# -- auto.offset.reset with real clients ---------------------------------------------------------------------------
async def _topic_with(wire: Wire, n: int) -> str:
    """``n`` records as real producers write them: a keyed batch with headers, then a gzip batch (for n=5:
    offsets 0-1 plain, 2-4 compressed, so DeleteRecords(3) cuts the compressed batch)."""
    topic = await wire.create_topic()
    head = max(1, (n - 1) // 2)
    await wire.produce_records(topic, count=head)
    if n > head:
        await wire.produce_records(topic, count=n - head, compression_type=GZIP)
    return topic


def _read_expecting(c: RecordedConsumer, want: list[int], timeout_s: float) -> list[int]:
    """Poll until the offsets in ``want`` arrived (→ exactly ``want``; later records a poll brought are dropped), or
    stop at the first one that is not the next expected (→ what came: a wrong start shows at once, not after the
    whole timeout)."""
    got: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < len(want) and time.monotonic() < deadline:
        got += [o for _t, _p, o, _v in c.poll_records(1, max(0.05, deadline - time.monotonic()))]
        if got[:len(want)] != want[:len(got)]:
            return got
    return got[:len(want)]


@pytest.mark.rule("RESET-EARLIEST")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_earliest(client, wire, bootstrap, history, evidence):
    topic = await _topic_with(wire, 5)
    with consumer(client, bootstrap, unique_name("g"), "earliest", history, evidence) as c:
        c.assign(topic, [0])
        offsets = await asyncio.to_thread(_read_expecting, c, [0, 1, 2, 3, 4], 3.0)
        if len(offsets) < 5 and offsets == list(range(len(offsets))):
            # Nothing wrong seen yet (slow, or positioned past the end): one more record shows where it reads.
            await wire.produce(topic, count=1, size=10)
            offsets += await asyncio.to_thread(_read_expecting, c, list(range(len(offsets), 6)), CLIENT_TIMEOUT_S)
    assert offsets[:5] == [0, 1, 2, 3, 4], f"{client} earliest read offsets {offsets}, expected 0-4 first"


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


@pytest.mark.rule("CONSUMER-RESUME-COMMITTED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_consumer_resumes_inside_compressed_batch(client, wire, bootstrap, history, evidence):
    """Commit twice, the last inside a gzip batch; a consumer with auto.offset.reset=none (so a lost commit cannot
    hide behind a reset) reads from exactly there. A fresh consumer seeked inside that batch does the same."""
    topic = await wire.create_topic()
    values: list = []
    for count, codec in ((10, 0), (10, GZIP), (5, 0)):  # offsets 0-9 plain, 10-19 gzip, 20-24 plain
        values += (await wire.produce_records(topic, count=count, compression_type=codec)).values
    group = unique_name("g")
    co = await wire.coordinator(group)
    for offset in (3, 14):
        codes = await co.offset_commit(group, {(topic, 0): (offset, f"at-{offset}")})
        assert codes == {(topic, 0): 0}, f"commit of {offset} answered {codes}"
    with consumer(client, bootstrap, group, "none", history, evidence) as c:
        c.assign(topic, [0])
        try:
            resumed = await asyncio.to_thread(c.poll_full, 11, CLIENT_TIMEOUT_S)
        except NoOffsetError as exc:
            raise AssertionError(f"{client} found no committed offset for {group} after two commits: {exc}") from exc
    got = [(r.offset, decode_value(r.value)) for r in resumed]
    want = [(o, values[o]) for o in range(14, 25)]
    assert got == want, f"{client} resumed from the last commit (14, inside the gzip batch 10-19): read " \
                        f"{[o for o, _ in got]}, expected 14-24 with their values"
    keys = [(r.key, tuple(r.headers)) for r in resumed]
    want_keys = [(f"key-{values[o]}".encode(), (("kct-value", str(values[o]).encode()), ("kct-empty", b"")))
                 for o in range(14, 25)]
    assert keys == want_keys, f"{client} read the records' keys and headers as {keys[:2]}..., produced " \
                              f"{want_keys[:2]}..."
    with consumer(client, bootstrap, unique_name("g"), "none", history, evidence) as s:
        s.assign(topic, [0])
        s.seek(topic, 0, 12)
        seeked = await asyncio.to_thread(_read_expecting, s, list(range(12, 17)), CLIENT_TIMEOUT_S)
    assert seeked == list(range(12, 17)), f"{client} seeked to 12 (inside the gzip batch) and read {seeked}"
