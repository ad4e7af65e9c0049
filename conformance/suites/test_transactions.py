"""Transactions: what transactional producers and read_committed consumers are promised (KIP-98, KIP-447, KIP-890).

Each check speaks the protocol a transactional producer speaks, request by request (``conformance.txn``:
FindCoordinator key type 1, InitProducerId, AddPartitionsToTxn v3, transactional Produce v9 batches with producer
id/epoch/sequence and the transactional attribute, AddOffsetsToTxn, TxnOffsetCommit, EndTxn v4 — the classic
protocol with KIP-890 part 1 server-side verification), and reads as a read_committed consumer reads: Fetch with
isolation_level 1, kept or dropped by the answer's aborted_transactions list and the abort markers exactly as Kafka's
CompletedFetch does, ListOffsets isolation 1, OffsetFetch require_stable.

Single broker (every target):
- read_committed never returns records of an aborted transaction: several batches per partition, a plain batch of
  another producer inside the aborted range, an aborted then a committed transaction on the same partition, reads
  that start inside the aborted range, and fetches cut to one batch each (max bytes) walking through it;
- read_committed stops at the last stable offset: an open transaction interleaved with committed ones hides the
  committed records after its first offset too, until it ends;
- the LSO is the first offset of the earliest open transaction (Fetch and ListOffsets read_committed LATEST), the HW
  when none is open, never above the HW;
- a commit shows every partition's records, none before; an abort shows none, ever, in any partition;
- TxnOffsetCommit offsets appear at commit, vanish at abort; OffsetFetch require_stable answers
  UNSTABLE_OFFSET_COMMIT while they are pending;
- a fenced producer mid-transaction (InitProducerId again for its id) gets Kafka's exact codes per API and version
  and writes nothing; its open transaction is aborted;
- an abandoned transaction is aborted once transaction.timeout.ms passes;
- a transactional produce to a partition not added to the transaction is refused (KIP-890 part 1);
- transaction version 2 (KIP-890 part 2, on targets that finalize transaction.version >= 2): every EndTxn v5 bumps
  the epoch and the old one is fenced; a retried EndTxn v5 answers the outcome it already had; a Produce v12 adds its
  partition to the transaction itself.
Replicated (a 3-broker target): CONCURRENT_TRANSACTIONS while a transaction's markers cannot be written (its
partition's leader paused), and markers that reach a new leader after a failover, the outcome surviving it.

Kafka answers EndTxn once the PrepareCommit/PrepareAbort state is durable and writes the markers afterwards, so
"after a commit" means once the markers are in: checks wait for it (bounded), never sleep a fixed time.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from conformance.cluster import Cluster, eventually, state
from conformance.evidence import Evidence
from conformance.rules import rule
from conformance.txn import (
    CONCURRENT_TRANSACTIONS,
    END_TXN_TV2,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    NONE,
    PRODUCE_TV2,
    PRODUCER_FENCED,
    READ_UNCOMMITTED,
    UNSTABLE_OFFSET_COMMIT,
    Committed,
    TxnProducer,
    describe_transaction,
    fetch_one,
    offset_fetch_stable,
    read_all,
    transaction_version,
    txn_coordinator,
)
from conformance.wire import LATEST, Wire, unique_name
from fixtures.target import Target

SUITE = "transactions"
NOT_ENOUGH_REPLICAS = 19
SETTLE_S = 10.0                 # bound for markers to be written after EndTxn (Kafka: milliseconds on loopback)
CLEANUP_INTERVAL = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
DEFAULT_CLEANUP_INTERVAL_MS = 10_000       # Kafka's default for CLEANUP_INTERVAL
ABANDON_TIMEOUT_MS = 1_000                 # transaction.timeout.ms of the abandoned producer

# What Kafka 4.4.0 answers a fenced producer (an older epoch of its transactional id), per API at the versions
# conformance.wire pins: the coordinator's requests PRODUCER_FENCED (KIP-588, from InitProducerId v4 /
# AddPartitionsToTxn v2 / AddOffsetsToTxn v2 / EndTxn v2), the partition leader's and group coordinator's checks
# of the epoch INVALID_PRODUCER_EPOCH (ProducerAppendInfo.checkProducerEpoch; the group coordinator's
# TxnOffsetCommit epoch check).
FENCED_CODES = {"Produce": INVALID_PRODUCER_EPOCH, "AddPartitionsToTxn": PRODUCER_FENCED,
                "AddOffsetsToTxn": PRODUCER_FENCED, "EndTxn": PRODUCER_FENCED,
                "TxnOffsetCommit": INVALID_PRODUCER_EPOCH}

rule("TXN-READ-COMMITTED-ABORTED", "a read_committed consumer never receives a record of an aborted transaction: "
     "every Fetch (isolation_level 1) whose records reach into an aborted transaction lists it in "
     "aborted_transactions (producer id, first offset), also when the fetch starts inside the aborted range or is "
     "cut to one batch by max bytes, and the abort marker ends it; non-transactional records and committed "
     "transactions around and inside the aborted range stay visible",
     "KIP-98; UnifiedLog.collectAbortedTransactions / LogSegment.collectAbortedTxns (lastOffset >= fetch offset, "
     "firstOffset < upper bound); FetchResponse v4+ aborted_transactions; "
     "clients' CompletedFetch.nextFetchedRecord (abortedProducerIds, ABORT control record)", SUITE)
rule("TXN-READ-COMMITTED-OPEN", "a read_committed Fetch never returns a record at or above the last stable offset: "
     "records of an open transaction stay invisible, and so do committed records written after its first offset, "
     "until it ends", "KIP-98; ReplicaManager.readFromLog / Partition.fetchRecords (FetchTxnCommitted: max offset = "
     "lastStableOffset)", SUITE)
rule("TXN-LSO", "the last stable offset (Fetch last_stable_offset, ListOffsets isolation_level 1 LATEST) is the "
     "first offset of the earliest open transaction on the partition, the high watermark when none is open, and "
     "never above the high watermark", "KIP-98; UnifiedLog.lastStableOffset / firstUnstableOffset (ProducerStateManager "
     "ongoing transactions, capped by the HW); Partition.fetchOffsetForTimestamp (LATEST → lastStableOffset for "
     "READ_COMMITTED)", SUITE)
rule("TXN-COMMIT-VISIBLE", "a committed transaction's records are invisible to read_committed in every partition "
     "before the commit, and once its markers are written every partition it wrote shows all of them, in order",
     "KIP-98; TransactionCoordinator.endTransaction → TransactionMarkerChannelManager (COMMIT marker to every "
     "partition of the transaction); ProducerStateManager.completeTxn", SUITE)
rule("TXN-ABORT-INVISIBLE", "an aborted transaction's records never become visible to read_committed in any "
     "partition it wrote (also after later committed transactions), while read_uncommitted returns them",
     "KIP-98; TransactionCoordinator.endTransaction (ABORT markers, PrepareAbort → CompleteAbort); "
     "UnifiedLog aborted transaction index", SUITE)
rule("TXN-OFFSETS-AT-COMMIT", "offsets sent with TxnOffsetCommit are not served by OffsetFetch while the "
     "transaction is open (the previous commit is), are served once it commits, and are discarded when it aborts",
     "KIP-98; KIP-447; OffsetMetadataManager.commitTransactionalOffset / replayEndTransactionMarker (pending "
     "transactional offsets applied on COMMIT, dropped on ABORT)", SUITE)
rule("TXN-REQUIRE-STABLE", "OffsetFetch (v7+) with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition "
     "with a pending transactional offset commit (offset -1), the committed offset for others, and the new offset "
     "once the transaction is committed; without require_stable it answers at once (the last committed offset)",
     "KIP-447; OffsetMetadataManager.fetchOffsets (requireStable && hasPendingTransactionalOffsets → "
     "UNSTABLE_OFFSET_COMMIT)", SUITE)
rule("TXN-FENCING", "InitProducerId for a transactional id bumps its epoch and aborts the open transaction of the "
     "previous instance; that instance's requests are refused and write nothing: AddPartitionsToTxn v3, "
     "AddOffsetsToTxn v3 and EndTxn v4 with PRODUCER_FENCED, a transactional Produce v9 and TxnOffsetCommit v3 with "
     "INVALID_PRODUCER_EPOCH; its open transaction's records never become visible",
     "KIP-98; KIP-588 (PRODUCER_FENCED); TransactionCoordinator.handleInitProducerId (prepareFenceProducerEpoch, "
     "abort of the ongoing transaction) and handleEndTransaction / handleAddPartitionsToTransaction (producerEpoch "
     "< txnMetadata.producerEpoch → PRODUCER_FENCED); ProducerAppendInfo.checkProducerEpoch "
     "(InvalidProducerEpochException)", SUITE)
rule("TXN-TIMEOUT-ABORTS", "a transaction left open longer than its transaction.timeout.ms is aborted by the "
     "coordinator (within the timeout plus transaction.abort.timed.out.transaction.cleanup.interval.ms): its "
     "records never become visible, the LSO moves past them, and the abandoned producer is fenced (its EndTxn "
     "PRODUCER_FENCED, its Produce INVALID_PRODUCER_EPOCH)",
     "KIP-98; TransactionCoordinator.abortTimedOutTransactions (TransactionStateManager.timedOutTransactions, "
     "epoch bumped: prepareFenceProducerEpoch)", SUITE)
rule("TXN-CONCURRENT", "while a transaction's markers are not all written (PrepareCommit/PrepareAbort), "
     "AddPartitionsToTxn and InitProducerId for its transactional id answer CONCURRENT_TRANSACTIONS; once the "
     "markers are written they succeed", "KIP-98; TransactionCoordinator.handleAddPartitionsToTransaction / "
     "handleInitProducerId (txnMetadata.pendingTransitionInProgress or PrepareCommit/PrepareAbort → "
     "CONCURRENT_TRANSACTIONS)", SUITE)
rule("TXN-VERIFY-PARTITION", "a transactional Produce (v9) to a partition not added to the ongoing transaction "
     "with AddPartitionsToTxn is refused with INVALID_TXN_STATE and nothing is appended, also for a partition that "
     "was part of the producer's previous transaction (while that one still completes, the refusal is the retriable "
     "NOT_ENOUGH_REPLICAS: the coordinator's CONCURRENT_TRANSACTIONS as a Produce <= v10 receives it)",
     "KIP-890 part 1 (transaction.partition.verification.enable); ReplicaManager.appendRecords → "
     "AddPartitionsToTxnManager verification (verifyOnly AddPartitionsToTxn to the coordinator); "
     "INVALID_TXN_STATE: 'Partition was not added to the transaction'; ReplicaManager.appendRecords maps "
     "CONCURRENT_TRANSACTIONS / COORDINATOR_* / NOT_COORDINATOR to NotEnoughReplicasException", SUITE)
rule("TXN-TV2-EPOCH-BUMP", "with transaction version 2 (EndTxn v5) every commit and abort answers NONE with the "
     "same producer id and the epoch one higher, which the markers carry: afterwards the previous epoch is fenced "
     "(a transactional Produce v12 with it INVALID_PRODUCER_EPOCH, appending nothing; an EndTxn v5 with an epoch "
     "older than the previous one PRODUCER_FENCED) and the new epoch's next transaction works",
     "KIP-890 part 2; TransactionVersion.TV_2.supportsEpochBump; TransactionCoordinator.endTransaction "
     "(prepareAbortOrCommit: producerEpoch + 1, the answer newPreSendMetadata.producerId/producerEpoch; isValidEpoch "
     "→ PRODUCER_FENCED); EndTxnResponse v5 ProducerId/ProducerEpoch; ProducerAppendInfo.checkProducerEpoch "
     "(InvalidProducerEpochException); AddPartitionsToTxnManager (PRODUCER_FENCED → INVALID_PRODUCER_EPOCH)", SUITE)
rule("TXN-TV2-RETRY", "with transaction version 2 a retried EndTxn v5 (the epoch before its bump) of a completed "
     "outcome answers NONE with the current producer id and epoch and bumps nothing, the other outcome with that "
     "epoch INVALID_TXN_STATE; an abort with the current epoch and nothing added ends an empty transaction (epoch "
     "+ 1), a commit then INVALID_TXN_STATE",
     "KIP-890 part 2; TransactionCoordinator.endTransaction (retryOnEpochBump: txnMetadata.producerEpoch == "
     "producerEpoch + 1; the V2 table: CompleteCommit/CompleteAbort Retry → NONE, other outcome ITS, Current abort "
     "→ EB, Empty/CompleteAbort Current commit → ITS)", SUITE)
rule("TXN-TV2-IMPLICIT-ADD", "with transaction version 2 a transactional Produce v12 to a partition not added "
     "with AddPartitionsToTxn is appended and its partition joins the ongoing transaction (DescribeTransactions "
     "lists it, the LSO stops at the batch) and the EndTxn v5 commit's markers reach it: read_committed shows it "
     "then, not before",
     "KIP-890 part 2; KafkaApis.handleProduceRequest (version >= 12: addPartition); ReplicaManager.appendRecords → "
     "AddPartitionsToTxnManager.addOrVerifyTransaction (verifyOnly = !supportsEpochBump); "
     "TransactionCoordinator.handleAddPartitionsToTransaction", SUITE)
rule("TXN-MARKERS-FAILOVER", "transaction markers are replicated with the data: after the partition's leader fails, "
     "the new leader shows committed transactions and hides aborted ones exactly as the old leader did, and a "
     "transaction committed while the leader was down gets its markers on the new leader",
     "KIP-98; TransactionMarkerChannelManager (markers re-sent to the current leader on NOT_LEADER_OR_FOLLOWER); "
     "markers appended as control batches replicated like data; ProducerStateManager rebuilt on the follower "
     "(ReplicaFetcher append, REPLICATION origin)", SUITE)

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("txn_coordinator_ready")]
# How long a check retries FindCoordinator (key type 1): long for the first lookup (a fresh Kafka creates
# __transaction_state on it), short once txn_coordinator_ready saw a target that never finds one.
FIND_WITHIN_S = {"s": 30.0}


@pytest.fixture(scope="module")
def txn_coordinator_ready(bootstrap: str) -> None:
    """Setup, not a check: wait (up to 30 s) until a transaction coordinator is found, as clients retry
    COORDINATOR_NOT_AVAILABLE while ``__transaction_state`` is created. A target that never finds one leaves every
    check to diverge on its own lookup, quickly (2 s each) instead of 30 s each."""
    async def ready() -> None:
        w = await Wire.connect(bootstrap)
        try:
            await txn_coordinator(w, unique_name("txn-ready"))
            FIND_WITHIN_S["s"] = 30.0
        except AssertionError:
            FIND_WITHIN_S["s"] = 2.0
        finally:
            await w.close()

    asyncio.run(ready())


# ------------------------------------------------------------------------------------------- helpers


def values(tag: str, *names: str) -> list[bytes]:
    return [f"{tag}-{n}".encode() for n in names]


async def producer(w: Wire, timeout_ms: int = 60_000) -> TxnProducer:
    """A transactional producer with a fresh transactional id, initialised (InitProducerId answered NONE)."""
    p = TxnProducer(w, unique_name("txn"))
    err = await p.init(timeout_ms, find_within_s=FIND_WITHIN_S["s"])
    assert err == NONE, f"InitProducerId for {p.transactional_id} answered error {err}"
    return p


async def added(p: TxnProducer, parts: Sequence[tuple[str, int]]) -> None:
    got = await p.add_partitions(parts)
    assert set(got.values()) == {NONE}, f"AddPartitionsToTxn {list(parts)} answered {got}"


async def sent(p: TxnProducer, topic: str, partition: int, payloads: Sequence[bytes]) -> int:
    err, base = await p.send(topic, partition, payloads)
    assert err == NONE, f"the transactional Produce of {len(payloads)} records to {topic}/{partition} answered {err}"
    return base


async def ended(p: TxnProducer, commit: bool) -> None:
    err = await p.end(commit)
    assert err == NONE, f"EndTxn ({'commit' if commit else 'abort'}) answered error {err}"


async def plain(w: Wire, topic: str, partition: int, payloads: Sequence[bytes]) -> int:
    """A non-transactional acks=all batch (timestamps now, so it shares the transactions' log segment)."""
    r = await w.produce(topic, partition, payloads=list(payloads), timestamp_ms=int(time.time() * 1000))
    return r.base_offset


async def settled(w: Wire, topic: str, partitions: Sequence[int], within_s: float = SETTLE_S
                  ) -> tuple[dict[int, Committed], float]:
    """Until no transaction is open on the partitions (LSO == HW on each), bounded; the last answers and the wait."""
    t0 = time.monotonic()
    while True:
        got = {p: await fetch_one(w, topic, p, 0, max_bytes=1) for p in partitions}
        done = all(f.error == NONE and f.last_stable_offset == f.high_watermark for f in got.values())
        if done or time.monotonic() - t0 > within_s:
            return got, time.monotonic() - t0
        await asyncio.sleep(0.05)


async def wait_lso(w: Wire, topic: str, partition: int, want: int, within_s: float = SETTLE_S) -> tuple[int, int]:
    """Until Fetch's last_stable_offset is ``want`` (bounded) → (LSO, HW) last answered."""
    f, _ = await eventually(lambda: fetch_one(w, topic, partition, 0, max_bytes=1),
                            lambda f: f.last_stable_offset == want, within_s, 0.05)
    return f.last_stable_offset, f.high_watermark


async def committed_values(w: Wire, topic: str, partition: int, **kw: Any) -> list[bytes | None]:
    records, _ = await read_all(w, topic, partition, **kw)
    return [v for _, v in records]


async def broker_setting(w: Wire, name: str, default: int) -> int:
    """A broker setting of the broker ``w`` talks to (DescribeConfigs on a connection of its own: a target that
    closes the connection instead of answering must not take ``w`` with it), else ``default``."""
    md = await w.metadata([], record=False)
    me = next((b for b, addr in md["_brokers"].items() if addr == (w.conn.host, w.conn.port)), None)
    if me is None:
        return default
    probe = await Wire.connect(f"{w.conn.host}:{w.conn.port}", evidence=w.evidence)
    try:
        with contextlib.suppress(AssertionError):
            found = await probe.broker_configs(me, [name])
            if found and name in found:
                return int(found[name])
    finally:
        await probe.close()
    return default


# ------------------------------------------------------------------------------------------- single broker


@pytest.mark.rule("TXN-READ-COMMITTED-ABORTED")
async def test_aborted_transaction_never_read_committed(wire: Wire, evidence: Evidence) -> None:
    """One partition: a plain batch, T1 committed (two batches), T2 aborted (two batches with another producer's
    plain batch between them), T3 committed. read_committed reads T1, the plain batches and T3, never T2: reading
    from the start, from every offset inside T2's range, and one batch per fetch (max bytes 1)."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("ab")
    p = await producer(wire)
    want: list[bytes] = []
    await plain(wire, topic, 0, values(tag, "p0"))
    want += values(tag, "p0")
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "t1a", "t1b"))
    await sent(p, topic, 0, values(tag, "t1c"))
    await ended(p, True)
    want += values(tag, "t1a", "t1b", "t1c")
    await settled(wire, topic, [0])
    await added(p, [(topic, 0)])
    t2_first = await sent(p, topic, 0, values(tag, "t2a", "t2b"))
    await plain(wire, topic, 0, values(tag, "p1"))
    await sent(p, topic, 0, values(tag, "t2c"))
    await ended(p, False)
    want += values(tag, "p1")
    got, waited = await settled(wire, topic, [0])
    assert got[0].last_stable_offset == got[0].high_watermark, (
        f"the abort of T2 never completed: LSO {got[0].last_stable_offset}, HW {got[0].high_watermark} after "
        f"{waited:.1f} s")
    t2_end = got[0].high_watermark                      # T2's abort marker is the last offset
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "t3a"))
    await ended(p, True)
    want += values(tag, "t3a")
    await settled(wire, topic, [0])
    aborted_values = set(values(tag, "t2a", "t2b", "t2c"))

    uncommitted = await committed_values(wire, topic, 0, isolation=READ_UNCOMMITTED)
    assert aborted_values <= set(uncommitted), f"read_uncommitted must still return T2's records: {uncommitted}"
    whole = await committed_values(wire, topic, 0)
    evidence.note("read_committed", [v.decode() if v else v for v in whole])
    assert whole == want, (
        f"read_committed from offset 0 returned {whole}; Kafka: {want} (T2, producer {p.producer_id}, offsets "
        f"{t2_first}..{t2_end - 1}, was aborted)")
    stepped = await committed_values(wire, topic, 0, max_bytes=1)
    assert stepped == want, (
        f"read_committed one batch per fetch (max bytes 1) returned {stepped}; Kafka lists T2 in every answer whose "
        f"batches reach into it: {want}")
    for start in range(t2_first, t2_end):
        f = await fetch_one(wire, topic, 0, start, label=f"read_committed inside T2 at {start}")
        assert f.aborted and (p.producer_id, t2_first) in f.aborted, (
            f"a read_committed Fetch at {start}, inside aborted T2 (producer {p.producer_id}, first offset "
            f"{t2_first}), answered aborted_transactions {f.aborted}; Kafka lists every aborted transaction whose "
            f"range the answer's records reach")
        rest = await committed_values(wire, topic, 0, start=start)
        leaked = [v for v in rest if v in aborted_values]
        assert not leaked, f"read_committed from offset {start} (inside aborted T2) returned T2's records {leaked}"


@pytest.mark.rule("TXN-READ-COMMITTED-OPEN")
async def test_open_transaction_not_read_committed(wire: Wire, evidence: Evidence) -> None:
    """T1 committed; A opens and writes; B writes after A's first batch and commits; A writes again. read_committed
    returns T1 only — B's committed records lie above A's first offset — and every batch below the LSO; once A
    commits, everything in offset order."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("op")
    a, b = await producer(wire), await producer(wire)
    await added(b, [(topic, 0)])
    await sent(b, topic, 0, values(tag, "t1a", "t1b"))
    await ended(b, True)
    await settled(wire, topic, [0])
    await added(a, [(topic, 0)])
    a_first = await sent(a, topic, 0, values(tag, "a1", "a2"))
    await added(b, [(topic, 0)])
    await sent(b, topic, 0, values(tag, "b1"))
    await ended(b, True)
    await sent(a, topic, 0, values(tag, "a3"))
    await plain(wire, topic, 0, values(tag, "p"))
    await asyncio.sleep(0.2)           # B's marker written (read_committed must not show B regardless)
    records, last = await read_all(wire, topic, 0)
    evidence.note("while_open", {"records": [(o, v.decode() if v else v) for o, v in records],
                                 "lso": last.last_stable_offset, "hw": last.high_watermark, "a_first": a_first})
    assert [v for _, v in records] == values(tag, "t1a", "t1b"), (
        f"with A open from offset {a_first}, read_committed returned {records}; Kafka reads only below the last "
        f"stable offset: T1's records, not A's and not B's later committed ones")
    assert all(o < a_first for o, _ in records), f"records at or above A's first offset {a_first}: {records}"
    await ended(a, True)
    await settled(wire, topic, [0])
    after = await committed_values(wire, topic, 0)
    assert after == values(tag, "t1a", "t1b", "a1", "a2", "b1", "a3", "p"), (
        f"after A committed read_committed returned {after}")


@pytest.mark.rule("TXN-LSO")
async def test_last_stable_offset(wire: Wire, evidence: Evidence) -> None:
    """LSO == HW with nothing open; A opens at offset a: LSO == a while plain records and C's transaction (opened
    later) append; A commits: LSO == C's first offset; C aborts: LSO == HW. Fetch's last_stable_offset and
    read_committed ListOffsets LATEST agree, and never exceed the HW."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("lso")
    seen: list[dict[str, Any]] = []

    async def look(what: str) -> tuple[int, int, int]:
        f = await fetch_one(wire, topic, 0, 0, max_bytes=1, label=what)
        err, latest, _ = await wire.list_offsets(topic, 0, LATEST, isolation_level=1)
        seen.append({"at": what, "fetch_lso": f.last_stable_offset, "list_offsets_rc": latest,
                     "hw": f.high_watermark})
        evidence.note("lso", seen)
        assert f.error == NONE and err == NONE, f"{what}: Fetch error {f.error}, ListOffsets error {err}"
        assert f.last_stable_offset == latest, (
            f"{what}: Fetch last_stable_offset {f.last_stable_offset} but read_committed ListOffsets LATEST {latest}")
        assert f.last_stable_offset <= f.high_watermark, (
            f"{what}: LSO {f.last_stable_offset} above the HW {f.high_watermark}")
        return f.last_stable_offset, latest, f.high_watermark

    await plain(wire, topic, 0, values(tag, "p0", "p1"))
    lso, _, hw = await look("nothing open")
    assert lso == hw == 2, f"nothing open: the LSO must be the HW (2); got LSO {lso}, HW {hw}"
    a, c = await producer(wire), await producer(wire)
    await added(a, [(topic, 0)])
    a_first = await sent(a, topic, 0, values(tag, "a1", "a2"))
    await plain(wire, topic, 0, values(tag, "p2"))
    await added(c, [(topic, 0)])
    c_first = await sent(c, topic, 0, values(tag, "c1"))
    await sent(a, topic, 0, values(tag, "a3"))
    lso, _, hw = await look("A and C open")
    assert lso == a_first and hw > c_first, (
        f"A open from {a_first}, C from {c_first}: the LSO must be A's first offset {a_first}; got {lso} (HW {hw})")
    await ended(a, True)
    await wait_lso(wire, topic, 0, c_first)
    lso, _, hw = await look("A committed, C open")
    assert lso == c_first, f"A committed, C open from {c_first}: the LSO must be {c_first}; got {lso} (HW {hw})"
    await ended(c, False)
    await settled(wire, topic, [0])
    lso, _, hw = await look("A committed, C aborted")
    assert lso == hw, f"nothing open any more: the LSO must be the HW {hw}; got {lso}"


@pytest.mark.rule("TXN-COMMIT-VISIBLE")
async def test_commit_visible_in_every_partition(wire: Wire, evidence: Evidence) -> None:
    """One transaction over three partitions, one to three batches each: read_committed shows none of it anywhere
    before EndTxn; after the commit every partition shows all of its records, in order (within SETTLE_S)."""
    topic = await wire.create_topic(partitions=3, replication_factor=1)
    tag = unique_name("cv")
    p = await producer(wire)
    parts = [(topic, i) for i in range(3)]
    await added(p, parts)
    want: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for i, n in ((0, 3), (1, 1), (2, 2), (0, 1)):
        batch = values(tag, *(f"{i}.{len(want[i]) + k}" for k in range(n)))
        await sent(p, topic, i, batch)
        want[i] += batch
    for i in range(3):
        before = await committed_values(wire, topic, i)
        assert before == [], f"before the commit read_committed of partition {i} returned {before}"
    t0 = time.monotonic()
    await ended(p, True)

    async def every_partition() -> dict[int, list[bytes | None]]:
        return {i: await committed_values(wire, topic, i) for i in range(3)}

    got, _ = await eventually(every_partition, lambda g: g == want, SETTLE_S, 0.05)    # one bound for all three
    evidence.timing("commit visible in all partitions", (time.monotonic() - t0) * 1000, expect_max_ms=SETTLE_S * 1000)
    evidence.note("partitions", {str(i): [v.decode() if v else v for v in got[i]] for i in got})
    for i in range(3):
        assert got[i] == want[i], (
            f"{SETTLE_S:g} s after the commit, read_committed of partition {i} returned {got[i]}; Kafka writes a "
            f"COMMIT marker to every partition of the transaction: {want[i]}")


@pytest.mark.rule("TXN-ABORT-INVISIBLE")
async def test_abort_invisible_in_every_partition(wire: Wire, evidence: Evidence) -> None:
    """A transaction over three partitions is aborted; once its markers are in, read_committed shows none of it in
    any partition while read_uncommitted shows all; a committed transaction afterwards is visible, the aborted one
    still not."""
    topic = await wire.create_topic(partitions=3, replication_factor=1)
    tag = unique_name("ai")
    p = await producer(wire)
    await added(p, [(topic, i) for i in range(3)])
    aborted = {i: values(tag, f"x{i}a", f"x{i}b") for i in range(3)}
    for i in range(3):
        await sent(p, topic, i, aborted[i][:1])
        await sent(p, topic, i, aborted[i][1:])
    await ended(p, False)
    got, waited = await settled(wire, topic, range(3))
    assert all(f.last_stable_offset == f.high_watermark for f in got.values()), (
        f"the abort never completed within {waited:.1f} s: {[(f.last_stable_offset, f.high_watermark) for f in got.values()]}")
    await added(p, [(topic, i) for i in range(3)])
    for i in range(3):
        await sent(p, topic, i, values(tag, f"c{i}"))
    await ended(p, True)
    await settled(wire, topic, range(3))
    for i in range(3):
        rc = await committed_values(wire, topic, i)
        ru = await committed_values(wire, topic, i, isolation=READ_UNCOMMITTED)
        evidence.note(f"partition_{i}", {"read_committed": [v.decode() if v else v for v in rc],
                                         "read_uncommitted": [v.decode() if v else v for v in ru]})
        assert ru == aborted[i] + values(tag, f"c{i}"), f"read_uncommitted of partition {i} returned {ru}"
        assert rc == values(tag, f"c{i}"), (
            f"read_committed of partition {i} returned {rc}; the aborted transaction's records {aborted[i]} must "
            f"never be visible, the later committed one's {values(tag, f'c{i}')} must")


@pytest.mark.rule("TXN-OFFSETS-AT-COMMIT")
@pytest.mark.usefixtures("group_coordinator_ready")
async def test_transactional_offsets_visible_at_commit(wire: Wire, evidence: Evidence) -> None:
    """Plain commit of 1 for partition 0; a transaction commits offsets 5 (partition 0) and 7 (partition 1):
    OffsetFetch serves 1 and -1 until it commits, 5 and 7 after; a second transaction's offset 9 is aborted: 5
    stays."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    group = unique_name("txg")
    co = await wire.coordinator(group)
    tp0, tp1 = (topic, 0), (topic, 1)
    assert await co.offset_commit(group, {tp0: (1, None)}) == {tp0: NONE}
    p = await producer(wire)
    await added(p, [tp0])
    await sent(p, topic, 0, [b"x"])
    assert await p.add_offsets(group) == NONE, "AddOffsetsToTxn refused"
    assert await p.txn_offset_commit(group, {tp0: 5, tp1: 7}) == {tp0: NONE, tp1: NONE}
    _, pending = await offset_fetch_stable(co, group, [tp0, tp1], require_stable=False)
    evidence.note("while_open", {str(k): v for k, v in pending.items()})
    assert pending == {tp0: (1, NONE), tp1: (-1, NONE)}, (
        f"while the transaction is open OffsetFetch answered {pending}; Kafka serves the last committed offsets "
        f"(partition 0: 1, partition 1: none = -1), not the pending transactional ones (5, 7)")
    await ended(p, True)
    after, _ = await eventually(lambda: offset_fetch_stable(co, group, [tp0, tp1], require_stable=False),
                                lambda r: r[1] == {tp0: (5, NONE), tp1: (7, NONE)}, SETTLE_S, 0.05)
    assert after[1] == {tp0: (5, NONE), tp1: (7, NONE)}, f"after the commit OffsetFetch answered {after[1]}"
    await settled(wire, topic, [0])
    await p.add_offsets(group)
    assert await p.txn_offset_commit(group, {tp0: 9}) == {tp0: NONE}
    await ended(p, False)
    await settled(wire, topic, [0])
    final, _ = await eventually(lambda: offset_fetch_stable(co, group, [tp0, tp1], require_stable=True),
                                lambda r: r[1].get(tp0, (0, 0))[1] == NONE, SETTLE_S, 0.05)
    evidence.note("after_abort", {str(k): v for k, v in final[1].items()})
    assert final[1] == {tp0: (5, NONE), tp1: (7, NONE)}, (
        f"after the second transaction (offset 9 for partition 0) aborted, OffsetFetch answered {final[1]}; Kafka "
        f"discards aborted transactional offsets: 5 and 7")


@pytest.mark.rule("TXN-REQUIRE-STABLE")
@pytest.mark.usefixtures("group_coordinator_ready")
async def test_require_stable_while_offsets_pending(wire: Wire, evidence: Evidence) -> None:
    """A pending TxnOffsetCommit for partition 0: require_stable answers UNSTABLE_OFFSET_COMMIT (-1) for it and the
    committed offset for partition 2 (not in the transaction); without require_stable both answer at once; after the
    commit require_stable answers the new offset."""
    topic = await wire.create_topic(partitions=3, replication_factor=1)
    group = unique_name("rsg")
    co = await wire.coordinator(group)
    if (co.broker_max_version("OffsetFetch") or 0) < 7:
        pytest.skip("the target serves OffsetFetch below v7: no require_stable (KIP-447)")
    tp0, tp2 = (topic, 0), (topic, 2)
    assert await co.offset_commit(group, {tp0: (1, None), tp2: (3, None)}) == {tp0: NONE, tp2: NONE}
    p = await producer(wire)
    assert await p.add_offsets(group) == NONE, "AddOffsetsToTxn refused"
    assert await p.txn_offset_commit(group, {tp0: 4}) == {tp0: NONE}
    top, stable = await offset_fetch_stable(co, group, [tp0, tp2], require_stable=True)
    _, loose = await offset_fetch_stable(co, group, [tp0, tp2], require_stable=False)
    evidence.note("pending", {"require_stable": {str(k): v for k, v in stable.items()}, "top_error": top,
                              "not_stable": {str(k): v for k, v in loose.items()}})
    assert top == NONE and stable == {tp0: (-1, UNSTABLE_OFFSET_COMMIT), tp2: (3, NONE)}, (
        f"with a transactional offset pending for partition 0, OffsetFetch require_stable answered top-level {top}, "
        f"partitions {stable}; Kafka (KIP-447): partition 0 UNSTABLE_OFFSET_COMMIT ({UNSTABLE_OFFSET_COMMIT}) with "
        f"offset -1, partition 2 (no pending offset) its committed 3")
    assert loose == {tp0: (1, NONE), tp2: (3, NONE)}, f"without require_stable OffsetFetch answered {loose}"
    await ended(p, True)
    after, _ = await eventually(lambda: offset_fetch_stable(co, group, [tp0, tp2], require_stable=True),
                                lambda r: r[1].get(tp0, (0, -1))[1] != UNSTABLE_OFFSET_COMMIT, SETTLE_S, 0.05)
    assert after[1] == {tp0: (4, NONE), tp2: (3, NONE)}, (
        f"after the commit OffsetFetch require_stable answered {after[1]}; Kafka: 4 and 3")


@pytest.mark.rule("TXN-FENCING")
@pytest.mark.usefixtures("group_coordinator_ready")
async def test_fenced_producer_mid_transaction(wire: Wire, evidence: Evidence) -> None:
    """P opens a transaction and writes; Q calls InitProducerId for the same transactional id: a higher epoch, P's
    transaction aborted. Each of P's requests with its old epoch is refused with Kafka's code for that API and
    version and writes nothing; Q's transaction commits."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("fe")
    group = unique_name("feg")
    p = await producer(wire)
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "p1", "p2"))
    assert await p.add_offsets(group) == NONE, "AddOffsetsToTxn refused"
    q = TxnProducer(wire, p.transactional_id)
    assert await q.init() == NONE, "the second instance's InitProducerId failed"
    evidence.note("epochs", {"producer_id": p.producer_id, "old": p.epoch, "new": q.epoch, "new_id": q.producer_id})
    assert q.producer_id == p.producer_id and q.epoch > p.epoch, (
        f"InitProducerId for {p.transactional_id} again gave producer {q.producer_id} epoch {q.epoch}; Kafka keeps "
        f"the producer id {p.producer_id} and bumps the epoch above {p.epoch}")
    hw_before = (await settled(wire, topic, [0]))[0][0].high_watermark     # P's transaction aborted by Q's init
    answers = {
        "Produce": (await p.send(topic, 0, values(tag, "p3"), label="fenced Produce"))[0],
        "AddPartitionsToTxn": (await p.add_partitions([(topic, 1)], retry=False))[(topic, 1)],
        "AddOffsetsToTxn": await p.add_offsets(group, retry=False),
        "TxnOffsetCommit": (await p.txn_offset_commit(group, {(topic, 0): 2}))[(topic, 0)],
        "EndTxn": await p.end(True, retry=False),
    }
    evidence.note("fenced_answers", answers)
    assert answers == FENCED_CODES, (
        f"the fenced instance (epoch {p.epoch} < {q.epoch}) was answered {answers}; Kafka answers {FENCED_CODES} "
        f"(PRODUCER_FENCED={PRODUCER_FENCED}, INVALID_PRODUCER_EPOCH={INVALID_PRODUCER_EPOCH})")
    got, _ = await settled(wire, topic, [0, 1])
    ru = await committed_values(wire, topic, 0, isolation=READ_UNCOMMITTED)
    assert values(tag, "p3")[0] not in ru and got[0].high_watermark == hw_before, (
        f"the fenced Produce was appended: HW {hw_before} -> {got[0].high_watermark}, records {ru}")
    assert got[1].high_watermark == 0, f"the fenced producer wrote to partition 1: HW {got[1].high_watermark}"
    await added(q, [(topic, 0)])
    await sent(q, topic, 0, values(tag, "q1"))
    await ended(q, True)
    await settled(wire, topic, [0])
    rc = await committed_values(wire, topic, 0)
    assert rc == values(tag, "q1"), (
        f"read_committed returned {rc}; the fenced instance's open transaction (p1, p2) is aborted by the new "
        f"InitProducerId, the new instance's commit (q1) is visible")
    _, offsets = await offset_fetch_stable(await wire.coordinator(group), group, [(topic, 0)], require_stable=False)
    assert offsets[(topic, 0)][0] == -1, f"the fenced TxnOffsetCommit was applied: {offsets}"


@pytest.mark.rule("TXN-TIMEOUT-ABORTS")
async def test_abandoned_transaction_times_out(wire: Wire, evidence: Evidence) -> None:
    """A producer with transaction.timeout.ms 1 s writes to two partitions and goes silent: within the timeout plus
    the coordinator's scan interval the transaction is aborted (LSO == HW, its records never read_committed, listed
    as aborted), and the producer is fenced."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("to")
    coordinator = await txn_coordinator(wire, unique_name("probe"), within_s=FIND_WITHIN_S["s"])
    interval = await broker_setting(coordinator, CLEANUP_INTERVAL, DEFAULT_CLEANUP_INTERVAL_MS)
    bound_s = (ABANDON_TIMEOUT_MS + interval) / 1000 + 3.0
    p = await producer(wire, timeout_ms=ABANDON_TIMEOUT_MS)
    await added(p, [(topic, 0), (topic, 1)])
    t0 = time.monotonic()
    firsts = [await sent(p, topic, i, values(tag, f"{i}a", f"{i}b")) for i in range(2)]
    await plain(wire, topic, 1, values(tag, "plain"))
    early = await fetch_one(wire, topic, 0, 0, max_bytes=1)
    assert early.last_stable_offset == firsts[0], f"the transaction is open: LSO {early.last_stable_offset}"
    got, _ = await settled(wire, topic, [0, 1], within_s=bound_s)
    waited = time.monotonic() - t0
    evidence.timing("abandoned transaction aborted", waited * 1000, expect_min_ms=ABANDON_TIMEOUT_MS * 0.9,
                    expect_max_ms=bound_s * 1000, cleanup_interval_ms=interval)
    assert all(f.last_stable_offset == f.high_watermark for f in got.values()), (
        f"the transaction (timeout {ABANDON_TIMEOUT_MS} ms, scan every {interval} ms) was still open after "
        f"{waited:.1f} s: {[(f.last_stable_offset, f.high_watermark) for f in got.values()]}")
    for i in range(2):
        rc = await committed_values(wire, topic, i)
        assert rc == ([] if i == 0 else values(tag, "plain")), (
            f"after the timeout abort read_committed of partition {i} returned {rc}")
        f = await fetch_one(wire, topic, i, firsts[i])
        assert f.aborted and f.aborted[0][0] == p.producer_id, f"partition {i}: aborted_transactions {f.aborted}"
    answers = {"EndTxn": await p.end(True, retry=False),
               "Produce": (await p.send(topic, 0, values(tag, "late"), label="Produce after the timeout"))[0]}
    evidence.note("after_timeout", answers)
    assert answers == {"EndTxn": PRODUCER_FENCED, "Produce": INVALID_PRODUCER_EPOCH}, (
        f"the abandoned producer after its timeout was answered {answers}; Kafka bumps the epoch when it aborts a "
        f"timed-out transaction: EndTxn PRODUCER_FENCED ({PRODUCER_FENCED}), Produce INVALID_PRODUCER_EPOCH "
        f"({INVALID_PRODUCER_EPOCH})")


@pytest.mark.rule("TXN-VERIFY-PARTITION")
async def test_produce_to_partition_not_in_transaction_refused(wire: Wire, evidence: Evidence) -> None:
    """Partition 0 added, partition 1 not: the transactional Produce to 1 is INVALID_TXN_STATE and appends nothing
    (its sequence 0 is still free afterwards); after the commit, a Produce to 0 in the next transaction before
    adding it again is refused too."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("vp")
    p = await producer(wire)
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "a"))
    err, _ = await p.send(topic, 1, values(tag, "stray"), label="Produce to a partition not in the transaction")
    hw1 = (await fetch_one(wire, topic, 1, 0, max_bytes=1)).high_watermark
    evidence.note("not_added", {"error": err, "hw_partition_1": hw1})
    assert err == INVALID_TXN_STATE, (
        f"a transactional Produce to {topic}/1, never added with AddPartitionsToTxn, answered {err}; Kafka (KIP-890 "
        f"part 1 verification): INVALID_TXN_STATE ({INVALID_TXN_STATE})")
    assert hw1 == 0, f"the refused batch was appended: partition 1's HW is {hw1}"
    await added(p, [(topic, 1)])
    await sent(p, topic, 1, values(tag, "b"))
    await ended(p, True)
    await settled(wire, topic, [0, 1])
    # While the coordinator still completes the previous transaction (markers acknowledged, CompleteCommit not yet
    # written) the leader's verification gets CONCURRENT_TRANSACTIONS, which Kafka answers a Produce <= v10 as the
    # retriable NOT_ENOUGH_REPLICAS; a producer retries it, and so does the check.
    (err2, _), _ = await eventually(
        lambda: p.send(topic, 0, values(tag, "next"), label="Produce before AddPartitionsToTxn, next txn"),
        lambda r: r[0] != NOT_ENOUGH_REPLICAS, SETTLE_S, 0.1)
    assert err2 == INVALID_TXN_STATE, (
        f"after the commit, a Produce to {topic}/0 (in the previous transaction, not yet added to a new one) "
        f"answered {err2}; Kafka: INVALID_TXN_STATE ({INVALID_TXN_STATE})")
    ru = await committed_values(wire, topic, 0, isolation=READ_UNCOMMITTED)
    assert ru == values(tag, "a"), f"partition 0 holds {ru}; only 'a' was accepted"
    assert await committed_values(wire, topic, 1) == values(tag, "b")


async def tv2_producer(w: Wire) -> TxnProducer:
    """An initialised producer for the transaction version 2 checks; skipped on a target that does not finalize
    transaction.version >= 2 (it may serve transactions with version 1 only: no rule is broken by that). A target
    that finalizes it must serve EndTxn v5 and Produce v12, the versions TV2 clients send."""
    tv = transaction_version(w)
    if tv < 2:
        pytest.skip(f"the target finalizes transaction.version {tv} (ApiVersions): transaction version 2 not in use")
    served = {api: w.broker_max_version(api) or -1 for api in ("EndTxn", "Produce")}
    assert served["EndTxn"] >= END_TXN_TV2 and served["Produce"] >= PRODUCE_TV2, (
        f"the target finalizes transaction.version {tv} but serves EndTxn up to v{served['EndTxn']} and Produce up "
        f"to v{served['Produce']}; transaction version 2 clients need EndTxn v5 and Produce v12")
    return await producer(w)


async def sent_tv2(p: TxnProducer, topic: str, partition: int, payloads: Sequence[bytes]) -> int:
    err, base = await p.send(topic, partition, payloads, version=PRODUCE_TV2, label="Produce v12")
    assert err == NONE, (f"the transactional Produce v12 of {len(payloads)} records to {topic}/{partition} (not "
                         f"added with AddPartitionsToTxn) answered {err}")
    return base


@pytest.mark.rule("TXN-TV2-EPOCH-BUMP")
async def test_tv2_epoch_bumps_at_every_end(wire: Wire, evidence: Evidence) -> None:
    """Commit, then abort, with EndTxn v5: each answers the epoch one higher; the epoch before a bump is refused by
    the partition leader afterwards, appending nothing; the aborted transaction stays invisible."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("tb")
    p = await tv2_producer(wire)
    pid, e0 = p.producer_id, p.epoch
    await sent_tv2(p, topic, 0, values(tag, "a"))
    commit = await p.end_tv2(True)
    await settled(wire, topic, [0])
    stale = await p.send(topic, 0, values(tag, "stale"), epoch=e0, version=PRODUCE_TV2,
                         label="Produce v12 with the epoch before the bump")
    p.sequences.clear()
    await sent_tv2(p, topic, 0, values(tag, "b"))
    abort = await p.end_tv2(False)
    await settled(wire, topic, [0])
    # retried while the abort completes: Kafka on 3 nodes answers CONCURRENT_TRANSACTIONS (51) until CompleteAbort
    # is replicated in __transaction_state, then the fencing answer this rule is about
    older = await p.end_tv2(False, epoch=e0, adopt=False)
    evidence.note("tv2_epochs", {"init": [pid, e0], "commit": commit, "stale_produce": stale[0], "abort": abort,
                                 "end_txn_epoch_two_behind": older})
    assert commit == (NONE, pid, e0 + 1), (
        f"EndTxn v5 commit at epoch {e0} answered (error, producer id, epoch) {commit}; Kafka (KIP-890 part 2): "
        f"{(NONE, pid, e0 + 1)}, the epoch bumped at every EndTxn")
    assert stale[0] == INVALID_PRODUCER_EPOCH, (
        f"after the bump to {e0 + 1}, a Produce v12 with epoch {e0} answered {stale[0]}; Kafka: INVALID_PRODUCER_EPOCH "
        f"({INVALID_PRODUCER_EPOCH}): the COMMIT marker carried the new epoch")
    assert abort == (NONE, pid, e0 + 2), (
        f"EndTxn v5 abort at epoch {e0 + 1} answered {abort}; Kafka: {(NONE, pid, e0 + 2)}")
    assert older[0] == PRODUCER_FENCED, (
        f"EndTxn v5 with epoch {e0} (two bumps ago) answered {older}; Kafka: PRODUCER_FENCED ({PRODUCER_FENCED})")
    assert await committed_values(wire, topic, 0) == values(tag, "a")
    ru = await committed_values(wire, topic, 0, isolation=READ_UNCOMMITTED)
    assert ru == values(tag, "a", "b"), f"read_uncommitted holds {ru}: the stale-epoch Produce must append nothing"


@pytest.mark.rule("TXN-TV2-RETRY")
async def test_tv2_retried_end_answers_the_outcome(wire: Wire, evidence: Evidence) -> None:
    """After an EndTxn v5 commit completed: the same request again (the epoch before the bump) answers NONE with
    the current epoch and bumps nothing; an abort with that epoch is INVALID_TXN_STATE; an abort with the current
    epoch and nothing added is an empty transaction (epoch + 1), retried likewise; a commit then INVALID_TXN_STATE."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("tr")
    p = await tv2_producer(wire)
    pid, e0 = p.producer_id, p.epoch
    await sent_tv2(p, topic, 0, values(tag, "a"))
    first = await p.end_tv2(True)
    await settled(wire, topic, [0])
    answers = {
        "commit_retry": await p.end_tv2(True, epoch=e0, adopt=False),
        "abort_with_previous_epoch": (await p.end_tv2(False, epoch=e0, retry=False, adopt=False))[0],
        "empty_abort": await p.end_tv2(False),
    }
    answers["empty_abort_retry"] = await p.end_tv2(False, epoch=e0 + 1, adopt=False)
    answers["commit_after_abort"] = (await p.end_tv2(True, retry=False, adopt=False))[0]
    evidence.note("tv2_retry", {"init": [pid, e0], "first_commit": first, **answers})
    want = {"commit_retry": (NONE, pid, e0 + 1), "abort_with_previous_epoch": INVALID_TXN_STATE,
            "empty_abort": (NONE, pid, e0 + 2), "empty_abort_retry": (NONE, pid, e0 + 2),
            "commit_after_abort": INVALID_TXN_STATE}
    assert first == (NONE, pid, e0 + 1), f"the first EndTxn v5 commit answered {first}"
    assert answers == want, (
        f"after a completed EndTxn v5 commit (epoch {e0} -> {e0 + 1}) Kafka answers {want} "
        f"(INVALID_TXN_STATE={INVALID_TXN_STATE}); the target answered {answers}")
    assert await committed_values(wire, topic, 0) == values(tag, "a")


@pytest.mark.rule("TXN-TV2-IMPLICIT-ADD")
async def test_tv2_produce_adds_its_partition(wire: Wire, evidence: Evidence) -> None:
    """Produce v12 to two partitions with no AddPartitionsToTxn: both appended, both in the transaction
    (DescribeTransactions), invisible to read_committed until the EndTxn v5 commit, visible after it."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("ia")
    p = await tv2_producer(wire)
    firsts = [await sent_tv2(p, topic, i, values(tag, f"{i}a", f"{i}b")) for i in range(2)]
    assert p.coordinator is not None
    d = await describe_transaction(p.coordinator, p.transactional_id)
    listed = sorted((t.topic, q) for t in d.topics for q in t.partitions)
    early = [await fetch_one(wire, topic, i, 0, max_bytes=1) for i in range(2)]
    evidence.note("described", {"state": d.transaction_state, "partitions": listed, "error": d.error_code,
                                "lso": [f.last_stable_offset for f in early]})
    assert d.error_code == NONE and d.transaction_state == "Ongoing" and listed == [(topic, 0), (topic, 1)], (
        f"after Produce v12 to {topic}/0 and /1, DescribeTransactions answered error {d.error_code}, state "
        f"{d.transaction_state!r}, partitions {listed}; Kafka: Ongoing with both (the leaders added them)")
    assert [f.last_stable_offset for f in early] == firsts, (
        f"the open transaction's LSOs are {[f.last_stable_offset for f in early]}, want its first offsets {firsts}")
    err = (await p.end_tv2(True))[0]
    assert err == NONE, f"EndTxn v5 commit answered {err}"
    got, waited = await settled(wire, topic, [0, 1])
    assert all(f.last_stable_offset == f.high_watermark for f in got.values()), (
        f"{waited:.1f} s after the commit a partition added by Produce v12 is still open: "
        f"{[(f.last_stable_offset, f.high_watermark) for f in got.values()]} (no COMMIT marker reached it)")
    for i in range(2):
        rc = await committed_values(wire, topic, i)
        assert rc == values(tag, f"{i}a", f"{i}b"), f"read_committed of partition {i} returned {rc}"


# ------------------------------------------------------------------------------------------- replicated


@pytest.fixture
async def cluster(replicated_target: Target, evidence: Evidence) -> Any:
    """A replicated target and a Wire to it; every fault undone after."""
    c = Cluster(replicated_target, await Wire.connect(replicated_target.bootstrap, evidence=evidence))
    try:
        await c.start()
        yield c
    finally:
        c.heal()
        await c.close()


async def placed_topic(c: Cluster, replicas: list[int], configs: dict[str, str] | None = None) -> str:
    """A one-partition topic with exactly ``replicas`` (the first leads), its ISR full."""
    name = unique_name("txr")
    code, msg = await c.wire.create_topic_code(name, configs=configs, assignments=[replicas])
    assert code == NONE, f"CreateTopics {name} on {replicas} answered {code}: {msg}"
    await c.wire.wait_topic_ready(name, 1)
    st, _ = await eventually(lambda: state(c.wire, name), lambda s: len(s.isr) == len(replicas) and
                             s.leader == replicas[0], 30)
    assert st.leader == replicas[0] and len(st.isr) == len(replicas), f"{name} not ready on {replicas}: {st}"
    return name


async def coordinator_node(c: Cluster, transactional_id: str) -> int:
    co = await txn_coordinator(c.wire, transactional_id, within_s=FIND_WITHIN_S["s"])
    return next(b for b, addr in c.brokers.items() if addr == (co.conn.host, co.conn.port))


async def cluster_producer(c: Cluster) -> tuple[TxnProducer, int]:
    """An initialised transactional producer whose connections hang off its coordinator's Wire (the checks never
    fault the coordinator, and Cluster.kill closes the killed node's Wire with its siblings); the coordinator's id."""
    transactional_id = unique_name("txn")
    coord = await coordinator_node(c, transactional_id)
    p = TxnProducer(await c.to(coord), transactional_id)
    assert await p.init() == NONE, f"InitProducerId for {p.transactional_id} failed"
    return p, coord


@pytest.mark.requires_capability("replication", "pause_broker")
@pytest.mark.rule("TXN-CONCURRENT")
async def test_concurrent_transactions_while_markers_pending(cluster: Cluster, evidence: Evidence) -> None:
    """The transaction's one partition lives (1 replica) on a broker X other than the coordinator; X is paused and
    the transaction committed: its COMMIT marker cannot be written, so AddPartitionsToTxn and InitProducerId answer
    CONCURRENT_TRANSACTIONS; X resumes, the marker is written, both succeed and the records are visible."""
    if len(cluster.brokers) < 3:
        pytest.skip("needs 3 brokers")
    p, coord = await cluster_producer(cluster)
    x = next(b for b in sorted(cluster.brokers) if b != coord)
    topic = await placed_topic(cluster, [x])
    other = await placed_topic(cluster, [coord])
    tag = unique_name("cc")
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "a", "b"))
    cluster.pause(x)
    paused_at = time.monotonic()
    err = await p.end(True)
    assert err == NONE, f"EndTxn commit answered {err} while the partition's leader {x} was paused"
    # Each answer is judged only if the coordinator described the transaction as PrepareCommit just before it was
    # asked (the marker pending then): the check holds the marker pending for exactly as long as it asks, whatever
    # the machine's load does to the timing. (Kafka 4.4.0 once answered [51, 0, 0] to three asks 0.3 s apart.)
    asked: list[tuple[str, str, int, str, float]] = []   # (request, state before, answer, state after, s since pause)

    async def ask(what: str, request: Callable[[], Awaitable[int]]) -> None:
        before = (await describe_transaction(p.coordinator, p.transactional_id)).transaction_state
        answer = await request()
        after = (await describe_transaction(p.coordinator, p.transactional_id)).transaction_state
        asked.append((what, before, answer, after, round(time.monotonic() - paused_at, 2)))

    async def add_other() -> int:
        return (await p.add_partitions([(other, 0)], retry=False))[(other, 0)]

    async def init_again() -> int:
        return (await p.init_once())[0]

    for _ in range(3):
        await ask("AddPartitionsToTxn", add_other)
        await asyncio.sleep(0.3)
    await ask("InitProducerId", init_again)
    evidence.note("while_markers_pending", {"coordinator": coord, "paused_leader": x, "asked (request, state "
                                            "before, answer, state after, s since pause)": asked})
    judged = [a for a in asked if a[1] == "PrepareCommit"]
    if not judged:
        pytest.skip(f"the coordinator no longer described the commit as pending when the check asked, though the "
                    f"leader {x} of {topic}/0 was stopped: {asked}")
    assert all(a[2] == CONCURRENT_TRANSACTIONS for a in judged), (
        f"while the COMMIT marker for {topic}/0 (leader {x}, paused) is pending, AddPartitionsToTxn x3 and "
        f"InitProducerId answered (request, coordinator state before, answer, state after, s since pause) {asked}; "
        f"Kafka: CONCURRENT_TRANSACTIONS ({CONCURRENT_TRANSACTIONS}) while the state is PrepareCommit")
    cluster.resume(x)
    got, _ = await eventually(lambda: p.add_partitions([(other, 0)], retry=False),
                              lambda r: r[(other, 0)] != CONCURRENT_TRANSACTIONS, 60, 0.2)
    assert got[(other, 0)] == NONE, f"after {x} resumed AddPartitionsToTxn answered {got}"
    lw = await cluster.to(x)
    rc, _ = await eventually(lambda: committed_values(lw, topic, 0), lambda v: v == values(tag, "a", "b"), 30, 0.1)
    assert rc == values(tag, "a", "b"), f"after the marker was written read_committed returned {rc}"
    await ended(p, False)


@pytest.mark.requires_capability("replication", "kill_broker", "restart")
@pytest.mark.rule("TXN-MARKERS-FAILOVER")
async def test_markers_survive_leader_failover(cluster: Cluster, evidence: Evidence) -> None:
    """A 3-replica partition led by L (not the coordinator): T1 committed, T2 aborted, T3 open; L is killed (-9)
    and T3 committed. The new leader shows T1 and T3, not T2, with nothing left open — the markers of T1/T2 were
    replicated, T3's reached the new leader. (Killed, not paused: a paused leader holds the coordinator's marker
    request until its request timeout, 30 s in Kafka; a dead one refuses it at once.)"""
    if len(cluster.brokers) < 3:
        pytest.skip("needs 3 brokers")
    p, coord = await cluster_producer(cluster)
    leader = next(b for b in sorted(cluster.brokers) if b != coord)
    topic = await placed_topic(cluster, [leader, *[b for b in sorted(cluster.brokers) if b != leader]],
                               {"min.insync.replicas": "2"})
    tag = unique_name("mf")
    lw = await cluster.to(leader)
    for name, commit in (("t1", True), ("t2", False)):
        await added(p, [(topic, 0)])
        await sent(p, topic, 0, values(tag, f"{name}a", f"{name}b"))
        await ended(p, commit)
        await settled(lw, topic, [0])
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "t3a"))
    st = await state(cluster.wire, topic)
    await cluster.kill(leader)
    t0 = time.monotonic()
    err = await p.end(True)
    assert err == NONE, f"EndTxn commit answered {err} with the partition's leader {leader} killed"
    st2, nw, _ = await cluster.new_leader(topic, st)
    want = values(tag, "t1a", "t1b", "t3a")
    # Once T3's last record is visible the LSO is past it: T1, T2 and T3 are all decided on the new leader, so
    # what it shows then is final (no need to wait out the bound when it is wrong).
    rc, _ = await eventually(lambda: committed_values(nw, topic, 0), lambda v: want[-1] in v, 60, 0.2)
    last = await fetch_one(nw, topic, 0, 0, max_bytes=1)
    evidence.note("failover", {"coordinator": coord, "old_leader": leader, "new_leader": st2.leader,
                               "read_committed": [v.decode() if v else v for v in rc],
                               "lso": last.last_stable_offset, "hw": last.high_watermark,
                               "seconds": round(time.monotonic() - t0, 1)})
    assert rc == want, (
        f"the new leader {st2.leader} shows read_committed {rc} (LSO {last.last_stable_offset}, HW "
        f"{last.high_watermark}); Kafka: {want} — T1 committed and T2 aborted before the failover (markers "
        f"replicated), T3 committed while {leader} was down (its marker re-sent to the new leader)")
    assert last.last_stable_offset == last.high_watermark, f"a transaction still open on {st2.leader}: {last}"
