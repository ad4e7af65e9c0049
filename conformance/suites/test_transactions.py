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
- a commit at the moment the timeout aborts the transaction ends it once: the markers agree with the EndTxn answer;
  a TV2 transaction opened by Produce v12 and timed out ends CompleteAbort at the epoch + 1.
Replicated (a 3-broker target): CONCURRENT_TRANSACTIONS while a transaction's markers cannot be written (its
partition's leader paused) — to AddPartitionsToTxn, EndTxn of either outcome and InitProducerId —, markers that
reach a new leader after a failover, the outcome surviving it, and a transaction that completes once
__transaction_state recovers (below min ISR, or its leader killed) after EndTxn was answered.

Kafka answers EndTxn once the PrepareCommit/PrepareAbort state is durable and writes the markers afterwards, so
"after a commit" means once the markers are in: checks wait for it (bounded), never sleep a fixed time.

The partition leader's side (single broker, at the end): a Produce that would leave an orphan transactional batch
is refused (no hanging transaction); a stale or duplicated marker (WriteTxnMarkers, which Kafka 4.4.0 serves to a
client on its broker listener without an authorizer) never completes the next transaction; the LSO never falls
below the log start after DeleteRecords; aborted_transactions lists only transactions that wrote the partition;
a transaction version 2 producer's first batch in a partition starts at sequence 0.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from kafka import errors as E
from kafka.protocol.admin import DescribeProducersRequest, ListTransactionsRequest
from kafka.protocol.producer import ProduceRequest, TxnOffsetCommitRequest

from conformance.cluster import Cluster, eventually, state
from conformance.evidence import Evidence
from conformance.rules import rule
from conformance.txn import (
    CONCURRENT_TRANSACTIONS,
    END_TXN_TV2,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCE_TV2,
    PRODUCER_FENCED,
    READ_UNCOMMITTED,
    TRANSACTION_COORDINATOR_FENCED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNSTABLE_OFFSET_COMMIT,
    Committed,
    TxnProducer,
    describe_transaction,
    fetch_one,
    last_marker,
    offset_fetch_stable,
    read_all,
    retry_coordinator,
    serves_write_txn_markers,
    transaction_version,
    txn_batch,
    txn_coordinator,
    write_txn_marker,
)
from conformance.wire import EARLIEST, LATEST, TargetDiverged, Wire, unique_name

SUITE = "transactions"
NOT_ENOUGH_REPLICAS = E.NotEnoughReplicasError.errno
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
    # An AddPartitionsToTxn asked in PrepareCommit may still meet a completed transaction (Kafka 4.4.0, 3 nodes, under
    # load, completed the commit while the asks went on: [PrepareCommit, 0, Ongoing] at 11.2 s). So an answer NONE
    # counts as the rule broken only if the transaction it joined still holds the committed transaction's partition
    # (it was added to the pending one); a new transaction holding only the added partition means the commit
    # completed first (not judged). Every ask is kept in the evidence.
    asked: list[tuple[str, str, int, str, bool, float]] = []
    # (request, state before, answer, state after, after holds the committed partition, s since pause)

    async def ask(what: str, request: Callable[[], Awaitable[int]]) -> None:
        before = (await describe_transaction(p.coordinator, p.transactional_id)).transaction_state
        answer = await request()
        after = await describe_transaction(p.coordinator, p.transactional_id)
        holds = (topic, 0) in {(t.topic, q) for t in after.topics for q in t.partitions}
        asked.append((what, before, answer, after.transaction_state, holds, round(time.monotonic() - paused_at, 2)))

    async def add_other() -> int:
        return (await p.add_partitions([(other, 0)], retry=False))[(other, 0)]

    async def init_again() -> int:
        return (await p.init_once())[0]

    for _ in range(3):
        await ask("AddPartitionsToTxn", add_other)
        await asyncio.sleep(0.3)
    await ask("InitProducerId", init_again)
    evidence.note("while_markers_pending", {"coordinator": coord, "paused_leader": x, "asked (request, state "
                                            "before, answer, state after, holds the committed partition, s since "
                                            "pause)": asked})
    judged = [a for a in asked if a[1] == "PrepareCommit" and (a[2] != NONE or a[4])]
    if not judged:
        pytest.skip(f"the coordinator no longer described the commit as pending when the check asked, though the "
                    f"leader {x} of {topic}/0 was stopped: {asked}")
    assert all(a[2] == CONCURRENT_TRANSACTIONS for a in judged), (
        f"while the COMMIT marker for {topic}/0 (leader {x}, paused) is pending, AddPartitionsToTxn x3 and "
        f"InitProducerId answered (request, state before, answer, state after, holds the committed partition, s "
        f"since pause) {asked}; "
        f"Kafka: CONCURRENT_TRANSACTIONS ({CONCURRENT_TRANSACTIONS}) while the state is PrepareCommit")
    cluster.resume(x)
    if any(a[1] != "PrepareCommit" or a[3] != "PrepareCommit" for a in asked):
        # the commit completed while the check asked (the asks after it began, and InitProducerId fenced, a new
        # transaction): what follows the resume is about a marker held until then, which this run did not have
        evidence.note("completed_while_asking", True)
        return
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


# ------------------------------------------------------------------------------------------- TxnOffsetCommit errors
# (issue 24, item 8) and the admin views of transactions (item 9): single broker, and every broker of a cluster

ILLEGAL_GENERATION = E.IllegalGenerationError.errno
TXN_OFFSET_COMMIT_TV1, TXN_OFFSET_COMMIT_TV2 = 3, 5      # what the Java client sends (TV1 / TV2 producers)
LONG_DURATION_MS = 600_000                              # a ListTransactions duration no transaction here reaches
INVALID_REGULAR_EXPRESSION = 128        # Errors.INVALID_REGULAR_EXPRESSION (KIP-848); kafka.errors has no class for it

rule("TXN-OFFSET-COMMIT-UNKNOWN-GROUP", "a TxnOffsetCommit (v3+) with a generation (>= 0) for a group the "
     "coordinator does not know answers ILLEGAL_GENERATION for every partition at every version (v3 and v4 of "
     "transaction version 1, v5 of version 2), not GROUP_ID_NOT_FOUND (fatal for the Java producer), commits "
     "nothing and leaves the transaction usable: a commit without a generation (-1, a simple group) in the same "
     "transaction is applied when it commits",
     "KIP-447; OffsetMetadataManager.validateTransactionalOffsetCommit (GroupIdNotFoundException with "
     "generationId >= 0 → ILLEGAL_GENERATION; generationId < 0 → getOrMaybeCreateClassicGroup); "
     "TransactionManager.TxnOffsetCommitHandler (ILLEGAL_GENERATION abortable, GROUP_ID_NOT_FOUND fatal)", SUITE)
rule("TXN-OFFSET-COMMIT-PRECEDENCE", "TxnOffsetCommit verifies the producer's transaction before it looks at the "
     "group: a fenced producer (an older epoch) committing for an unknown group with a generation is answered "
     "INVALID_PRODUCER_EPOCH, not ILLEGAL_GENERATION, and nothing is committed",
     "KIP-890 part 1; GroupCoordinatorService.commitTransactionalOffsets → CoordinatorRuntime."
     "scheduleTransactionalWriteOperation (CoordinatorPartitionWriter.maybeStartTransactionVerification before the "
     "operation runs OffsetMetadataManager.commitTransactionalOffset); AddPartitionsToTxnManager (PRODUCER_FENCED → "
     "INVALID_PRODUCER_EPOCH)", SUITE)
rule("TXN-LIST-FILTERS", "ListTransactions lists every transactional id its broker coordinates but Dead ones, "
     "with its producer id and state, narrowed by state names (unknown names listed back in unknown_state_filters), "
     "producer ids, v1+ a duration (only ids whose current or last transaction started more than that many ms ago: "
     "an initialised id that never began one, start -1, passes every duration; one that just began does not) and "
     "v2+ a transactional id pattern matching the whole id (one that does not compile: INVALID_REGULAR_EXPRESSION, "
     "nothing listed)",
     "KIP-664; KIP-994; KIP-1152; TransactionStateManager.listTransactionStates (shouldInclude: state != Dead, "
     "producer id and state filters, filterDurationMs >= 0 && now - txnStartTimestamp <= filterDurationMs → "
     "excluded, re2j Pattern.matcher(transactionalId).matches(), PatternSyntaxException → "
     "InvalidRegularExpression); TransactionMetadata.prepareIncrementProducerEpoch "
     "(txnStartTimestamp -1)", SUITE)
rule("TXN-DESCRIBE-PRODUCERS", "DescribeProducers on a partition's leader lists the producers of its log: an open "
     "transaction's producer with its id, epoch, last sequence, last timestamp and current_txn_start_offset = the "
     "offset of the transaction's first record on that partition; after the commit marker the producer stays "
     "listed with current_txn_start_offset -1",
     "KIP-664; KafkaApis.handleDescribeProducersRequest → Partition.activeProducerState → UnifiedLog."
     "activeProducers (ProducerStateEntry: producerEpoch, lastSeq, lastTimestamp, coordinatorEpoch, "
     "currentTxnFirstOffset); ProducerAppendInfo.appendEndTxnMarker (coordinatorEpoch, currentTxnFirstOffset "
     "cleared)", SUITE)


async def txn_offset_commit_at(p: TxnProducer, group: str, offsets: dict[tuple[str, int], int], *, version: int,
                               generation: int, member: str, epoch: int | None = None
                               ) -> dict[tuple[str, int], int]:
    """One TxnOffsetCommit at ``version`` with a generation and member id (a consumer group member's commit, as
    sendOffsetsToTransaction(offsets, groupMetadata) sends) → {(topic, partition): error}; coordinator errors
    retried as clients do."""
    co = await p.boot.coordinator(group)
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    by: dict[str, list[Any]] = {}
    for (t, part), o in offsets.items():
        by.setdefault(t, []).append(T.TxnOffsetCommitRequestPartition(
            partition_index=part, committed_offset=o, committed_leader_epoch=-1, committed_metadata=""))
    req = TxnOffsetCommitRequest(transactional_id=p.transactional_id, group_id=group, producer_id=p.producer_id,
                                 producer_epoch=p.epoch if epoch is None else epoch, generation_id=generation,
                                 member_id=member, group_instance_id=None,
                                 topics=[T(name=t, partitions=ps) for t, ps in by.items()])

    async def once() -> tuple[int, dict[tuple[str, int], int]]:
        body = (await co.request("TxnOffsetCommit", req, version=version,
                                 label=f"TxnOffsetCommit v{version} generation {generation}")).body
        out = {(t.name, x.partition_index): x.error_code for t in body.topics for x in t.partitions}
        codes = set(out.values()) - {NONE}
        return (codes.pop() if len(codes) == 1 else NONE), out

    return (await retry_coordinator(once))[1]


@pytest.mark.rule("TXN-OFFSET-COMMIT-UNKNOWN-GROUP")
@pytest.mark.usefixtures("group_coordinator_ready")
async def test_txn_offset_commit_unknown_group(wire: Wire, evidence: Evidence) -> None:
    """A producer's transaction (AddOffsetsToTxn done) commits offsets for a group nobody joined, with generation 1
    and a member id: v3 and v4 answer ILLEGAL_GENERATION; with generation -1 the same commit is accepted and applied
    at the commit, the generation-1 offset never. With transaction version 2, v5 (no AddOffsetsToTxn) likewise."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    group = unique_name("ug")
    tp0, tp1 = (topic, 0), (topic, 1)
    p = await producer(wire)
    await added(p, [tp0])
    await sent(p, topic, 0, [b"x"])
    assert await p.add_offsets(group) == NONE, "AddOffsetsToTxn refused"
    co = await wire.coordinator(group)
    top = min(co.broker_max_version("TxnOffsetCommit") or TXN_OFFSET_COMMIT_TV1, 4)
    answers: dict[str, Any] = {}
    for v in range(TXN_OFFSET_COMMIT_TV1, top + 1):
        answers[f"v{v}"] = await txn_offset_commit_at(p, group, {tp0: 11, tp1: 12}, version=v, generation=1,
                                                      member="member-1")
    simple = await p.txn_offset_commit(group, {tp0: 5})
    evidence.note("answers", {k: {str(tp): c for tp, c in a.items()} for k, a in answers.items()}
                  | {"generation -1": {str(tp): c for tp, c in simple.items()}})
    for k, a in answers.items():
        assert a == {tp0: ILLEGAL_GENERATION, tp1: ILLEGAL_GENERATION}, (
            f"TxnOffsetCommit {k} with generation 1 for the unknown group {group} answered {a}; Kafka: "
            f"ILLEGAL_GENERATION ({ILLEGAL_GENERATION}) for every partition (GROUP_ID_NOT_FOUND would be fatal to "
            f"the Java producer)")
    assert simple == {tp0: NONE}, f"the same commit without a generation answered {simple}; Kafka accepts it"
    await ended(p, True)
    after, _ = await eventually(lambda: offset_fetch_stable(co, group, [tp0, tp1], require_stable=True),
                                lambda r: r[1].get(tp0, (0, -1))[1] == NONE, SETTLE_S, 0.05)
    assert after[1] == {tp0: (5, NONE), tp1: (-1, NONE)}, (
        f"after the commit OffsetFetch answered {after[1]}; the generation -1 commit (5) applies, the refused "
        f"generation 1 ones (11, 12) never")
    if transaction_version(wire) < 2 or (co.broker_max_version("TxnOffsetCommit") or 0) < TXN_OFFSET_COMMIT_TV2:
        return
    q = await tv2_producer(wire)
    await sent_tv2(q, topic, 0, [b"y"])
    v5 = await txn_offset_commit_at(q, group + "-tv2", {tp0: 21}, version=TXN_OFFSET_COMMIT_TV2, generation=1,
                                    member="member-1")
    evidence.note("v5", {str(tp): c for tp, c in v5.items()})
    assert v5 == {tp0: ILLEGAL_GENERATION}, (
        f"TxnOffsetCommit v5 (transaction version 2) with generation 1 for an unknown group answered {v5}; Kafka: "
        f"ILLEGAL_GENERATION ({ILLEGAL_GENERATION})")
    err, _, _ = await q.end_tv2(True)
    assert err == NONE, f"the transaction version 2 commit after ILLEGAL_GENERATION answered {err}"


@pytest.mark.rule("TXN-OFFSET-COMMIT-PRECEDENCE")
@pytest.mark.usefixtures("group_coordinator_ready")
async def test_txn_offset_commit_transaction_before_group(wire: Wire, evidence: Evidence) -> None:
    """P opens a transaction (AddOffsetsToTxn for the group done) and is fenced by Q's InitProducerId; P's
    TxnOffsetCommit v3 with generation 1 for the unknown group is answered INVALID_PRODUCER_EPOCH (the transaction
    is checked first), not ILLEGAL_GENERATION; nothing is committed."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    group = unique_name("pg")
    tp0 = (topic, 0)
    p = await producer(wire)
    await added(p, [tp0])
    await sent(p, topic, 0, [b"x"])
    assert await p.add_offsets(group) == NONE, "AddOffsetsToTxn refused"
    q = TxnProducer(wire, p.transactional_id)
    assert await q.init() == NONE, "the second instance's InitProducerId failed"
    await settled(wire, topic, [0])
    fenced = await txn_offset_commit_at(p, group, {tp0: 7}, version=TXN_OFFSET_COMMIT_TV1, generation=1,
                                        member="member-1")
    evidence.note("fenced_unknown_group", {"epochs": [p.epoch, q.epoch], "answer": {str(k): c for k, c in
                                                                                     fenced.items()}})
    assert fenced == {tp0: INVALID_PRODUCER_EPOCH}, (
        f"the fenced producer (epoch {p.epoch} < {q.epoch}) committing for the unknown group {group} with "
        f"generation 1 was answered {fenced}; Kafka verifies the transaction before the group: "
        f"INVALID_PRODUCER_EPOCH ({INVALID_PRODUCER_EPOCH}), not ILLEGAL_GENERATION ({ILLEGAL_GENERATION})")
    _, offsets = await offset_fetch_stable(await wire.coordinator(group), group, [tp0], require_stable=False)
    assert offsets[tp0][0] == -1, f"the refused TxnOffsetCommit was applied: {offsets}"


async def list_everywhere(w: Wire, *, states: Sequence[str] = (), producer_ids: Sequence[int] = (),
                          duration_ms: int = -1, pattern: str | None = None, version: int = 0,
                          label: str | None = None) -> tuple[dict[str, tuple[int, str]], set[str], set[int]]:
    """ListTransactions to every broker (each lists the ids it coordinates) → ({id: (producer id, state)}, unknown
    state filters, error codes)."""
    brokers = (await w.metadata([], record=False))["_brokers"]
    found: dict[str, tuple[int, str]] = {}
    unknown: set[str] = set()
    errors: set[int] = set()
    for host, port in sorted(brokers.values()):
        b = await w.sibling(host, port)
        req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                      duration_filter=duration_ms, transactional_id_pattern=pattern)
        body = (await b.request("ListTransactions", req, version=version, label=label)).body
        errors.add(body.error_code)
        unknown |= set(body.unknown_state_filters or [])
        found.update({s.transactional_id: (s.producer_id, s.transaction_state) for s in body.transaction_states})
    return found, unknown, errors


def ours(found: dict[str, tuple[int, str]], ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    return {i: found[i] for i in ids if i in found}


@pytest.mark.rule("TXN-LIST-FILTERS")
async def test_list_transactions_filters(wire: Wire, evidence: Evidence) -> None:
    """Three ids: I initialised only (Empty), C with a committed transaction, O with one open. ListTransactions
    (every broker) by state, by producer id, by duration (a long one lists I only; after waiting, a short one lists
    all three), and (v2) by a pattern matching our ids' common prefix in full and a mere fragment of them."""
    if (wire.broker_max_version("ListTransactions") or 0) < 1:
        pytest.skip("the target serves ListTransactions v0 only: no duration filter (KIP-994)")
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    prefix = unique_name("lt")
    made = {}
    for name in ("i", "c", "o"):
        made[name] = TxnProducer(wire, f"{prefix}-{name}")
        assert await made[name].init(60_000, find_within_s=FIND_WITHIN_S["s"]) == NONE
    i, c, o = made["i"], made["c"], made["o"]
    ids = [i.transactional_id, c.transactional_id, o.transactional_id]
    await added(c, [(topic, 0)])
    await sent(c, topic, 0, [b"c"])
    await ended(c, True)
    await settled(wire, topic, [0])
    await added(o, [(topic, 0)])
    await sent(o, topic, 0, [b"o"])
    state_of = {"i": "Empty", "c": "CompleteCommit", "o": "Ongoing"}
    want_all = {m.transactional_id: (m.producer_id, state_of[k]) for k, m in made.items()}
    everything, _, errs = await list_everywhere(wire, version=1, label="all")
    by_state, unknown, _ = await list_everywhere(wire, states=["Ongoing", "NoSuchState"], version=1,
                                                 label="state Ongoing")
    by_pid, _, _ = await list_everywhere(wire, producer_ids=[c.producer_id], version=1, label="producer id")
    long_ago, _, _ = await list_everywhere(wire, duration_ms=LONG_DURATION_MS, version=1, label="duration long")
    await asyncio.sleep(0.3)
    recent, _, _ = await list_everywhere(wire, duration_ms=100, version=1, label="duration 100 ms")
    got = {"all": ours(everything, ids), "state Ongoing": ours(by_state, ids), "producer id": ours(by_pid, ids),
           f"duration {LONG_DURATION_MS}": ours(long_ago, ids), "duration 100": ours(recent, ids)}
    want = {"all": want_all, "state Ongoing": {o.transactional_id: want_all[o.transactional_id]},
            "producer id": {c.transactional_id: want_all[c.transactional_id]},
            f"duration {LONG_DURATION_MS}": {i.transactional_id: want_all[i.transactional_id]},
            "duration 100": want_all}
    if (wire.broker_max_version("ListTransactions") or 0) >= 2:
        full, _, _ = await list_everywhere(wire, pattern=f"{prefix}-.*", version=2, label="pattern prefix")
        fragment, _, _ = await list_everywhere(wire, pattern=f"{prefix}-", version=2, label="pattern fragment")
        bad, _, bad_errors = await list_everywhere(wire, pattern="(", version=2, label="pattern that does not compile")
        got |= {"pattern prefix.*": ours(full, ids), "pattern fragment": ours(fragment, ids),
                "pattern (": {"errors": sorted(bad_errors), "listed": len(bad)}}
        want |= {"pattern prefix.*": want_all, "pattern fragment": {},
                 "pattern (": {"errors": [INVALID_REGULAR_EXPRESSION], "listed": 0}}
    evidence.note("listed", {k: {t: list(v) if isinstance(v, tuple) else v for t, v in d.items()}
                             for k, d in got.items()} | {"unknown_state_filters": sorted(unknown),
                                                         "errors": sorted(errs)})
    assert errs == {NONE}, f"ListTransactions answered errors {errs}"
    assert unknown == {"NoSuchState"}, f"unknown_state_filters {unknown}; Kafka lists back 'NoSuchState'"
    for k in want:
        assert got[k] == want[k], (
            f"ListTransactions ({k}) listed {got[k]} of our ids; Kafka: {want[k]} (Empty id I has no transaction "
            f"start, -1, so every duration filter lists it; C's and O's transactions began moments ago)")
    await ended(o, False)


@pytest.mark.rule("TXN-DESCRIBE-PRODUCERS")
async def test_describe_producers_open_transaction(wire: Wire, evidence: Evidence) -> None:
    """Two plain records, then a transaction writes two batches (3 records) to the partition: DescribeProducers on
    its leader lists the producer with its epoch, last sequence 2, a last timestamp from the send and
    current_txn_start_offset 2; after the commit, -1. On a cluster the topic has 3 replicas and each follower
    answers the same from its own log (Partition.activeProducerState needs a local log, not leadership). (The
    marker's coordinator epoch, which Kafka shows after the commit, is noted, not checked: reference_broker/GAPS.md.)"""
    brokers = (await wire.metadata([], record=False))["_brokers"]
    topic = await wire.create_topic(partitions=1, replication_factor=min(3, len(brokers)))
    leader = await wire.leader(topic, 0)
    if 61 not in leader.conn.broker_versions:
        raise TargetDiverged("the target does not serve DescribeProducers (API key 61, KIP-664)")
    await plain(wire, topic, 0, [b"a", b"b"])
    p = await producer(wire)
    await added(p, [(topic, 0)])
    t0 = int(time.time() * 1000)
    first = await sent(p, topic, 0, [b"t1", b"t2"])
    await sent(p, topic, 0, [b"t3"])
    t1 = int(time.time() * 1000)

    async def describe(label: str, to: Wire = leader) -> Any:
        req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=topic,
                                                                                     partition_indexes=[0])])
        body = (await to.request("DescribeProducers", req, version=0, label=label)).body
        part = body.topics[0].partitions[0]
        assert part.error_code == NONE, f"DescribeProducers ({label}) answered {part.error_code}"
        return {s.producer_id: s for s in part.active_producers}

    open_ = await describe("open transaction")
    mine = open_.get(p.producer_id)
    evidence.note("open", {str(k): str(v) for k, v in open_.items()} | {"first_offset": first})
    assert mine is not None, f"DescribeProducers listed {list(open_)}, not the open transaction's producer"
    assert (mine.producer_epoch, mine.last_sequence, mine.current_txn_start_offset) == (p.epoch, 2, first), (
        f"the open transaction's producer is described with epoch {mine.producer_epoch}, last sequence "
        f"{mine.last_sequence}, current_txn_start_offset {mine.current_txn_start_offset}; Kafka: epoch {p.epoch}, "
        f"last sequence 2 (3 records from 0), the transaction's first offset {first}")
    assert t0 <= mine.last_timestamp <= t1 + 10, (
        f"last_timestamp {mine.last_timestamp} is not the last batch's timestamp (sent between {t0} and {t1})")
    md = await wire.metadata([topic], record=False)
    here = (leader.conn.host, leader.conn.port)
    for node in md[topic]["partitions"][0]["replicas"]:
        if md["_brokers"][node] == here:
            continue
        follower = await wire.sibling(*md["_brokers"][node])
        theirs = (await describe(f"follower {node}", follower)).get(p.producer_id)
        evidence.note(f"follower_{node}", str(theirs))
        assert theirs is not None and (theirs.producer_epoch, theirs.last_sequence,
                                       theirs.current_txn_start_offset) == (p.epoch, 2, first), (
            f"the follower {node} described the open transaction's producer as {theirs}; Kafka answers from the "
            f"follower's own log: epoch {p.epoch}, last sequence 2, first offset {first}")
    await ended(p, True)
    await settled(wire, topic, [0])
    done = await describe("after the commit")
    after = done.get(p.producer_id)
    evidence.note("after_commit", {str(k): str(v) for k, v in done.items()})
    assert after is not None and after.current_txn_start_offset == -1, (
        f"after the commit DescribeProducers described the producer as {after}; Kafka: still listed, "
        f"current_txn_start_offset -1")
# ------------------------------------------------------------------------------------------- the leader's side
# (issue 24: Produce's transactional checks, marker epochs, the LSO after DeleteRecords, the aborted index)

rule("TXN-NO-HANGING", "a Produce that would leave a transactional batch no coordinator will ever end is refused "
     "and appends nothing: transactional records without a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED "
     "for every partition), transactional batches of two producer ids in one request (INVALID_PRODUCER_ID_MAPPING "
     "for every partition), a non-transactional batch from a producer whose transaction is open in the partition "
     "(INVALID_TXN_STATE); afterwards read_committed ListOffsets LATEST and Fetch's last_stable_offset equal the "
     "high watermark (no hanging transaction)",
     "KIP-98; KIP-890 (hanging transactions); KafkaApis.handleProduceRequest (hasTransactionalRecords && "
     "transactionalId == null → TRANSACTIONAL_ID_AUTHORIZATION_FAILED); ReplicaManager.handleProduceAppend "
     "('Transactional records contained more than one producer ID' → InvalidPidMappingException); "
     "ProducerAppendInfo.appendDataBatch ('Expected transactional write' → InvalidTxnStateException)", SUITE)
rule("TXN-MARKER-EPOCH", "a partition leader refuses a transaction marker (WriteTxnMarkers) whose producer epoch "
     "is older than the producer's with INVALID_PRODUCER_EPOCH, and with transaction version 2 (WriteTxnMarkers v2, "
     "TransactionVersion 2) also one with the producer's current epoch while its transaction is open there — a "
     "delayed or duplicated marker of the previous transaction never completes the next one (its records stay "
     "invisible, the LSO stays at its first offset); an equal-epoch TV2 marker with no transaction open (a retried "
     "marker) is accepted",
     "KIP-1228 (KAFKA-19999); ProducerAppendInfo.checkProducerEpoch (transactionVersion >= 2: producerEpoch <= "
     "current epoch is invalid unless equal with currentTxnFirstOffset empty: 'Idempotent transaction marker retry') "
     "/ appendEndTxnMarker; KafkaApis.handleWriteTxnMarkersRequest (marker.transactionVersion)", SUITE)
rule("TXN-LSO-LOG-START", "after DeleteRecords moves the log start past an open transaction's first offset, the "
     "last stable offset (Fetch last_stable_offset, ListOffsets read_committed LATEST) is the log start, never "
     "below it, until the transaction ends (then the high watermark)",
     "KIP-98; KIP-107; UnifiedLog.maybeIncrementFirstUnstableOffset (an unstable offset below logStartOffset "
     "becomes logStartOffset) / lastStableOffset", SUITE)
rule("TXN-ABORTED-LIST-WROTE", "a read_committed Fetch lists in aborted_transactions only transactions that wrote "
     "records to that partition: an aborted transaction that had the partition added but wrote nothing there "
     "(only its ABORT marker landed) is not listed; it is listed in the partition it wrote to",
     "KIP-98; ProducerAppendInfo.appendEndTxnMarker (a CompletedTxn only when currentTxnFirstOffset is present: "
     "'A transaction marker without any associated data will not ... be reflected in the transaction index'); "
     "UnifiedLog.collectAbortedTransactions", SUITE)
rule("TXN-TV2-FIRST-SEQUENCE", "with transaction version 2 a transactional Produce v12 whose batch starts at a "
     "sequence other than 0 on a partition where the producer has no batch is refused with "
     "OUT_OF_ORDER_SEQUENCE_NUMBER and appends nothing; sequence 0 is then accepted. The classic protocol (Produce "
     "v9 after AddPartitionsToTxn) accepts any first sequence there, as for every idempotent producer without state",
     "KIP-890 part 2; ProducerAppendInfo.checkSequence (verificationStateEntry.supportsEpochBump && appendFirstSeq "
     "!= 0 && currentEntry.isEmpty → OutOfOrderSequenceException; otherwise NO_PRODUCER_EPOCH accepts any "
     "sequence)", SUITE)


async def rc_latest(w: Wire, topic: str, partition: int) -> tuple[int, int, int]:
    """(ListOffsets read_committed LATEST, Fetch last_stable_offset, Fetch high watermark) of a partition (the
    Fetch at the log start, ListOffsets EARLIEST)."""
    err, latest, _ = await w.list_offsets(topic, partition, LATEST, isolation_level=1)
    err2, start, _ = await w.list_offsets(topic, partition, EARLIEST)
    assert err2 == NONE, f"ListOffsets EARLIEST answered {err2} for {topic}/{partition}"
    f = await fetch_one(w, topic, partition, start, max_bytes=1)
    assert err == NONE and f.error == NONE, f"ListOffsets answered {err}, Fetch {f.error} for {topic}/{partition}"
    return latest, f.last_stable_offset, f.high_watermark


async def produce_raw(w: Wire, transactional_id: str | None, batches: dict[tuple[str, int], bytes],
                      label: str) -> dict[tuple[str, int], int]:
    """One Produce v9 (acks=all) carrying ``batches`` → {(topic, partition): error}."""
    T = ProduceRequest.TopicProduceData
    by: dict[str, list[Any]] = {}
    for (t, p), b in batches.items():
        by.setdefault(t, []).append(T.PartitionProduceData(index=p, records=b))
    req = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10_000,
                         topic_data=[T(name=t, partition_data=ps) for t, ps in by.items()])
    summary = {"transactional_id": transactional_id, "partitions": sorted(batches)}
    r = await w.request("Produce", req, summary=summary, label=label)
    return {(t.name, p.index): p.error_code for t in r.body.responses for p in t.partition_responses}


@pytest.mark.rule("TXN-NO-HANGING")
async def test_no_hanging_transaction_from_bad_produce(wire: Wire, evidence: Evidence) -> None:
    """Three Produces that would leave an orphan transactional batch, each refused with nothing appended: a
    transactional batch without a transactional id; transactional batches of two producers in one request; a
    plain (idempotent) batch from a producer whose transaction is open. A plain record follows each; at the end
    read_committed LATEST and the LSO equal the HW on both partitions, and the open transaction commits."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("nh")
    p, q = await producer(wire), await producer(wire)
    got: dict[str, Any] = {}
    orphan = txn_batch(values(tag, "orphan"), p.producer_id, p.epoch, 0)
    got["no_transactional_id"] = await produce_raw(wire, None, {(topic, 0): orphan},
                                                   "transactional batch, no transactional id")
    await plain(wire, topic, 0, values(tag, "p0"))
    await added(p, [(topic, 0)])
    await added(q, [(topic, 1)])
    got["two_producer_ids"] = await produce_raw(wire, p.transactional_id, {
        (topic, 0): txn_batch(values(tag, "pa"), p.producer_id, p.epoch, 0),
        (topic, 1): txn_batch(values(tag, "qa"), q.producer_id, q.epoch, 0)}, "transactional batches of two producers")
    await plain(wire, topic, 1, values(tag, "p1"))
    await sent(p, topic, 0, values(tag, "t1"))
    got["plain_in_open_txn"] = (await p.send(topic, 0, values(tag, "idem"), transactional=False,
                                             label="non-transactional batch, transaction open"))[0]
    await ended(p, True)
    await ended(q, False)
    settled_at, waited = await settled(wire, topic, [0, 1])
    ends = {i: await rc_latest(wire, topic, i) for i in (0, 1)}
    ru = {i: await committed_values(wire, topic, i, isolation=READ_UNCOMMITTED) for i in (0, 1)}
    evidence.note("bad_produce", {"answers": {k: (v if isinstance(v, int) else {f"{t}/{i}": e for (t, i), e in v.items()})
                                              for k, v in got.items()},
                                  "rc_latest_lso_hw": ends, "read_uncommitted": {
                                      i: [x.decode() if x else x for x in v] for i, v in ru.items()}})
    want_orphan = {(topic, 0): TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert got["no_transactional_id"] == want_orphan, (
        f"a Produce with a transactional batch and no transactional id answered {got['no_transactional_id']}; Kafka: "
        f"TRANSACTIONAL_ID_AUTHORIZATION_FAILED ({TRANSACTIONAL_ID_AUTHORIZATION_FAILED}): no coordinator would ever "
        f"end that batch's transaction")
    want_two = {(topic, 0): INVALID_PRODUCER_ID_MAPPING, (topic, 1): INVALID_PRODUCER_ID_MAPPING}
    assert got["two_producer_ids"] == want_two, (
        f"a Produce with transactional batches of producers {p.producer_id} and {q.producer_id} answered "
        f"{got['two_producer_ids']}; Kafka: INVALID_PRODUCER_ID_MAPPING ({INVALID_PRODUCER_ID_MAPPING}) for every "
        f"partition")
    assert got["plain_in_open_txn"] == INVALID_TXN_STATE, (
        f"a non-transactional batch of producer {p.producer_id}, whose transaction is open in {topic}/0, answered "
        f"{got['plain_in_open_txn']}; Kafka: INVALID_TXN_STATE ({INVALID_TXN_STATE})")
    assert ru == {0: values(tag, "p0", "t1"), 1: values(tag, "p1")}, (
        f"the refused batches must append nothing: read_uncommitted holds {ru}")
    for i, (latest, lso, hw) in ends.items():
        assert latest == lso == hw, (
            f"{waited:.1f} s after every transaction ended, {topic}/{i} has read_committed LATEST {latest}, LSO {lso}, "
            f"HW {hw}; Kafka: all equal (no transaction left hanging)")
    assert await committed_values(wire, topic, 0) == values(tag, "p0", "t1")


async def marker_epochs(w: Wire, topic: str) -> tuple[int, int]:
    """(producer epoch, coordinator epoch) of the partition's last marker, as its coordinator wrote it."""
    m = await last_marker(w, topic, 0)
    assert m is not None and m.coordinator_epoch is not None, f"no transaction marker found in {topic}/0"
    return m.producer_epoch, m.coordinator_epoch


@pytest.mark.rule("TXN-MARKER-EPOCH")
async def test_stale_marker_never_completes_next_transaction(wire: Wire, evidence: Evidence) -> None:
    """Transaction version 2: T1 committed (its COMMIT marker carries epoch e+1); T2 opens at e+1. A duplicate of
    T1's marker (WriteTxnMarkers v2, TV2, epoch e+1) is INVALID_PRODUCER_EPOCH and T2 stays open and invisible; a
    v1 marker with the epoch before (e) is INVALID_PRODUCER_EPOCH too. T2 commits (epoch e+2); a retry of its own
    marker (epoch e+2, nothing open) is accepted."""
    top = serves_write_txn_markers(wire)
    if top < 2:
        pytest.skip(f"the target serves WriteTxnMarkers up to v{top} to clients: no v2 marker to send")
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("me")
    p = await tv2_producer(wire)
    e0 = p.epoch
    await sent_tv2(p, topic, 0, values(tag, "t1"))
    assert (await p.end_tv2(True))[0] == NONE
    await settled(wire, topic, [0])
    m_epoch, coord_epoch = await marker_epochs(wire, topic)
    t2_first = await sent_tv2(p, topic, 0, values(tag, "t2"))
    leader = await p.leader(topic, 0)             # markers go to the partition's leader, as a coordinator sends them
    dup = await write_txn_marker(leader, p.producer_id, m_epoch, coord_epoch, True, [(topic, 0)],
                                 label="T1's COMMIT marker again, T2 open (TV2)")
    after_dup = await rc_latest(wire, topic, 0)
    rc_dup = await committed_values(wire, topic, 0)
    older = await write_txn_marker(leader, p.producer_id, e0, coord_epoch, True, [(topic, 0)], version=1,
                                   label="a v1 marker with the epoch before T1's")
    assert (await p.end_tv2(True))[0] == NONE
    await settled(wire, topic, [0])
    m2_epoch, coord2 = await marker_epochs(wire, topic)
    retry = await write_txn_marker(leader, p.producer_id, m2_epoch, coord2, True, [(topic, 0)],
                                   label="T2's COMMIT marker again, nothing open (TV2)")
    final = await rc_latest(wire, topic, 0)
    rc = await committed_values(wire, topic, 0)
    evidence.note("marker_epochs", {
        "init_epoch": e0, "t1_marker_epoch": m_epoch, "coordinator_epoch": coord_epoch, "t2_first": t2_first,
        "duplicate_t1_marker": dup[(topic, 0)], "after_duplicate_rc_latest_lso_hw": after_dup,
        "read_committed_after_duplicate": [v.decode() if v else v for v in rc_dup],
        "older_v1_marker": older[(topic, 0)], "t2_marker_epoch": m2_epoch, "retried_t2_marker": retry[(topic, 0)],
        "final_rc_latest_lso_hw": final})
    assert m_epoch == e0 + 1, f"T1's COMMIT marker carries epoch {m_epoch}; transaction version 2: {e0 + 1}"
    assert dup[(topic, 0)] == INVALID_PRODUCER_EPOCH, (
        f"a TV2 marker with epoch {m_epoch} (T1's, duplicated) while T2 is open at that epoch answered "
        f"{dup[(topic, 0)]}; Kafka (KIP-1228): INVALID_PRODUCER_EPOCH ({INVALID_PRODUCER_EPOCH})")
    assert after_dup[0] == after_dup[1] == t2_first and rc_dup == values(tag, "t1"), (
        f"after the duplicated marker T2 must stay open: read_committed LATEST/LSO/HW {after_dup}, want LSO "
        f"{t2_first}; read_committed {rc_dup}")
    assert older[(topic, 0)] == INVALID_PRODUCER_EPOCH, (
        f"a v1 marker with epoch {e0}, older than the producer's {m_epoch}, answered {older[(topic, 0)]}; Kafka: "
        f"INVALID_PRODUCER_EPOCH ({INVALID_PRODUCER_EPOCH})")
    assert retry[(topic, 0)] == NONE, (
        f"a TV2 marker with the producer's epoch {m2_epoch} and no transaction open (a retried marker) answered "
        f"{retry[(topic, 0)]}; Kafka: NONE (an idempotent marker retry)")
    assert rc == values(tag, "t1", "t2") and final[0] == final[1] == final[2], (
        f"at the end read_committed returned {rc}, LATEST/LSO/HW {final}")


@pytest.mark.rule("TXN-LSO-LOG-START")
async def test_lso_not_below_log_start(wire: Wire, evidence: Evidence) -> None:
    """Two plain records, a transaction opened at offset 2 (two records), one plain record; DeleteRecords to 4
    (past the transaction's first offset, below the HW 5): the LSO is 4 on Fetch and ListOffsets read_committed
    LATEST; after the commit, the HW."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("ls")
    await plain(wire, topic, 0, values(tag, "p0", "p1"))
    p = await producer(wire)
    await added(p, [(topic, 0)])
    first = await sent(p, topic, 0, values(tag, "a1", "a2"))
    await plain(wire, topic, 0, values(tag, "p2"))
    before = await rc_latest(wire, topic, 0)
    cut = first + 2
    err, low = await wire.delete_records(topic, 0, cut)
    after = await rc_latest(wire, topic, 0)
    f = await fetch_one(wire, topic, 0, cut, label="read_committed at the new log start")
    await ended(p, True)
    await settled(wire, topic, [0])
    end = await rc_latest(wire, topic, 0)
    evidence.note("lso_log_start", {"txn_first": first, "before_rc_latest_lso_hw": before, "delete_records": [err, low],
                                    "after_rc_latest_lso_hw": after, "fetch_at_log_start": [
                                        f.error, f.last_stable_offset, f.high_watermark], "end": end})
    assert before[0] == before[1] == first, f"with the transaction open at {first}: LATEST/LSO/HW {before}"
    assert err == NONE and low == cut, f"DeleteRecords to {cut} answered error {err}, low watermark {low}"
    assert after[0] == after[1] == cut, (
        f"after DeleteRecords to {cut}, past the open transaction's first offset {first}, read_committed LATEST / "
        f"Fetch LSO are {after[0]} / {after[1]}; Kafka: the log start {cut} (never below it)")
    assert f.error == NONE and f.last_stable_offset == cut, (
        f"a read_committed Fetch at the log start {cut} answered error {f.error}, LSO {f.last_stable_offset}")
    assert end[0] == end[1] == end[2], f"after the commit LATEST/LSO/HW are {end}"


@pytest.mark.rule("TXN-ABORTED-LIST-WROTE")
async def test_aborted_list_only_where_written(wire: Wire, evidence: Evidence) -> None:
    """A transaction adds partitions 0 and 1, writes only to 0, aborts. read_committed Fetches of 1 (a plain record
    before and after its ABORT marker) list no aborted transaction of it; of 0, it is listed at its first offset."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("aw")
    await plain(wire, topic, 1, values(tag, "b0"))
    p = await producer(wire)
    await added(p, [(topic, 0), (topic, 1)])
    first = await sent(p, topic, 0, values(tag, "x"))
    await ended(p, False)
    await settled(wire, topic, [0, 1])
    await plain(wire, topic, 1, values(tag, "b1"))
    f1 = await fetch_one(wire, topic, 1, 0, label="read_committed, partition without the transaction's data")
    f0 = await fetch_one(wire, topic, 0, 0, label="read_committed, partition with the transaction's data")
    evidence.note("aborted_lists", {"producer_id": p.producer_id, "partition_0": f0.aborted, "partition_1": f1.aborted,
                                    "partition_1_batches": [[b.base_offset, b.producer_id, b.control]
                                                            for b in f1.batches]})
    assert any(b.control for b in f1.batches), f"no ABORT marker in {topic}/1: {f1.batches}"
    assert not [a for a in f1.aborted or [] if a[0] == p.producer_id], (
        f"a read_committed Fetch of {topic}/1, where the aborted transaction of producer {p.producer_id} wrote "
        f"nothing, listed aborted_transactions {f1.aborted}; Kafka indexes an aborted transaction only where it "
        f"wrote (currentTxnFirstOffset present)")
    assert f0.aborted and (p.producer_id, first) in f0.aborted, (
        f"the aborted transaction wrote {topic}/0 at {first}; the Fetch listed {f0.aborted}")
    assert f1.values == values(tag, "b0", "b1")


@pytest.mark.rule("TXN-TV2-FIRST-SEQUENCE")
async def test_tv2_first_sequence_must_be_zero(wire: Wire, evidence: Evidence) -> None:
    """A TV2 producer's Produce v12 starting at sequence 5 on a fresh partition: OUT_OF_ORDER_SEQUENCE_NUMBER,
    nothing appended; at 0: appended. A classic producer's Produce v9 at sequence 5 after AddPartitionsToTxn:
    appended (no state there: any sequence)."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    tag = unique_name("fs")
    p = await tv2_producer(wire)
    nonzero = await p.send(topic, 0, values(tag, "five"), sequence=5, version=PRODUCE_TV2,
                           label="Produce v12 at sequence 5, no state here")
    zero = await p.send(topic, 0, values(tag, "zero"), version=PRODUCE_TV2, label="Produce v12 at sequence 0")
    assert (await p.end_tv2(True))[0] == NONE
    c = await producer(wire)
    await added(c, [(topic, 1)])
    classic = await c.send(topic, 1, values(tag, "classic"), sequence=5, label="Produce v9 at sequence 5")
    await ended(c, True)
    await settled(wire, topic, [0, 1])
    rc = {i: await committed_values(wire, topic, i) for i in (0, 1)}
    evidence.note("first_sequence", {"tv2_seq5": nonzero[0], "tv2_seq0": zero[0], "classic_seq5": classic[0],
                                     "read_committed": {i: [v.decode() if v else v for v in vs]
                                                        for i, vs in rc.items()}})
    assert nonzero[0] == OUT_OF_ORDER_SEQUENCE_NUMBER, (
        f"a TV2 Produce v12 at sequence 5 where the producer has no batch answered {nonzero[0]}; Kafka 4.4: "
        f"OUT_OF_ORDER_SEQUENCE_NUMBER ({OUT_OF_ORDER_SEQUENCE_NUMBER})")
    assert zero[0] == NONE and rc[0] == values(tag, "zero"), f"then sequence 0 answered {zero[0]}; rc {rc[0]}"
    assert classic[0] == NONE and rc[1] == values(tag, "classic"), (
        f"a classic Produce v9 at sequence 5 with no state answered {classic[0]} (rc {rc[1]}); Kafka: NONE")


rule("TXN-MARKER-COORDINATOR-EPOCH", "a partition leader refuses a transaction marker whose coordinator epoch is "
     "older than the one of the producer's last marker there with TRANSACTION_COORDINATOR_FENCED, and it completes "
     "nothing: a zombie coordinator's marker never ends the producer's open transaction",
     "KIP-98; ProducerAppendInfo.checkCoordinatorEpoch (updatedEntry.coordinatorEpoch > marker coordinatorEpoch → "
     "TransactionCoordinatorFencedException for origin COORDINATOR); ProducerStateEntry.update (coordinator epoch "
     "of each marker)", SUITE)


@pytest.mark.rule("TXN-MARKER-COORDINATOR-EPOCH")
async def test_zombie_coordinator_marker_refused(wire: Wire, evidence: Evidence) -> None:
    """T1 committed by the coordinator (its marker carries coordinator epoch c); T2 open. A COMMIT marker (v1, the
    producer's epoch) with coordinator epoch c - 1 is TRANSACTION_COORDINATOR_FENCED and T2 stays open; T2 aborts
    through the coordinator and stays invisible."""
    if serves_write_txn_markers(wire) < 1:
        pytest.skip("the target does not serve WriteTxnMarkers to clients")
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    tag = unique_name("zc")
    p = await producer(wire)
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "t1"))
    await ended(p, True)
    await settled(wire, topic, [0])
    m_epoch, coord = await marker_epochs(wire, topic)
    await added(p, [(topic, 0)])
    t2_first = await sent(p, topic, 0, values(tag, "t2"))
    leader = await p.leader(topic, 0)
    zombie = await write_txn_marker(leader, p.producer_id, m_epoch, coord - 1, True, [(topic, 0)], version=1,
                                    label="COMMIT marker of an older coordinator epoch")
    after = await rc_latest(wire, topic, 0)
    rc_after = await committed_values(wire, topic, 0)
    await ended(p, False)
    await settled(wire, topic, [0])
    rc = await committed_values(wire, topic, 0)
    evidence.note("zombie_marker", {"marker_epoch": m_epoch, "coordinator_epoch": coord, "t2_first": t2_first,
                                    "zombie_marker": zombie[(topic, 0)], "after_rc_latest_lso_hw": after,
                                    "read_committed_after": [v.decode() if v else v for v in rc_after],
                                    "read_committed_end": [v.decode() if v else v for v in rc]})
    assert zombie[(topic, 0)] == TRANSACTION_COORDINATOR_FENCED, (
        f"a marker with coordinator epoch {coord - 1}, older than the {coord} of the producer's last marker, "
        f"answered {zombie[(topic, 0)]}; Kafka: TRANSACTION_COORDINATOR_FENCED ({TRANSACTION_COORDINATOR_FENCED})")
    assert after[0] == after[1] == t2_first and rc_after == values(tag, "t1"), (
        f"after the refused marker T2 must stay open: LATEST/LSO/HW {after} (want LSO {t2_first}), read_committed "
        f"{rc_after}")
    assert rc == values(tag, "t1"), f"T2 was aborted; read_committed returned {rc}"
# ------------------------------------------------------------------- coordinator transitions (issue 24)

rule("TXN-TIMEOUT-RACE", "a transaction ends once: when its timeout abort and the producer's EndTxn(commit) meet, "
     "every partition of the transaction gets the marker of the outcome EndTxn answered — COMMIT everywhere when "
     "it answered NONE, ABORT everywhere when it was refused (the timeout won) — never both "
     "(TransactionCoordinator.abortTimedOutTransactions skips a transaction with pendingTransitionInProgress; "
     "TransactionMetadata.prepareTransitionTo allows one pending transition)",
     "KIP-98; TransactionCoordinator.abortTimedOutTransactions (pendingTransitionInProgress → skip) and "
     "endTransaction (pendingTransitionInProgress → CONCURRENT_TRANSACTIONS, epoch fenced → PRODUCER_FENCED); "
     "TransactionMetadata.prepareTransitionTo", SUITE)
rule("TXN-TV2-TIMEOUT-EPOCH", "a transaction of transaction version 2 opened by Produce v12 (no AddPartitionsToTxn) "
     "and aborted by its timeout ends CompleteAbort with the producer epoch Kafka 4.4.0 gives it "
     "(TransactionCoordinator.abortTimedOutTransactions: prepareFenceProducerEpoch, then endTransaction "
     "isFromClient=false), and the producer is fenced",
     "KIP-890 part 2; TransactionCoordinator.abortTimedOutTransactions (prepareFenceProducerEpoch; endTransaction "
     "with the server's transaction version); TransactionMetadata.prepareAbortOrCommit", SUITE)
RACE_ROUNDS, RACE_BOUND_S = 16, 120.0


def markers_of(f: Committed, producer_id: int) -> list[bool]:
    """The control batches of ``producer_id`` in a read_uncommitted answer: True COMMIT, False ABORT."""
    return [bool(b.commit) for b in f.batches if b.control and b.producer_id == producer_id]


@pytest.mark.rule("TXN-TIMEOUT-RACE")
async def test_commit_at_the_timeout_boundary_ends_once(wire: Wire, evidence: Evidence) -> None:
    """Rounds of one transaction each (transaction.timeout.ms 1 s, two partitions): EndTxn(commit) is sent at a
    moment spread over the window in which the coordinator's scan aborts it (the timeout to the timeout plus one
    scan interval), so in some rounds the commit wins and in others the abort; in every round each partition's
    markers for the producer (read_uncommitted: the control batches) agree with the EndTxn answer."""
    topic = await wire.create_topic(partitions=2, replication_factor=1)
    coordinator = await txn_coordinator(wire, unique_name("probe"), within_s=FIND_WITHIN_S["s"])
    interval = await broker_setting(coordinator, CLEANUP_INTERVAL, DEFAULT_CLEANUP_INTERVAL_MS)
    window = ABANDON_TIMEOUT_MS / 1000, (ABANDON_TIMEOUT_MS + interval) / 1000 + 0.1
    tag = unique_name("tr")
    rounds: list[dict[str, Any]] = []
    t_start = time.monotonic()
    for i in range(RACE_ROUNDS):
        if time.monotonic() - t_start > RACE_BOUND_S:
            break
        p = await producer(wire, timeout_ms=ABANDON_TIMEOUT_MS)
        await added(p, [(topic, 0), (topic, 1)])
        t0 = time.monotonic()
        firsts = [await sent(p, topic, j, values(tag, f"{i}-{j}")) for j in range(2)]
        delay = window[0] + (window[1] - window[0]) * ((i * 7) % RACE_ROUNDS) / (RACE_ROUNDS - 1)
        await asyncio.sleep(max(0.0, delay - (time.monotonic() - t0)))
        err = await p.end(True, retry=False)
        got, _ = await settled(wire, topic, [0, 1], within_s=SETTLE_S + ABANDON_TIMEOUT_MS / 1000)
        seen = {j: markers_of(await fetch_one(wire, topic, j, firsts[j], isolation=READ_UNCOMMITTED), p.producer_id)
                for j in range(2)}
        rounds.append({"delay_s": round(delay, 3), "end_txn": err, "markers": seen,
                       "settled": all(f.last_stable_offset == f.high_watermark for f in got.values())})
        want = err == NONE
        outcomes = {m for ms in seen.values() for m in ms}
        assert all(seen.values()) and outcomes == {want}, (
            f"round {i}: EndTxn(commit) {delay:.2f} s after the transaction opened (timeout {ABANDON_TIMEOUT_MS} "
            f"ms, scan every {interval} ms) answered {err}, and the partitions hold the markers (True COMMIT, False "
            f"ABORT) {seen}; Kafka: one outcome, {'COMMIT' if want else 'ABORT'} in every partition")
    evidence.note("rounds", rounds)
    evidence.note("outcomes", {"committed": sum(r["end_txn"] == NONE for r in rounds),
                               "aborted": sum(r["end_txn"] != NONE for r in rounds)})
    assert rounds, "no round ran"


@pytest.mark.rule("TXN-TV2-TIMEOUT-EPOCH")
async def test_tv2_timeout_abort_epoch(wire: Wire, evidence: Evidence) -> None:
    """A TV2 producer (epoch e from InitProducerId) opens a transaction with Produce v12 only and goes silent; the
    timeout aborts it: DescribeTransactions shows CompleteAbort at the epoch Kafka 4.4.0 reaches, the ABORT
    marker is in the partition, and a Produce v12 with e is INVALID_PRODUCER_EPOCH."""
    p = await tv2_producer(wire)
    p.timeout_ms = ABANDON_TIMEOUT_MS
    assert await p.init() == NONE
    e = p.epoch
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    coordinator = await txn_coordinator(wire, p.transactional_id, within_s=FIND_WITHIN_S["s"])
    interval = await broker_setting(coordinator, CLEANUP_INTERVAL, DEFAULT_CLEANUP_INTERVAL_MS)
    first = await sent_tv2(p, topic, 0, values(unique_name("te"), "a"))
    got, waited = await settled(wire, topic, [0], within_s=(ABANDON_TIMEOUT_MS + interval) / 1000 + 5.0)
    d, _ = await eventually(lambda: describe_transaction(coordinator, p.transactional_id),
                            lambda d: d.transaction_state == "CompleteAbort", SETTLE_S, 0.1)
    marks = markers_of(await fetch_one(wire, topic, 0, first, isolation=READ_UNCOMMITTED), p.producer_id)
    fenced = (await p.send(topic, 0, values(unique_name("te"), "late"), version=PRODUCE_TV2,
                           label="Produce v12 after the timeout"))[0]
    evidence.note("timeout_abort", {"init_epoch": e, "state": d.transaction_state, "epoch": d.producer_epoch,
                                    "producer_id": d.producer_id, "markers": marks, "produce_v12": fenced,
                                    "waited_s": round(waited, 2)})
    assert d.transaction_state == "CompleteAbort" and marks == [False], (
        f"the timed-out TV2 transaction is {d.transaction_state} with markers {marks}; Kafka: CompleteAbort, one "
        f"ABORT marker")
    assert d.producer_epoch == e + 1, (
        f"after the timeout abort of a TV2 transaction opened at epoch {e} the coordinator holds epoch "
        f"{d.producer_epoch}; Kafka 4.4.0: {e + 1}")
    assert fenced == INVALID_PRODUCER_EPOCH, (
        f"a Produce v12 of the timed-out producer (epoch {e}) answered {fenced}; Kafka: INVALID_PRODUCER_EPOCH "
        f"({INVALID_PRODUCER_EPOCH})")


rule("TXN-CONCURRENT-END", "while a transaction's markers are being written (PrepareCommit/PrepareAbort, the "
     "transition to Complete* pending), EndTxn of either outcome (v4, and v5 with the epoch the producer ended "
     "with) and InitProducerId with or without the producer's id and epoch answer CONCURRENT_TRANSACTIONS "
     "(retriable), not INVALID_TXN_STATE or PRODUCER_FENCED",
     "KIP-98; TransactionCoordinator.endTransaction (pendingTransitionInProgress → CONCURRENT_TRANSACTIONS before "
     "the state table) and prepareInitProducerIdTransit (pendingTransitionInProgress first); "
     "TransactionMetadata.prepareComplete (pending while the markers are sent)", SUITE)
rule("TXN-COMPLETE-LIVENESS", "a transaction whose EndTxn was answered NONE reaches CompleteCommit even when "
     "__transaction_state cannot take the Complete* record when its markers are written (ISR below "
     "transaction.state.log.min.isr, or its leader — the coordinator — killed): once the log recovers the "
     "coordinator (or the new one, on loading the partition) writes it, and the records are read_committed",
     "KIP-98; TransactionMarkerChannelManager.tryAppendToLog (retried while the append fails with a retriable "
     "error: the pending state kept); TransactionCoordinator.onElection (transactions in PrepareCommit / "
     "PrepareAbort get their markers and completion from the new coordinator)", SUITE)


def txn_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(String.hashCode) % transaction.state.log.num.partitions."""
    h = 0
    for unit in transactional_id.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


async def coordinator_state(c: Cluster, transactional_id: str, avoid: set[int]) -> tuple[int, str, int]:
    """(coordinator node, DescribeTransactions state, epoch) as the current coordinator answers ('' on an error)."""
    try:
        obs = await c.observer(avoid)
        co = await txn_coordinator(obs, transactional_id, within_s=5.0)
        node = next(b for b, addr in c.brokers.items() if addr == (co.conn.host, co.conn.port))
        d = await describe_transaction(co, transactional_id)
        return node, (d.transaction_state if d.error_code == NONE else ""), d.producer_epoch
    except Exception:           # a coordinator moving: keep asking
        return -1, "", -1


@pytest.mark.requires_capability("replication", "pause_broker")
@pytest.mark.rule("TXN-CONCURRENT-END")
async def test_end_and_init_while_markers_pending(cluster: Cluster, evidence: Evidence) -> None:
    """A transaction's one partition lives on X (1 replica, not the coordinator); X is paused and the transaction
    committed (EndTxn v4), so its marker is pending: EndTxn v4 / v5 of both outcomes and InitProducerId (without,
    with the current and with an unknown producer epoch) answer CONCURRENT_TRANSACTIONS. With transaction
    version 2 the same for a transaction opened by Produce v12 and ended by EndTxn v5, whose retry carries the
    epoch before the bump. X resumes, the commits complete."""
    if len(cluster.brokers) < 3:
        pytest.skip("needs 3 brokers")
    p, coord = await cluster_producer(cluster)
    x = next(b for b in sorted(cluster.brokers) if b != coord)
    topic = await placed_topic(cluster, [x])
    tag = unique_name("ce")
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "a"))
    tv2 = transaction_version(cluster.wire) >= 2
    p2 = None
    if tv2:                     # a second producer with the same coordinator (never the paused X)
        for _ in range(50):
            p2 = TxnProducer(cluster.wire, unique_name("txn"))
            if await coordinator_node(cluster, p2.transactional_id) == coord:
                break
        assert p2 is not None and await p2.init() == NONE
        await sent_tv2(p2, topic, 0, values(tag, "b"))
    cluster.pause(x)
    assert await p.end(True) == NONE, f"EndTxn commit answered an error while {x} (the partition's leader) was paused"
    co = p.coordinator
    assert co is not None
    pid, e = p.producer_id, p.epoch
    got = {
        "EndTxn v4 commit": await p.end(True, retry=False),
        "EndTxn v4 abort": await p.end(False, retry=False),
        "EndTxn v5 commit": (await p.end_tv2(True, retry=False, adopt=False))[0],
        "EndTxn v5 abort": (await p.end_tv2(False, retry=False, adopt=False))[0],
        "InitProducerId": (await co.init_producer_id(p.transactional_id))[0],
        "InitProducerId id+epoch": (await co.init_producer_id(p.transactional_id, producer_id=pid,
                                                              producer_epoch=e))[0],
        "InitProducerId id+other epoch": (await co.init_producer_id(p.transactional_id, producer_id=pid,
                                                                    producer_epoch=e + 5))[0],
    }
    if p2 is not None:
        e2 = p2.epoch
        err, _, bumped = await p2.end_tv2(True, adopt=False)
        assert err == NONE and bumped == e2 + 1, f"EndTxn v5 commit answered {err}, epoch {bumped}"
        got.update({
            "TV2 EndTxn v5 commit (retry)": (await p2.end_tv2(True, epoch=e2, retry=False, adopt=False))[0],
            "TV2 EndTxn v5 abort (retry epoch)": (await p2.end_tv2(False, epoch=e2, retry=False, adopt=False))[0],
            "TV2 InitProducerId": (await co.init_producer_id(p2.transactional_id))[0],
        })
        # Recorded, not checked: Kafka 4.4.0 answered CONCURRENT_TRANSACTIONS in one run and NONE in another to
        # InitProducerId with the TV2 producer's id and bumped epoch while its marker was pending.
        evidence.note("tv2_init_with_bumped_epoch", (await co.init_producer_id(
            p2.transactional_id, producer_id=p2.producer_id, producer_epoch=e2 + 1))[0])
    evidence.note("while_markers_pending", {"coordinator": coord, "paused_leader": x, "answers": got})
    cluster.resume(x)
    assert got == dict.fromkeys(got, CONCURRENT_TRANSACTIONS), (
        f"while the COMMIT marker for {topic}/0 (leader {x}, paused) was pending the coordinator answered {got}; "
        f"Kafka: CONCURRENT_TRANSACTIONS ({CONCURRENT_TRANSACTIONS}) to each")
    lw = await cluster.to(x)
    want = values(tag, "a", "b") if tv2 else values(tag, "a")
    rc, _ = await eventually(lambda: committed_values(lw, topic, 0), lambda v: v == want, 30, 0.1)
    assert rc == want, f"after {x} resumed read_committed returned {rc}"


@pytest.mark.requires_capability("replication", "pause_broker")
@pytest.mark.rule("TXN-COMPLETE-LIVENESS")
@pytest.mark.timeout(300)
async def test_complete_after_transaction_log_below_min_isr(cluster: Cluster, evidence: Evidence) -> None:
    """The transaction's partition is on X (1 replica); X is paused and the transaction committed (X leaves the
    ISR of the transactional id's __transaction_state partition first); then Y, the last other replica of that
    partition, is paused (and a write to the partition put it behind) until its ISR is the coordinator alone
    (below min ISR 2). X resumes: the marker is
    written at once, Complete* is refused until X is back in the ISR — then CompleteCommit."""
    if len(cluster.brokers) < 3:
        pytest.skip("needs 3 brokers")
    if await cluster.broker_setting("transaction.state.log.min.isr", 2) < 2:
        pytest.skip("transaction.state.log.min.isr < 2: the transaction log is never below it")
    n = await cluster.broker_setting("transaction.state.log.num.partitions", 50)
    p, coord = await cluster_producer(cluster)
    x, y = [b for b in sorted(cluster.brokers) if b != coord][:2]
    index = txn_partition(p.transactional_id, n)
    topic = await placed_topic(cluster, [x])
    tag = unique_name("cl")
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "a", "b"))
    cw = await cluster.to(coord)
    st0 = await state(cw, "__transaction_state", index)
    assert st0.leader == coord, f"__transaction_state-{index} is led by {st0.leader}, the coordinator is {coord}"
    cluster.pause(x)
    t0 = time.monotonic()
    assert await p.end(True) == NONE, f"EndTxn commit answered an error while {x} was paused"
    cluster.pause(y)
    # A caught-up follower stays in the ISR however long it is silent (Kafka: Replica.isCaughtUp at the leader's
    # log end): another transactional id of the same partition writes to it, which Y then lags behind.
    # (On a connection of its own: Kafka answers one request per connection at a time, and this one waits.)
    other = next(t for t in (unique_name("txn") for _ in range(10_000)) if txn_partition(t, n) == index)
    host, port = cluster.brokers[coord]
    side = await Wire.connect(f"{host}:{port}", evidence=evidence)
    write = asyncio.ensure_future(side.init_producer_id(other))
    # Kafka 4.4.0's leader logged the shrink to itself after the lag time, but its Metadata answer kept listing Y
    # (KIP-966: Y moved to the ELR) for a minute: the reference's ISR is checked, Kafka's waited for (3 × lag).
    lag_s = await cluster.lag_ms() / 1000
    t_write = time.monotonic()
    st, _ = await eventually(lambda: state(cw, "__transaction_state", index),
                             lambda s: list(s.isr) == [coord] or time.monotonic() - t_write > 3 * lag_s, 60, 0.2)
    write.cancel()
    with contextlib.suppress(BaseException):
        await write
    await side.close()
    assert coord in st.isr and x not in st.isr, f"__transaction_state-{index}: {st}"
    before = await describe_transaction(cw, p.transactional_id)
    cluster.resume(x)
    lw = await cluster.to(x)
    rc, _ = await eventually(lambda: committed_values(lw, topic, 0), lambda v: v == values(tag, "a", "b"), 60, 0.1)
    d, waited = await eventually(lambda: describe_transaction(cw, p.transactional_id),
                                 lambda d: d.transaction_state == "CompleteCommit", 60, 0.2)
    st2 = await state(cw, "__transaction_state", index)
    evidence.note("complete_below_min_isr", {
        "coordinator": coord, "partition": index, "paused": [x, y], "isr_before": list(st0.isr),
        "isr_shrunk": list(st.isr), "state_before_resume": before.transaction_state,
        "state_after": d.transaction_state, "isr_after": list(st2.isr), "seconds_to_complete": round(waited, 1),
        "seconds_total": round(time.monotonic() - t0, 1)})
    cluster.resume(y)
    assert before.transaction_state == "PrepareCommit", (
        f"with the marker's leader {x} paused the transaction was {before.transaction_state}; want PrepareCommit")
    assert rc == values(tag, "a", "b"), f"after {x} resumed read_committed returned {rc}"
    assert d.transaction_state == "CompleteCommit", (
        f"{waited:.0f} s after {x} resumed (marker written, ISR of __transaction_state-{index} now "
        f"{list(st2.isr)}) the transaction is {d.transaction_state}; Kafka retries Complete* until the log takes it")


@pytest.mark.requires_capability("replication", "pause_broker", "kill_broker", "restart")
@pytest.mark.rule("TXN-COMPLETE-LIVENESS")
async def test_complete_after_coordinator_killed(cluster: Cluster, evidence: Evidence) -> None:
    """The transaction's partition is on X (1 replica); X is paused and the transaction committed; then the
    coordinator (the leader of its __transaction_state partition) is killed with the marker still pending and X
    resumed. Another broker becomes the coordinator, loads the partition and finishes the transaction:
    CompleteCommit there, its records read_committed."""
    if len(cluster.brokers) < 3:
        pytest.skip("needs 3 brokers")
    p, coord = await cluster_producer(cluster)
    x = next(b for b in sorted(cluster.brokers) if b != coord)
    topic = await placed_topic(cluster, [x])
    tag = unique_name("ck")
    await added(p, [(topic, 0)])
    await sent(p, topic, 0, values(tag, "a", "b"))
    cluster.pause(x)
    assert await p.end(True) == NONE, f"EndTxn commit answered an error while {x} was paused"
    assert p.coordinator is not None
    before = (await describe_transaction(p.coordinator, p.transactional_id)).transaction_state
    t0 = time.monotonic()
    await cluster.kill(coord)
    cluster.resume(x)
    (node, final, _), waited = await eventually(lambda: coordinator_state(cluster, p.transactional_id, set()),
                                                lambda s: s[0] not in (-1, coord) and s[1] == "CompleteCommit",
                                                90, 0.5)
    lw = await cluster.to(x)
    rc, _ = await eventually(lambda: committed_values(lw, topic, 0), lambda v: v == values(tag, "a", "b"), 30, 0.1)
    evidence.note("complete_after_kill", {"old_coordinator": coord, "new_coordinator": node, "paused": x,
                                          "state_before_kill": before,
                                          "state_after": final, "seconds": round(time.monotonic() - t0, 1)})
    assert before == "PrepareCommit", f"with {x} paused the transaction was {before}; want PrepareCommit"
    assert final == "CompleteCommit", (
        f"{waited:.0f} s after {x} resumed the new coordinator {node} shows {final}; Kafka: the new coordinator "
        f"finishes a PrepareCommit transaction it loads")
    assert rc == values(tag, "a", "b"), f"after the new coordinator finished, read_committed returned {rc}"
