"""A protocol-level transactional producer and a read_committed reader for the ``transactions`` suite.

Why not a client library: a transaction check must send exactly the requests a transactional producer sends
(FindCoordinator key type 1, InitProducerId, AddPartitionsToTxn, transactional Produce batches, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn) and be able to stop between any two of them — leave a transaction open, abandon it, keep
sending with a fenced epoch — and see every error code as answered. Everything goes through
:class:`conformance.wire.Wire`, so each exchange lands in the check's evidence (no history: a transaction's sends
are not plain ``send`` operations, and the suites' history is read by the queue checkers).

The protocol spoken is the classic one (KIP-98, KIP-447; KIP-890 part 1 server-side verification): explicit
AddPartitionsToTxn (v3; v4+ is broker-to-broker), Produce v9, EndTxn v4, TxnOffsetCommit v3 — the versions pinned in
``conformance.wire.VERSIONS``. EndTxn v5 / Produce v12 opt into transaction version 2 (KIP-890 part 2, where the
partition leader adds partitions itself and every EndTxn bumps the epoch): ``send(version=12)`` and ``end_tv2``
speak it for the checks about it, on targets that finalize ``transaction.version`` >= 2 (:func:`transaction_version`).

Reading: :func:`read_committed` sends a Fetch with isolation_level 1 and keeps what a Java consumer keeps
(``CompletedFetch``: the answer's aborted_transactions list, walked in offset order against the batches'
producer ids and abort markers; control batches never reach the application).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import errors as E
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import FetchRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from .wire import TargetDiverged, Wire

# Kafka error codes (Errors.java) the transaction checks name.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = E.CoordinatorLoadInProgressError.errno
COORDINATOR_NOT_AVAILABLE = E.CoordinatorNotAvailableError.errno
NOT_COORDINATOR = E.NotCoordinatorError.errno
INVALID_PRODUCER_EPOCH = E.InvalidProducerEpochError.errno
INVALID_TXN_STATE = E.InvalidTxnStateError.errno
INVALID_PRODUCER_ID_MAPPING = E.InvalidProducerIdMappingError.errno
CONCURRENT_TRANSACTIONS = E.ConcurrentTransactionsError.errno
UNSTABLE_OFFSET_COMMIT = E.UnstableOffsetCommitError.errno
PRODUCER_FENCED = E.ProducerFencedError.errno
TRANSACTION_COORDINATOR_FENCED = E.TransactionCoordinatorFencedError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = E.TransactionalIdAuthorizationFailedError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER = E.OutOfOrderSequenceNumberError.errno
RETRIABLE_COORDINATOR = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
TXN_COORDINATOR = 1                   # FindCoordinator key_type for a transactional id
READ_COMMITTED, READ_UNCOMMITTED = 1, 0


def txn_batch(payloads: Sequence[bytes | None], producer_id: int, producer_epoch: int, base_sequence: int,
              *, transactional: bool = True, timestamp_ms: int | None = None) -> bytes:
    """One record batch v2 as a transactional producer sends it: producer id, epoch, sequence of its first record,
    and the transactional attribute (bit 4). Timestamps default to now (producer state expires by them)."""
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i, v in enumerate(payloads):
        b.append(i, timestamp=timestamp_ms + i, key=None, value=v, headers=[])
    return bytes(b.build())


TRANSACTION_VERSION = "transaction.version"
PRODUCE_TV2, END_TXN_TV2 = 12, 5            # the first versions of transaction version 2 (KIP-890 part 2)


def transaction_version(w: Wire) -> int:
    """The ``transaction.version`` the target finalized (ApiVersions v3+ finalized features; 0 when none): what a
    Java client reads to choose transaction version 2 (TransactionManager.isTransactionV2Enabled)."""
    return w.conn.finalized_features.get(TRANSACTION_VERSION, 0)


async def retry_coordinator(call: Any, *, within_s: float = 30.0, also: frozenset[int] = frozenset()) -> Any:
    """Await ``call()`` again while its error code (first item, or the value itself) is a retriable coordinator
    error (or one of ``also``), as every client retries them; the last answer after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        answer = await call()
        code = answer[0] if isinstance(answer, tuple) else answer
        if code not in RETRIABLE_COORDINATOR | also or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def txn_coordinator(w: Wire, transactional_id: str, *, within_s: float = 30.0) -> Wire:
    """A Wire to ``transactional_id``'s transaction coordinator (FindCoordinator key type 1), closed with ``w``.
    A fresh Kafka creates ``__transaction_state`` on the first lookup and answers COORDINATOR_NOT_AVAILABLE until
    it exists: retried, as clients do."""
    async def find() -> tuple[int, str, int]:
        r = await w.request("FindCoordinator", FindCoordinatorRequest(key=transactional_id, key_type=TXN_COORDINATOR))
        return r.body.error_code, r.body.host, r.body.port

    err, host, port = await retry_coordinator(find, within_s=within_s)
    if err:
        raise TargetDiverged(f"FindCoordinator(transactional id {transactional_id}, key type 1) answered error {err}")
    return await w.sibling(host, port)


@dataclass
class TxnProducer:
    """One transactional producer instance, request by request. ``sequences`` are per partition, as the producer
    keeps them; ``epoch`` is the one InitProducerId gave (a fenced instance keeps sending its old one)."""

    boot: Wire
    transactional_id: str
    coordinator: Wire | None = None
    producer_id: int = -1
    epoch: int = -1
    timeout_ms: int = 60_000
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    leaders: dict[tuple[str, int], Wire] = field(default_factory=dict)

    async def init(self, timeout_ms: int | None = None, *, within_s: float = 30.0, find_within_s: float = 30.0) -> int:
        """FindCoordinator (retried for ``find_within_s``) + InitProducerId; retries retriable coordinator errors and
        CONCURRENT_TRANSACTIONS (a previous instance's transaction still completing) for ``within_s``. Returns the
        error code."""
        if timeout_ms is not None:
            self.timeout_ms = timeout_ms
        self.coordinator = await txn_coordinator(self.boot, self.transactional_id, within_s=find_within_s)
        err, pid, epoch = await retry_coordinator(
            lambda: self.coordinator.init_producer_id(self.transactional_id,  # type: ignore[union-attr]
                                                      transaction_timeout_ms=self.timeout_ms),
            within_s=within_s, also=frozenset({CONCURRENT_TRANSACTIONS}))
        if err == NONE:
            self.producer_id, self.epoch = pid, epoch
            self.sequences.clear()
        return err

    async def init_once(self) -> tuple[int, int, int]:
        """One InitProducerId, no retry (for checks about its answer) → (error, producer id, epoch)."""
        assert self.coordinator is not None
        return await self.coordinator.init_producer_id(self.transactional_id, transaction_timeout_ms=self.timeout_ms)

    async def add_partitions(self, parts: Sequence[tuple[str, int]], *, retry: bool = True) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v3 → {(topic, partition): error}. With ``retry``, CONCURRENT_TRANSACTIONS (the
        previous transaction's markers not yet written) and coordinator errors are retried as clients do."""
        assert self.coordinator is not None, "init() first"
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        by: dict[str, list[int]] = {}
        for t, p in parts:
            by.setdefault(t, []).append(p)
        req = AddPartitionsToTxnRequest(v3_and_below_transactional_id=self.transactional_id,
                                        v3_and_below_producer_id=self.producer_id,
                                        v3_and_below_producer_epoch=self.epoch,
                                        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in by.items()])

        async def once() -> tuple[int, dict[tuple[str, int], int]]:
            body = (await self.coordinator.request("AddPartitionsToTxn", req)).body  # type: ignore[union-attr]
            out = {(t.name, r.partition_index): r.partition_error_code for t in body.results_by_topic_v3_and_below
                   for r in t.results_by_partition}
            codes = set(out.values()) - {NONE}
            return (codes.pop() if len(codes) == 1 else NONE), out

        if not retry:
            return (await once())[1]
        return (await retry_coordinator(once, also=frozenset({CONCURRENT_TRANSACTIONS})))[1]

    async def leader(self, topic: str, partition: int) -> Wire:
        if (topic, partition) not in self.leaders:
            self.leaders[(topic, partition)] = await self.boot.leader(topic, partition)
        return self.leaders[(topic, partition)]

    def next_batch(self, topic: str, partition: int, payloads: Sequence[bytes | None], *,
                   epoch: int | None = None, sequence: int | None = None, transactional: bool = True) -> bytes:
        """The next batch for a partition (its sequence advanced as if it will be appended): transactional unless
        ``transactional`` is False (the same producer id and epoch, as an idempotent batch); ``sequence`` overrides
        the producer's next one."""
        seq = self.sequences.get((topic, partition), 0) if sequence is None else sequence
        self.sequences[(topic, partition)] = seq + len(payloads)
        return txn_batch(payloads, self.producer_id, self.epoch if epoch is None else epoch, seq,
                         transactional=transactional)

    async def send(self, topic: str, partition: int, payloads: Sequence[bytes | None], *,
                   epoch: int | None = None, label: str | None = None,
                   version: int | None = None, sequence: int | None = None,
                   transactional: bool = True) -> tuple[int, int]:
        """A transactional Produce (acks=all, v9 or ``version``: 12 for transaction version 2, transactional_id
        set) of one batch → (error, base offset). The sequence only advances when the batch is appended.
        ``transactional`` False sends the batch without the transactional attribute (and without a transactional
        id), as an idempotent producer with this producer id would."""
        before = self.sequences.get((topic, partition), 0)
        seq = before if sequence is None else sequence
        batch = self.next_batch(topic, partition, payloads, epoch=epoch, sequence=sequence,
                                transactional=transactional)
        w = await self.leader(topic, partition)
        T = ProduceRequest.TopicProduceData
        txn_id = self.transactional_id if transactional else None
        req = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=10_000, topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=batch)])])
        summary = {"transactional_id": txn_id, "topic": topic, "partition": partition,
                   "records": len(payloads), "producer_id": self.producer_id,
                   "producer_epoch": self.epoch if epoch is None else epoch, "base_sequence": seq,
                   "transactional": transactional}
        r = await w.request("Produce", req, summary=summary, label=label, version=version)
        pr = r.body.responses[0].partition_responses[0]
        if pr.error_code != NONE:
            self.sequences[(topic, partition)] = before
        return pr.error_code, pr.base_offset

    async def add_offsets(self, group: str, *, retry: bool = True) -> int:
        """AddOffsetsToTxn v3 (the group's offsets partition joins the transaction) → error."""
        assert self.coordinator is not None, "init() first"
        req = AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                     producer_epoch=self.epoch, group_id=group)

        async def once() -> int:
            return (await self.coordinator.request("AddOffsetsToTxn", req)).body.error_code  # type: ignore[union-attr]

        return await retry_coordinator(once, also=frozenset({CONCURRENT_TRANSACTIONS})) if retry else await once()

    async def txn_offset_commit(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit v3 to the group's coordinator (generation -1, no member: a producer outside the group,
        as send_offsets_to_transaction with a group id only) → {(topic, partition): error}."""
        co = await self.boot.coordinator(group)
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        by: dict[str, list[Any]] = {}
        for (t, p), o in offsets.items():
            by.setdefault(t, []).append(T.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=""))
        req = TxnOffsetCommitRequest(transactional_id=self.transactional_id, group_id=group,
                                     producer_id=self.producer_id, producer_epoch=self.epoch, generation_id=-1,
                                     member_id="", group_instance_id=None,
                                     topics=[T(name=t, partitions=ps) for t, ps in by.items()])

        async def once() -> tuple[int, dict[tuple[str, int], int]]:
            body = (await co.request("TxnOffsetCommit", req)).body
            out = {(t.name, p.partition_index): p.error_code for t in body.topics for p in t.partitions}
            codes = set(out.values()) - {NONE}
            return (codes.pop() if len(codes) == 1 else NONE), out

        return (await retry_coordinator(once))[1]

    async def end(self, commit: bool, *, epoch: int | None = None, retry: bool = True) -> int:
        """EndTxn v4 (commit or abort) → error. Kafka answers once the PrepareCommit/PrepareAbort state is written;
        the markers follow asynchronously. ``retry`` retries coordinator errors and CONCURRENT_TRANSACTIONS."""
        assert self.coordinator is not None, "init() first"
        req = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                            producer_epoch=self.epoch if epoch is None else epoch, committed=commit)

        async def once() -> int:
            return (await self.coordinator.request(  # type: ignore[union-attr]
                "EndTxn", req, label="EndTxn commit" if commit else "EndTxn abort")).body.error_code

        return await retry_coordinator(once, also=frozenset({CONCURRENT_TRANSACTIONS})) if retry else await once()


    async def end_tv2(self, commit: bool, *, epoch: int | None = None, retry: bool = True,
                      adopt: bool = True) -> tuple[int, int, int]:
        """EndTxn v5 (transaction version 2) → (error, producer id, epoch answered). With ``adopt`` a NONE answer's
        id and epoch become this producer's and its sequences start over, as a TV2 client continues (Java's
        EndTxnHandler: setProducerIdAndEpoch from the response). ``retry`` as :meth:`end`."""
        assert self.coordinator is not None, "init() first"
        req = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                            producer_epoch=self.epoch if epoch is None else epoch, committed=commit)

        async def once() -> tuple[int, int, int]:
            body = (await self.coordinator.request(  # type: ignore[union-attr]
                "EndTxn", req, label="EndTxn v5 commit" if commit else "EndTxn v5 abort", version=END_TXN_TV2)).body
            return body.error_code, body.producer_id, body.producer_epoch

        answer = await retry_coordinator(once, also=frozenset({CONCURRENT_TRANSACTIONS})) if retry else await once()
        if adopt and answer[0] == NONE:
            self.producer_id, self.epoch = answer[1], answer[2]
            self.sequences.clear()
        return answer


@dataclass(frozen=True)
class FetchedBatch:
    """A record batch as a Fetch returned it, with the fields read_committed decisions rest on."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool
    commit: bool | None                # control batches: True COMMIT marker, False ABORT marker
    records: list[tuple[int, bytes | None]]
    producer_epoch: int = -1
    coordinator_epoch: int | None = None    # control batches: the marker's coordinator epoch (EndTransactionMarker)


@dataclass
class Committed:
    """One partition of a read_committed (or read_uncommitted) Fetch answer: what came back and what a consumer
    keeps of it."""

    error: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]] | None          # (producer id, first offset); None when the answer had null
    batches: list[FetchedBatch]
    visible: list[tuple[int, bytes | None]]        # what the application sees (Java CompletedFetch's filter)

    @property
    def values(self) -> list[bytes | None]:
        return [v for _, v in self.visible]

    @property
    def data_offsets(self) -> list[int]:
        """Offsets of every data record returned (aborted ones included), control records left out."""
        return [o for b in self.batches if not b.control for o, _ in b.records]


def decode(raw: bytes) -> list[FetchedBatch]:
    """Whole batches of a records field (a partial last batch is dropped, as clients do)."""
    out: list[FetchedBatch] = []
    pos = 0
    while pos + 12 <= len(raw):
        size = int.from_bytes(raw[pos + 8:pos + 12], "big", signed=True) + 12
        if pos + size > len(raw):
            break
        for b in MemoryRecords(raw[pos:pos + size]):
            recs = list(b)
            last = b.base_offset + b.last_offset_delta
            commit = coordinator_epoch = None
            if b.is_control_batch and recs:
                commit = bool(recs[0].commit)
                value = recs[0].value or b""
                if len(value) >= 6:                      # EndTransactionMarker: version int16, coordinator epoch
                    coordinator_epoch = int.from_bytes(value[2:6], "big", signed=True)
            out.append(FetchedBatch(b.base_offset, last, b.producer_id, bool(b.is_transactional),
                                    bool(b.is_control_batch), commit,
                                    [] if b.is_control_batch else [(r.offset, r.value) for r in recs],
                                    b.producer_epoch, coordinator_epoch))
        pos += size
    return out


def consumer_view(batches: Sequence[FetchedBatch], aborted: Sequence[tuple[int, int]] | None,
                  fetch_offset: int) -> list[tuple[int, bytes | None]]:
    """The records a read_committed consumer hands to the application (Kafka's CompletedFetch.nextFetchedRecord):
    aborted transactions enter the set of aborted producers once a batch reaches their first offset; a producer's
    ABORT marker takes it out again; transactional batches of an aborted producer are skipped; control batches are
    never returned; records below the fetch offset (the rest of a batch fetched mid-way) are skipped."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborted_pids: set[int] = set()
    out: list[tuple[int, bytes | None]] = []
    for b in batches:
        while pending and pending[0][1] <= b.last_offset:
            aborted_pids.add(pending.pop(0)[0])
        if b.control:
            if b.commit is False:
                aborted_pids.discard(b.producer_id)
            continue
        if b.transactional and b.producer_id in aborted_pids:
            continue
        out += [(o, v) for o, v in b.records if o >= fetch_offset]
    return out


async def fetch_one(w: Wire, topic: str, partition: int, offset: int, *, isolation: int = READ_COMMITTED,
                    max_bytes: int = 1 << 20, max_wait_ms: int = 10, min_bytes: int = 0,
                    label: str | None = None) -> Committed:
    """A sessionless Fetch (v12 pinned) of one partition at ``offset`` with ``isolation`` (1 read_committed) and a
    partition/response cap of ``max_bytes``; decoded with the aborted transactions list."""
    req: FetchRequest = w.fetch_request([(topic, partition, offset)], max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                        max_bytes=max_bytes, partition_max_bytes=max_bytes, isolation_level=isolation)
    summary = {"topic": topic, "partition": partition, "offset": offset, "isolation_level": isolation,
               "max_bytes": max_bytes}
    r = await w.request("Fetch", req, summary=summary, label=label, record=False)
    ps = [p for t in r.body.responses for p in t.partitions]
    if len(ps) != 1:
        raise TargetDiverged(f"a Fetch of {topic}/{partition} answered {len(ps)} partitions")
    p = ps[0]
    raw = bytes(p.records) if p.records else b""
    aborted = None if p.aborted_transactions is None else [(a.producer_id, a.first_offset)
                                                           for a in p.aborted_transactions]
    batches = decode(raw)
    res = Committed(p.error_code, p.high_watermark, p.last_stable_offset, aborted, batches,
                    consumer_view(batches, aborted, offset))
    if w.evidence is not None:
        w.evidence.exchange("Fetch", r.api_version, summary, {
            "error_code": p.error_code, "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset, "aborted_transactions": aborted,
            "batches": [[b.base_offset, b.last_offset, b.producer_id, "control" if b.control else
                         ("txn" if b.transactional else "plain")] for b in batches],
            "visible": [o for o, _ in res.visible]}, r.rtt_ns / 1e6, label=label)
    return res


async def read_all(w: Wire, topic: str, partition: int = 0, *, isolation: int = READ_COMMITTED,
                   max_bytes: int = 1 << 20, start: int = 0) -> tuple[list[tuple[int, bytes | None]], Committed]:
    """Everything a consumer of ``isolation`` reads from ``start``, fetching on from the end of the last batch
    returned (as consumers do, control batches included) until a fetch returns no batch; returns (records, last
    answer)."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    for _ in range(10_000):
        f = await fetch_one(w, topic, partition, offset, isolation=isolation, max_bytes=max_bytes)
        if f.error != NONE:
            raise TargetDiverged(f"Fetch of {topic}/{partition} at {offset} (isolation {isolation}) answered "
                                 f"error {f.error}")
        out += f.visible
        if not f.batches:
            return out, f
        offset = f.batches[-1].last_offset + 1
    raise TargetDiverged(f"reading {topic}/{partition} never reached an end")


async def offset_fetch_stable(w: Wire, group: str, parts: Sequence[tuple[str, int]], *, require_stable: bool
                              ) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """OffsetFetch v7 with ``require_stable`` (KIP-447) → (top-level error, {(topic, partition): (offset, error)})."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    by: dict[str, list[int]] = {}
    for t, p in parts:
        by.setdefault(t, []).append(p)
    req = OffsetFetchRequest(group_id=group, topics=[T(name=t, partition_indexes=ps) for t, ps in by.items()],
                             require_stable=require_stable)
    body = (await w.request("OffsetFetch", req, label=f"OffsetFetch require_stable={require_stable}")).body
    return body.error_code, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                             for t in body.topics for p in t.partitions}


async def describe_transaction(w: Wire, transactional_id: str) -> Any:
    """DescribeTransactions v0 for one id (to its coordinator) → the answer's entry."""
    r = await w.request("DescribeTransactions", DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    return r.body.transaction_states[0]


async def list_transactions(w: Wire) -> Any:
    """ListTransactions v0 (every state, every producer) → the answer body."""
    return (await w.request("ListTransactions", ListTransactionsRequest(state_filters=[],
                                                                        producer_id_filters=[]))).body


WRITE_TXN_MARKERS_KEY = 27


async def write_txn_marker(w: Wire, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                           parts: Sequence[tuple[str, int]], *, version: int = 2, transaction_version: int = 2,
                           label: str | None = None) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers (v1, or v2 with the marker's ``transaction_version``, KIP-1228) of one marker to the
    partitions' leader ``w``, as a transaction coordinator sends it → {(topic, partition): error}. Kafka serves it
    on the broker listener to any principal with CLUSTER_ACTION (everyone without an authorizer)."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    by: dict[str, list[int]] = {}
    for t, p in parts:
        by.setdefault(t, []).append(p)
    fields: dict[str, Any] = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                              "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                              "topics": [M.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                         for t, ps in by.items()]}
    if version >= 2:
        fields["transaction_version"] = transaction_version
    summary = {**{k: v for k, v in fields.items() if k != "topics"}, "partitions": list(parts)}
    r = await w.request("WriteTxnMarkers", WriteTxnMarkersRequest(markers=[M(**fields)]), version=version,
                        summary=summary, label=label)
    return {(t.name, p.partition_index): p.error_code for m in r.body.markers for t in m.topics
            for p in t.partitions}


def serves_write_txn_markers(w: Wire) -> int:
    """The highest WriteTxnMarkers version the broker advertises to a client (ApiVersions), -1 when none."""
    rng = w.conn.broker_versions.get(WRITE_TXN_MARKERS_KEY)
    return rng[1] if rng is not None else -1


async def last_marker(w: Wire, topic: str, partition: int) -> FetchedBatch | None:
    """The last transaction marker in the partition (read_uncommitted, from the start), None when there is none."""
    markers: list[FetchedBatch] = []
    offset = 0
    for _ in range(10_000):
        f = await fetch_one(w, topic, partition, offset, isolation=READ_UNCOMMITTED)
        if f.error != NONE:
            raise TargetDiverged(f"Fetch of {topic}/{partition} at {offset} answered error {f.error}")
        if not f.batches:
            return markers[-1] if markers else None
        markers += [b for b in f.batches if b.control]
        offset = f.batches[-1].last_offset + 1
    raise TargetDiverged(f"reading {topic}/{partition} never reached an end")
