"""The transaction coordinator (KIP-98): Apache Kafka's TransactionCoordinator, TransactionStateManager,
TransactionMetadata and TransactionMarkerChannelManager, in small.

One coordinator per broker, for the transactional ids hashed to the ``__transaction_state`` partitions this broker
leads (``abs(hashCode(transactional.id)) % transaction.state.log.num.partitions``, as for groups). Every state
change is appended to that partition and applied once its high watermark passed it (acks=all); a leadership change
loads the partition (the coordinator epoch is its leader epoch) and finishes transactions that were completing.

States (TransactionState): Empty → Ongoing (AddPartitionsToTxn / AddOffsetsToTxn) → PrepareCommit | PrepareAbort
(EndTxn) → CompleteCommit | CompleteAbort (after every partition got its marker) → Ongoing ... A change being
written is ``pending`` (pendingState): requests meanwhile get CONCURRENT_TRANSACTIONS, as do InitProducerId,
AddPartitionsToTxn and EndTxn (either outcome, once the producer's epoch checks passed) while markers are being
written (PrepareCommit / PrepareAbort).
- InitProducerId: a new transactional id gets a producer id from the broker; each later InitProducerId bumps the
  epoch (the old producer is fenced: PRODUCER_FENCED at the coordinator, INVALID_PRODUCER_EPOCH at partition
  leaders once the markers carry the new epoch); an ongoing transaction is aborted first with a bumped epoch
  (PrepareEpochFence) and the caller told CONCURRENT_TRANSACTIONS, so its retry bumps again. KIP-360: a producer
  naming its id and epoch continues (epoch + 1) unless someone else initialised meanwhile (PRODUCER_FENCED); an
  exhausted epoch (32766) rotates to a new producer id.
- Transactions open longer than their timeout are aborted every
  transaction.abort.timed.out.transaction.cleanup.interval.ms the same way (epoch bumped: the producer is fenced).
- One transition at a time per transactional id (prepareTransitionTo): whatever decides a transition (a request,
  the timeout timer, a partition load) takes the pending state in the same step as its checks, before any await;
  from PrepareCommit / PrepareAbort until Complete* is written the transaction stays pending.
- Markers (WriteTxnMarkers v2, with the transaction's version) go to each partition's current leader through the
  marker channel (txn_marker_channel.py), retried until every partition took its marker; then Complete* is written,
  retried until the log accepts it (below min ISR, a slow follower), unless the partition moved to another broker
  (which finishes the transaction when it loads the partition).
- KIP-890 part 1: ``verify`` tells a partition leader whether a partition is in the ongoing transaction.
- KIP-890 part 2 (transaction version 2, chosen per request as Kafka chooses: EndTxn v5, and the implicit adds a
  partition leader makes for Produce v12 / TxnOffsetCommit v5): every EndTxn bumps the epoch (PrepareCommit /
  PrepareAbort carry epoch + 1, the markers too) and answers the new producer id and epoch; an exhausted epoch
  rotates to a new producer id when the transaction completes; a retried EndTxn with the previous epoch answers
  the completed outcome; an abort needs no partition (Empty / Complete* → PrepareAbort). Internal aborts (timeout,
  InitProducerId fencing an open transaction) bump the epoch once, the fence's bump, also for a TV2 transaction
  (seen on Kafka 4.4.0: a TV2 transaction at epoch 0 timed out → CompleteAbort at epoch 1; fenced by InitProducerId
  → the new instance at epoch 2).

Deliberate difference (GAPS.md): records are JSON, not Kafka's TransactionLogKey/Value schemas.
Narrow inputs only: config, clock, fault switches, the partitions of ``__transaction_state`` (the same interface
the offset store uses), a producer id allocator and a marker writer. Threading rule: the broker's event loop.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import errors as E
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from .clock import Clock, Timer
from .config import BrokerConfig
from .faults import Faults
from .offset_store import OffsetsPartitions
from .txn_marker_channel import Marker

log = logging.getLogger("reference_broker.txn")

TXN_TOPIC = "__transaction_state"
TP = tuple[str, int]

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
PREPARE_EPOCH_FENCE, DEAD = "PrepareEpochFence", "Dead"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, PREPARE_EPOCH_FENCE, DEAD)

NONE = E.NoError.errno
CONCURRENT_TRANSACTIONS = E.ConcurrentTransactionsError.errno
INVALID_PRODUCER_ID_MAPPING = E.InvalidProducerIdMappingError.errno
INVALID_TRANSACTION_TIMEOUT = E.InvalidTransactionTimeoutError.errno
INVALID_TXN_STATE = E.InvalidTxnStateError.errno
PRODUCER_FENCED = E.ProducerFencedError.errno
TRANSACTIONAL_ID_NOT_FOUND = E.TransactionalIdNotFoundError.errno
TRANSACTION_ABORTABLE = E.TransactionAbortableError.errno
MAX_EPOCH = 32767
APPEND_TIMEOUT_S = 30.0             # Kafka appends with request.timeout.ms

class MarkerWriter(Protocol):
    """What the coordinator needs of the marker channel (txn_marker_channel.TxnMarkerChannel)."""

    async def write(self, key: str, markers: list[Marker]) -> None: ...

    def abandon(self, key: str) -> None: ...


@dataclass
class TxnMetadata:
    """Kafka's TransactionMetadata (the fields clients can observe)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    timeout_ms: int = 60_000
    state: str = EMPTY
    partitions: set[TP] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    next_producer_id: int = -1          # TV2: the id the producer rotates to when this transaction completes
    tv: int = 0                         # clientTransactionVersion of the last transition (2: epoch bump per txn)
    pending: str | None = None          # a transition being written (pendingState)
    failed_fence: bool = False          # hasFailedEpochFence

    def value(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "last_producer_id": self.last_producer_id, "last_producer_epoch": self.last_producer_epoch,
                "timeout_ms": self.timeout_ms, "state": self.state,
                "partitions": sorted([t, p] for t, p in self.partitions), "start_ms": self.start_ms,
                "update_ms": self.update_ms, "next_producer_id": self.next_producer_id, "tv": self.tv}

    @classmethod
    def from_value(cls, txn_id: str, v: dict[str, Any]) -> TxnMetadata:
        return cls(txn_id, v["producer_id"], v["producer_epoch"], v.get("last_producer_id", -1),
                   v.get("last_producer_epoch", -1), v["timeout_ms"], v["state"],
                   {(t, p) for t, p in v.get("partitions", [])}, v.get("start_ms", -1), v.get("update_ms", -1),
                   v.get("next_producer_id", -1), v.get("tv", 0))

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, clock: Clock, faults: Faults, log_partitions: OffsetsPartitions,
                 next_producer_id: Callable[[], int], markers: MarkerWriter,
                 offsets_partition_for: Callable[[str], TP]) -> None:
        self.config = config
        self.clock = clock
        self.faults = faults
        self.log = log_partitions
        self.next_producer_id = next_producer_id
        self.markers = markers
        self.offsets_partition_for = offsets_partition_for
        self.owned: dict[int, int] = {}             # __transaction_state partition -> coordinator epoch
        self.txns: dict[str, TxnMetadata] = {}
        self._tasks: set[asyncio.Task] = set()
        self._late: set[str] = set()                # txn.timeout_abort_unchecked: late aborts waiting
        self._timer: Timer | None = None

    # -- ownership (TransactionStateManager.loadTransactionsForTxnTopicPartition / removeTransactions...) ------

    def partition_of(self, txn_id: str) -> int:
        return self.log.partition_for(txn_id)

    def owns(self, txn_id: str) -> bool:
        return self.partition_of(txn_id) in self.owned

    def load_partition(self, index: int, coordinator_epoch: int) -> None:
        """This broker leads ``index`` now: replay it; transactions caught between Prepare* and Complete* get their
        markers sent again (TransactionCoordinator.onElection)."""
        self.unload_partition(index)
        self.owned[index] = coordinator_epoch
        offset = self.log.log_start(index)
        loaded: dict[str, TxnMetadata] = {}
        while True:
            data, end = self.log.read(index, offset, 1 << 20)
            if offset >= end or not data:
                break
            records = MemoryRecords(data)
            while (batch := records.next_batch()) is not None:
                for rec in batch:
                    offset = rec.offset + 1
                    try:
                        key = json.loads(rec.key)
                        value = None if rec.value is None else json.loads(rec.value)
                    except (TypeError, ValueError):
                        continue
                    if key.get("type") != "txn":
                        continue
                    if value is None:
                        loaded.pop(key["id"], None)
                    else:
                        loaded[key["id"]] = TxnMetadata.from_value(key["id"], value)
        self.txns.update(loaded)
        log.info("txn coordinator: loaded %s-%d (epoch %d): %d transactional ids", TXN_TOPIC, index,
                 coordinator_epoch, len(loaded))
        for m in loaded.values():
            if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                commit = m.state == PREPARE_COMMIT
                self._claim(m, COMPLETE_COMMIT if commit else COMPLETE_ABORT)
                self._spawn(self._complete(m, commit, coordinator_epoch))

    def unload_partition(self, index: int) -> None:
        self.owned.pop(index, None)
        for txn_id in [t for t in self.txns if self.partition_of(t) == index]:
            del self.txns[txn_id]
            self.markers.abandon(txn_id)

    def start(self) -> None:
        interval = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000

        def tick() -> None:
            self.abort_timed_out()
            self._timer = self.clock.call_later(interval, tick)

        self._timer = self.clock.call_later(interval, tick)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _lookup(self, txn_id: str) -> tuple[int, TxnMetadata | None]:
        if not self.owns(txn_id):
            return E.NotCoordinatorError.errno, None
        return NONE, self.txns.get(txn_id)

    # -- the log (TransactionStateManager.appendTransactionToLog) ----------------------------------------------

    def _claim(self, m: TxnMetadata, state: str) -> None:
        """prepareTransitionTo: a transition of ``m`` is decided; no other may start until it is written (or, for
        Prepare*, until Complete* is). Taken synchronously, in the same step as the checks that decided it, so no
        request or timer handled meanwhile sees the transaction free (TransactionMetadata.pendingState)."""
        if m.pending is not None and not self.faults.on("txn.no_concurrent_check"):
            raise AssertionError(f"{m.transactional_id}: {state} while {m.pending} is pending")
        m.pending = state

    async def _write(self, m: TxnMetadata, new: TxnMetadata) -> int:
        """Claim, write and release one transition that ends with its write (InitProducerId, AddPartitions)."""
        before = m.pending
        self._claim(m, new.state)
        try:
            return await self._append(m, new)
        finally:
            m.pending = before

    async def _append(self, m: TxnMetadata, new: TxnMetadata) -> int:
        """Write ``new`` (the transition of ``m``, whose pending state the caller holds) and apply it once
        committed; 0 or the client's error."""
        index = self.partition_of(m.transactional_id)
        epoch = self.owned.get(index)
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        b.append(0, timestamp=self.clock.wall_ms(),
                 key=json.dumps({"type": "txn", "id": m.transactional_id}, sort_keys=True).encode(),
                 value=json.dumps(new.value()).encode(), headers=[])
        err = await self.log.write(index, bytes(b.build()), APPEND_TIMEOUT_S)    # acks=all, errors mapped
        if err:
            return err
        if self.owned.get(index) != epoch or self.txns.get(m.transactional_id) is not m:
            return E.NotCoordinatorError.errno     # the partition moved meanwhile
        for f in dataclasses.fields(TxnMetadata):
            if f.name not in ("pending", "failed_fence"):
                setattr(m, f.name, getattr(new, f.name))
        return NONE

    def _transit(self, m: TxnMetadata, **changes: Any) -> TxnMetadata:
        """The next state of ``m``; the previous producer id is the current one unless the change rotates it
        (TransactionMetadata.prepareTransitionTo: prevProducerId = producerId)."""
        changes.setdefault("last_producer_id", m.producer_id)
        return dataclasses.replace(m, partitions=set(changes.pop("partitions", m.partitions)),
                                   update_ms=self.clock.wall_ms(), pending=None, **changes)


    # -- InitProducerId (handleInitProducerId / prepareInitProducerIdTransit) ---------------------------------

    def valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config["transaction.max.timeout.ms"]

    async def init_producer_id(self, txn_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[int, int, int]:
        """(error, producer id, epoch) for a transactional id."""
        if txn_id == "":
            return E.InvalidRequestError.errno, -1, -1
        if not self.valid_timeout(timeout_ms):
            return INVALID_TRANSACTION_TIMEOUT, -1, -1
        err, m = self._lookup(txn_id)
        if err:
            return err, -1, -1
        if m is None:
            m = self.txns[txn_id] = TxnMetadata(txn_id, self.next_producer_id(), timeout_ms=timeout_ms,
                                                update_ms=self.clock.wall_ms())
        if m.pending is not None and not (self.faults.on("txn.no_concurrent_check") and m.pending in (
                COMPLETE_COMMIT, COMPLETE_ABORT)):
            return CONCURRENT_TRANSACTIONS, -1, -1
        if expected is not None and not (m.producer_epoch == -1 or expected[0] == m.producer_id or (
                expected[0] == m.last_producer_id and expected[1] >= MAX_EPOCH - 1)):
            return PRODUCER_FENCED, -1, -1
        state = m.state
        if state in (PREPARE_COMMIT, PREPARE_ABORT) and self.faults.on("txn.no_concurrent_check"):
            state = COMPLETE_COMMIT
        if state in (PREPARE_COMMIT, PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS, -1, -1
        if state == ONGOING:
            # PrepareEpochFence: abort with a bumped epoch, never returned; the client retries and bumps again.
            err = await self._fence(m)
            return (err or CONCURRENT_TRANSACTIONS), -1, -1
        no_bump = self.faults.on("txn.no_fencing") and m.producer_epoch >= 0
        if m.epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
            new = self._transit(m, producer_id=self.next_producer_id(), producer_epoch=0,
                                last_producer_id=m.producer_id,
                                last_producer_epoch=m.producer_epoch if expected is not None else -1,
                                timeout_ms=timeout_ms, state=EMPTY, partitions=set(), start_ms=-1)
        else:
            if expected is None or m.producer_epoch == -1 or expected[1] == m.producer_epoch:
                epoch, last = m.producer_epoch + 1, (m.producer_epoch if expected is not None else -1)
            elif expected[1] == m.last_producer_epoch:          # a retry of a bump that succeeded
                epoch, last = m.producer_epoch, m.last_producer_epoch
            else:
                return PRODUCER_FENCED, -1, -1
            if no_bump:
                epoch = m.producer_epoch
            new = self._transit(m, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                                state=EMPTY, partitions=set(), start_ms=-1)
        err = await self._write(m, new)
        if err:
            return err, -1, -1
        log.info("txn coordinator: initialised %r: producer %d epoch %d", txn_id, m.producer_id, m.producer_epoch)
        return NONE, m.producer_id, m.producer_epoch

    def _fence(self, m: TxnMetadata) -> Coroutine[Any, Any, int]:
        """prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient=false), decided now: the pending state is
        taken and the epoch goes up (not again after a failed fence write) before this returns, so the old producer
        is fenced at once and nothing else starts a transition; the returned coroutine writes PrepareAbort (the
        markers then fence the producer at every partition leader)."""
        self._claim(m, PREPARE_EPOCH_FENCE)
        if not (self.faults.on("txn.no_fencing") or m.failed_fence):
            m.producer_epoch = min(m.producer_epoch + 1, MAX_EPOCH)
        m.last_producer_epoch = -1
        return self._fenced_abort(m)

    async def _fenced_abort(self, m: TxnMetadata) -> int:
        # Kafka 4.4.0 bumps once here, also for a TV2 transaction (TXN-TV2-TIMEOUT-EPOCH); the fault adds the
        # TV2 end's own bump on top.
        tv = 2 if m.tv >= 2 and self.faults.on("txn.tv2_timeout_double_bump") else 0
        err = await self._prepare_end(m, commit=False, tv=tv, claimed=True)
        m.failed_fence = bool(err)
        return err

    # -- AddPartitionsToTxn / AddOffsetsToTxn / verification ----------------------------------------------------

    def _check_producer(self, m: TxnMetadata | None, producer_id: int, epoch: int) -> int:
        if m is None or m.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != epoch and not self.faults.on("txn.no_fencing"):
            return PRODUCER_FENCED
        return NONE

    def _changeable(self, txn_id: str, producer_id: int, epoch: int) -> tuple[int, Any]:
        """The checks AddPartitionsToTxn and EndTxn share before they change a transaction: a transactional id,
        its metadata here, this producer's id and epoch, no state write in flight."""
        if not txn_id:
            return E.InvalidRequestError.errno, None
        err, m = self._lookup(txn_id)
        if not err:
            err = self._check_producer(m, producer_id, epoch)
        if not err and m.pending is not None:
            err = CONCURRENT_TRANSACTIONS
        return err, m

    def _markers_pending_ignored(self, m: TxnMetadata | None) -> bool:
        """The txn.no_concurrent_check fault: a transaction whose markers are being written looks complete."""
        return (m is not None and self.faults.on("txn.no_concurrent_check") and m.state in (PREPARE_COMMIT,
                PREPARE_ABORT) and m.pending in (COMPLETE_COMMIT, COMPLETE_ABORT))

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int, tps: set[TP], tv: int = 0) -> int:
        """handleAddPartitionsToTransaction: the partitions join the transaction (it starts if none is open).
        ``tv`` 2: an implicit add by a partition leader for Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2)."""
        err, m = self._changeable(txn_id, producer_id, epoch)
        if err == CONCURRENT_TRANSACTIONS and self._markers_pending_ignored(m):
            err = NONE
        if err:
            return err
        assert m is not None
        if m.state in (PREPARE_COMMIT, PREPARE_ABORT) and not self.faults.on("txn.no_concurrent_check"):
            return CONCURRENT_TRANSACTIONS
        if m.state == ONGOING and tps <= m.partitions:
            return NONE
        start = self.clock.wall_ms() if m.state != ONGOING else m.start_ms
        if self.faults.on("txn.no_implicit_add") and tv >= 2:
            tps = set()                       # the fault: the leader's add leaves the partition out
        return await self._write(m, self._transit(m, state=ONGOING, partitions=m.partitions | tps, start_ms=start,
                                                  tv=tv))

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str) -> int:
        """handleAddOffsetsToTransaction: the group's __consumer_offsets partition joins the transaction."""
        return await self.add_partitions(txn_id, producer_id, epoch, {self.offsets_partition_for(group_id)})

    def verify(self, txn_id: str, producer_id: int, epoch: int, tps: list[TP]) -> dict[TP, int]:
        """handleVerifyPartitionsInTransaction (KIP-890 part 1): NONE for partitions in the ongoing transaction,
        TRANSACTION_ABORTABLE for the others; producer errors for all."""
        if not txn_id:
            return dict.fromkeys(tps, E.InvalidRequestError.errno)
        err, m = self._lookup(txn_id)
        if not err:
            err = self._check_producer(m, producer_id, epoch)
        if not err and m is not None and m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            err = CONCURRENT_TRANSACTIONS
        if err:
            return dict.fromkeys(tps, err)
        assert m is not None
        return {tp: NONE if tp in m.partitions else TRANSACTION_ABORTABLE for tp in tps}

    # -- EndTxn and the markers (endTransaction, TransactionMarkerChannelManager) ------------------------------

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                      tv: int = 0) -> tuple[int, int, int]:
        """(error, producer id, epoch) for EndTxn; ``tv`` 2 for EndTxn v5 (KafkaApis: version > 4 → TV_2). The id
        and epoch are what EndTxn v5 answers: the ones the producer continues with (-1 on an error)."""
        if tv >= 2:
            return await self._end_txn_tv2(txn_id, producer_id, epoch, commit)
        err, m = self._changeable(txn_id, producer_id, epoch)
        if err:
            return err, -1, -1
        assert m is not None
        if m.state == ONGOING:
            err = await self._prepare_end(m, commit)
            return (err, -1, -1) if err else (NONE, m.producer_id, m.producer_epoch)
        wanted = {True: (COMPLETE_COMMIT, PREPARE_COMMIT), False: (COMPLETE_ABORT, PREPARE_ABORT)}[commit]
        if m.state == wanted[0]:
            return NONE, m.producer_id, m.producer_epoch       # a retry of an EndTxn that completed
        if m.state == wanted[1]:
            return CONCURRENT_TRANSACTIONS, -1, -1
        return INVALID_TXN_STATE, -1, -1

    async def _end_txn_tv2(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> tuple[int, int, int]:
        """TransactionCoordinator.endTransaction for transaction version 2 (Kafka's table above it):
        the request's epoch must be the current one (Ongoing, Empty), or the previous one for a retry of an EndTxn
        whose bump is already in (Prepare*, Complete*; after a rotation: the old id with epoch 32766 and the new id
        at epoch 0); otherwise PRODUCER_FENCED. A retry of the completed outcome answers NONE with the current id
        and epoch; an abort with the current epoch from Empty / Complete* starts and ends an empty transaction."""
        if not txn_id:
            return E.InvalidRequestError.errno, -1, -1
        err, m = self._lookup(txn_id)
        if err:
            return err, -1, -1
        if m is None:
            return INVALID_PRODUCER_ID_MAPPING, -1, -1
        # The epoch rules follow the transaction's version, not the request's (currentTxnMetadataIsAtLeast-
        # TransactionsV2): an EndTxn v5 for a transaction begun with AddPartitionsToTxn v3 must carry its epoch.
        meta_tv2 = m.tv >= 2 and m.pending != PREPARE_EPOCH_FENCE
        retry_overflow = (meta_tv2 and m.last_producer_id == producer_id and epoch == MAX_EPOCH - 1
                          and m.producer_epoch == 0)
        retry_bump = meta_tv2 and m.producer_epoch == epoch + 1 and not self.faults.on("txn.tv2_no_retry")
        if not meta_tv2:
            valid = epoch == m.producer_epoch
        elif m.state in (ONGOING, EMPTY, DEAD, PREPARE_EPOCH_FENCE):
            valid = epoch == m.producer_epoch
        elif m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            valid = retry_bump
        else:
            valid = retry_bump or retry_overflow or epoch == m.producer_epoch
        if self.faults.on("txn.no_fencing"):
            valid = True
        is_retry = retry_bump or retry_overflow
        if m.producer_id != producer_id and not retry_overflow:
            return INVALID_PRODUCER_ID_MAPPING, -1, -1
        if not valid:
            return PRODUCER_FENCED, -1, -1
        if m.pending is not None:
            return CONCURRENT_TRANSACTIONS, -1, -1
        done = NONE, m.producer_id, m.producer_epoch
        if m.state == ONGOING:
            return await self._end_answer(m, commit)
        if m.state == COMPLETE_COMMIT:
            if commit:
                return done if is_retry else (INVALID_TXN_STATE, -1, -1)
            return (INVALID_TXN_STATE, -1, -1) if is_retry else await self._end_answer(m, False, empty=True)
        if m.state == COMPLETE_ABORT:
            if commit:
                return INVALID_TXN_STATE, -1, -1
            return done if is_retry else await self._end_answer(m, False, empty=True)
        if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            same = (m.state == PREPARE_COMMIT) == commit
            return (CONCURRENT_TRANSACTIONS if same else INVALID_TXN_STATE), -1, -1
        if m.state == EMPTY and not commit:
            return await self._end_answer(m, False, empty=True)
        return INVALID_TXN_STATE, -1, -1

    async def _end_answer(self, m: TxnMetadata, commit: bool, empty: bool = False) -> tuple[int, int, int]:
        """Prepare the end of ``m``'s transaction with TV2 and answer what the producer continues with: the bumped
        epoch, or the next producer id at epoch 0 when the bump exhausted the epochs (the completion's identity,
        as Kafka answers newPreSendMetadata.producerId / producerEpoch)."""
        err = await self._prepare_end(m, commit, tv=2, empty=empty)
        if err:
            return err, -1, -1
        if m.next_producer_id >= 0:
            return NONE, m.next_producer_id, 0
        return NONE, m.producer_id, m.producer_epoch

    async def _prepare_end(self, m: TxnMetadata, commit: bool, tv: int = 0, empty: bool = False,
                           claimed: bool = False) -> int:
        """PrepareCommit / PrepareAbort (prepareAbortOrCommit). With ``tv`` 2 the epoch goes up by one (the markers
        carry it) and an exhausted epoch gets the next producer id for the completion; ``empty``: an abort with no
        partition (noPartitionAdded: the start time is now). ``claimed``: the caller took the pending state (an
        epoch fence); otherwise it is taken here, before the first await. Once written, the transaction stays
        pending (Complete*) while its markers are written (prepareComplete), and the completion is started."""
        index = self.partition_of(m.transactional_id)
        epoch = self.owned.get(index, -1)
        state = PREPARE_COMMIT if commit else PREPARE_ABORT
        if claimed:
            m.pending = state
        else:
            self._claim(m, state)
        changes: dict[str, Any] = {"state": state}
        if tv >= 2:
            changes["tv"] = tv
            if not self.faults.on("txn.no_epoch_bump"):
                if m.epoch_exhausted:
                    changes["next_producer_id"] = self.next_producer_id()
                changes["producer_epoch"] = min(m.producer_epoch + 1, MAX_EPOCH)
                changes["last_producer_epoch"] = m.producer_epoch
        if empty:
            changes["partitions"] = set()
            changes["start_ms"] = self.clock.wall_ms()
        err = NONE
        try:
            err = await self._append(m, self._transit(m, **changes))
        finally:
            m.pending = None
        if not err:
            if not self.faults.on("txn.markers_not_pending"):
                m.pending = COMPLETE_COMMIT if commit else COMPLETE_ABORT
            self._spawn(self._complete(m, commit, epoch))
        return err

    def _still_ours(self, m: TxnMetadata, index: int, coordinator_epoch: int) -> bool:
        return self.owned.get(index) == coordinator_epoch and self.txns.get(m.transactional_id) is m

    async def _complete(self, m: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        """Write the markers to every partition of the transaction through the marker channel (it retries until
        each leader took its marker), then CompleteCommit / CompleteAbort, retried until the transaction log
        accepts it (TransactionMarkerChannelManager.tryAppendToLog): the transaction stays pending meanwhile.
        It ends early only when this broker no longer coordinates the transaction (the new coordinator finishes
        it when it loads the partition)."""
        index = self.partition_of(m.transactional_id)
        try:
            marker_commit = commit or self.faults.on("txn.abort_as_commit")
            todo = sorted(m.partitions)
            if commit and self.faults.on("txn.commit_first_partition_only"):
                todo = todo[:1]
            await self.markers.write(m.transactional_id, [
                Marker(t, p, m.producer_id, m.producer_epoch, coordinator_epoch, marker_commit,
                       2 if m.tv >= 2 else 0) for t, p in todo])
            backoff = 0.05
            attempts = 0
            if m.pending is None:                   # the txn.markers_not_pending fault: claimed only now
                m.pending = COMPLETE_COMMIT if commit else COMPLETE_ABORT
            while self._still_ours(m, index, coordinator_epoch):
                done: dict[str, Any] = {"state": COMPLETE_COMMIT if commit else COMPLETE_ABORT, "partitions": set()}
                if m.tv >= 2 and m.next_producer_id >= 0:       # prepareComplete: the rotation takes effect
                    done.update(producer_id=m.next_producer_id, producer_epoch=0, next_producer_id=-1)
                err = await self._append(m, self._transit(m, **done))
                attempts += 1
                if err in (NONE, E.NotCoordinatorError.errno):
                    if not err:
                        m.failed_fence = False
                    return
                if self.faults.on("txn.complete_gives_up"):
                    log.info("txn coordinator: %s of %r failed (%d): given up (fault)", done["state"],
                             m.transactional_id, err)
                    return
                if attempts in (1, 10) or attempts % 100 == 0:
                    log.info("txn coordinator: %s of %r failed (%d), attempt %d: retrying", done["state"],
                             m.transactional_id, err, attempts)
                await self.clock.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        finally:
            if m.pending in (COMPLETE_COMMIT, COMPLETE_ABORT):
                m.pending = None

    # -- timeouts (abortTimedOutTransactions) ------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        if self.faults.on("txn.no_timeout"):
            return
        now = self.clock.wall_ms()
        for m in list(self.txns.values()):
            if m.state == ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now:
                log.info("txn coordinator: aborting %r (open %d ms, timeout %d ms)", m.transactional_id,
                         now - m.start_ms, m.timeout_ms)
                if self.faults.on("txn.timeout_abort_unchecked"):
                    self._spawn(self._late_fence(m))
                else:
                    self._spawn(self._fence(m))

    async def _late_fence(self, m: TxnMetadata) -> None:
        """The txn.timeout_abort_unchecked fault: the abort decided above starts later, without re-checking the
        transaction: once an EndTxn handled meanwhile has prepared its own end (or after four cleanup intervals),
        so both complete. Waiting for that EndTxn, not a fixed time, makes the fault show whenever the producer's
        EndTxn comes after the decision, however loaded the machine."""
        parts = set(m.partitions)
        interval = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        waited = 0.0
        if m.transactional_id in self._late:
            return                            # one late abort per transaction, as one decision
        self._late.add(m.transactional_id)
        try:
            while m.state == ONGOING and waited < 4 * interval:
                await self.clock.sleep(0.005)
                waited += 0.005
        finally:
            self._late.discard(m.transactional_id)
        m.pending = None
        m.partitions |= parts
        await self._fence(m)

    # -- DescribeTransactions / ListTransactions ---------------------------------------------------------------

    def describe(self, txn_id: str) -> tuple[int, TxnMetadata | None]:
        """TransactionCoordinator.handleDescribeTransactions: INVALID_REQUEST for "", NOT_COORDINATOR / loading
        errors from the lookup, TRANSACTIONAL_ID_NOT_FOUND when unknown or Dead; an id whose InitProducerId never
        completed (epoch -1, Empty) is described as it is."""
        if not txn_id:
            return E.InvalidRequestError.errno, None
        err, m = self._lookup(txn_id)
        if err:
            return err, None
        if m is None or m.state == DEAD:
            return TRANSACTIONAL_ID_NOT_FOUND, None
        return NONE, m

    def list(self, producer_ids: set[int], states: set[str], min_duration_ms: int,
             id_matches: Callable[[str], Any] | None = None) -> list[TxnMetadata]:
        """ListTransactions filters (TransactionStateManager.listTransactionStates, Kafka 4.4): every id but Dead
        ones (also at epoch -1: Empty), producer ids and state names (empty: all), v1+ running longer than a
        duration (``now - start > filter``, whatever the state), v2+ ``id_matches`` (the transactional id pattern,
        matched against the whole id)."""
        now = self.clock.wall_ms()
        out = []
        for m in sorted(self.txns.values(), key=lambda x: x.transactional_id):
            if m.state == DEAD or not self.owns(m.transactional_id):
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if states and m.state not in states:
                continue
            if min_duration_ms >= 0:
                if self.faults.on("txn.list_duration_ongoing_only") and m.state != ONGOING:
                    continue
                if now - m.start_ms <= min_duration_ms:
                    continue
            if id_matches is not None and not id_matches(m.transactional_id):
                continue
            out.append(m)
        return out
