"""Transaction manager for the reference producer: Kafka's transactional protocol (KIP-98, KIP-447), client side.

Why our own: the suites and the chaos workload need a transactional producer whose every request is visible and
whose error handling follows Kafka's Java client (``producer.internals.TransactionManager``) case by case, so a
history written through it means what a Java application's would.

Protocol (transaction version 1, what the Java client speaks to a broker without the transaction.version=2
feature, and what it still may speak to one with it):
- ``init_transactions``: FindCoordinator (key type 1 = TRANSACTION, key = transactional.id), then InitProducerId
  with the transactional id and transaction.timeout.ms -> producer id and epoch (a bumped epoch fences the
  previous producer of this id; the coordinator aborts the previous producer's open transaction first).
- ``begin_transaction`` is local. Before the first record to a partition is sent in a transaction, that
  partition is added with AddPartitionsToTxn (v <= 3, the client versions); Produce carries the transactional id
  and transactional batches (Produce v <= 11: v12+ would let the broker add partitions implicitly, KIP-890 part 2).
- ``send_offsets_to_transaction``: AddOffsetsToTxn (the group's offsets partition joins the transaction) to the
  transaction coordinator, then TxnOffsetCommit (v <= 4) to the group coordinator (FindCoordinator key type 0)
  with the consumer's generation and member id (KIP-447, so a zombie member's commit is refused).
- ``commit_transaction`` flushes every record of the transaction, then EndTxn(commit); ``abort_transaction``
  waits for the records in flight, then EndTxn(abort). A transaction whose record failed cannot commit: the
  producer is in ABORTABLE_ERROR until ``abort_transaction``, after which the epoch is bumped with InitProducerId
  (producer id and epoch given, KIP-360) so the sequence numbers can start over.

Errors per request, as the Java handlers (InitProducerIdHandler, AddPartitionsToTxnHandler, AddOffsetsToTxnHandler,
TxnOffsetCommitHandler, EndTxnHandler) treat them:
- NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (and a dropped connection): find the coordinator again, retry;
- CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS and other retriable errors: retry after a backoff
  (AddPartitionsToTxn retries CONCURRENT_TRANSACTIONS after 20 ms, Java's ADD_PARTITIONS_RETRY_BACKOFF_MS);
- PRODUCER_FENCED / INVALID_PRODUCER_EPOCH: fatal, raised as ``ProducerFencedError``; TRANSACTIONAL_ID_AUTHORIZATION
  _FAILED and INVALID_TXN_STATE: fatal. A fatal producer refuses everything but ``close``;
- UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE, and TxnOffsetCommit's UNKNOWN_MEMBER_ID /
  ILLEGAL_GENERATION (as CommitFailedError) / FENCED_INSTANCE_ID: abortable (the transaction must be aborted).
Transaction version 2 (KIP-890 part 2), what the Java client speaks when the cluster finalizes
``transaction.version`` >= 2 (ApiVersions finalized features, read at ``init_transactions`` as
TransactionManager.isTransactionV2Enabled reads it): no AddPartitionsToTxn (Produce v12+ has the partition leader
add the partition) and no AddOffsetsToTxn (TxnOffsetCommit v5 has the group coordinator add the offsets partition);
EndTxn v5 answers the producer id and epoch to continue with (the epoch bumped at every commit and abort), which
the producer adopts with fresh sequence numbers, so an abort after a failed record needs no InitProducerId bump.

Each call retries until ``max_block_ms``; then it raises ``KafkaTimeoutError`` and the state is unchanged, so the
same call may be made again (as Java's TransactionalRequestResult lets commitTransaction be retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kafka.errors as Errors
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from .protocol import Connection
from .types import TopicPartition

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TxnState"]

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = (
    10, 22, 24, 25, 26, 28)
# Client-side versions of transaction version 1 (the Java client caps these unless transaction.version >= 2)
MAX_VERSION = {INIT_PRODUCER_ID: 5, ADD_PARTITIONS_TO_TXN: 3, ADD_OFFSETS_TO_TXN: 4, END_TXN: 4, TXN_OFFSET_COMMIT: 4}
# ... and of transaction version 2 (KIP-890 part 2)
MAX_VERSION_TV2 = {**MAX_VERSION, END_TXN: 5, TXN_OFFSET_COMMIT: 5}
PRODUCE_MAX_VERSION_TXN = 11
TRANSACTION_VERSION = "transaction.version"
KEY_GROUP, KEY_TRANSACTION = 0, 1
ADD_PARTITIONS_RETRY_BACKOFF = 0.02

_RECOORDINATE = (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError)
_FENCED = (Errors.ProducerFencedError, Errors.InvalidProducerEpochError)
_FATAL = (Errors.TransactionalIdAuthorizationFailedError, Errors.InvalidTxnStateError)
_ABORTABLE = (Errors.UnknownProducerIdError, Errors.InvalidProducerIdMappingError)
_TRANSACTION_ABORTABLE = 120  # TRANSACTION_ABORTABLE (KIP-890), not in every kafka.errors table


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Java's ``ConsumerGroupMetadata``: what TxnOffsetCommit v3+ carries so the group coordinator can refuse a
    commit from a member that lost its partitions (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class _Retry(Exception):
    """Internal: retry the request after ``backoff`` seconds (re-finding the coordinator if ``recoordinate``)."""

    def __init__(self, why: str, backoff: float | None = None, recoordinate: bool = False) -> None:
        super().__init__(why)
        self.backoff = backoff
        self.recoordinate = recoordinate


class TransactionManager:
    """State and coordinator requests of one transactional producer (owned by :class:`~.producer.Producer`)."""

    def __init__(self, producer: Any, transactional_id: str, transaction_timeout_ms: int, max_block_ms: int,
                 retry_backoff: float) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.max_block = max_block_ms / 1000
        self.retry_backoff = retry_backoff
        self.state = TxnState.UNINITIALIZED
        self.partitions: set[TopicPartition] = set()   # added to the current transaction
        self.offsets_group: str | None = None           # AddOffsetsToTxn done for this group
        self.last_error: BaseException | None = None    # why the state is ABORTABLE_ERROR / FATAL_ERROR
        self.epoch_bump_required = False
        #: EndTxn(commit) was sent for the current transaction: from then on its outcome may be commit
        self.commit_sent = False
        self._coordinators: dict[tuple[int, str], Connection] = {}
        self._add_lock = asyncio.Lock()
        #: (api name, error name) of every coordinator answer that was not NONE, for checks
        self.errors_seen: list[tuple[str, str]] = []
        #: transaction version 2 in use (decided at init from the cluster's finalized transaction.version)
        self.tv2 = False

    # -- state ---------------------------------------------------------------------------------------------

    def require(self, *states: TxnState) -> None:
        """Raise unless in one of ``states``: the fatal error, the abortable one, or IllegalStateError."""
        if self.state is TxnState.FATAL_ERROR:
            raise self.last_error or Errors.KafkaError("the transactional producer hit a fatal error")
        if self.state not in states:
            if self.state is TxnState.ABORTABLE_ERROR:
                raise Errors.KafkaError(f"the transaction must be aborted: {self.last_error!r}")
            want = ", ".join(s.value for s in states)
            raise Errors.IllegalStateError(f"transactional producer is {self.state.value}, not {want}")

    def fatal(self, exc: BaseException) -> BaseException:
        self.state, self.last_error = TxnState.FATAL_ERROR, exc
        return exc

    def abortable(self, exc: BaseException) -> BaseException:
        if self.state is not TxnState.FATAL_ERROR:
            self.state, self.last_error = TxnState.ABORTABLE_ERROR, exc
        return exc

    def batch_failed(self, exc: BaseException) -> None:
        """A record of the transaction failed (Java: handleFailedBatch): fenced -> fatal, else abortable, and the
        epoch must be bumped after the abort (its sequence numbers may have gaps now)."""
        if isinstance(exc, _FENCED):
            self.fatal(Errors.ProducerFencedError(str(exc)))
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.ABORTABLE_ERROR,
                            TxnState.ABORTING):
            self.epoch_bump_required = True
            if self.state is not TxnState.ABORTING:
                self.abortable(exc)

    # -- coordinators --------------------------------------------------------------------------------------

    async def _coordinator(self, key_type: int, key: str) -> Connection:
        conn = self._coordinators.get((key_type, key))
        if conn is not None and not conn.closed:
            return conn
        cluster = self.producer.cluster
        any_conn = await cluster.any_connection()
        v = any_conn.versions.get(FIND_COORDINATOR)
        if v is None:
            raise Errors.UnsupportedVersionError("FindCoordinator")
        if v >= 4:
            req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            req = FindCoordinatorRequest(key=key, key_type=key_type)
        body = (await any_conn.request(req, v, cluster.request_timeout)).body
        c = body.coordinators[0] if v >= 4 else body
        if c.error_code:
            err = Errors.for_code(c.error_code)
            if err.retriable:
                raise _Retry(f"FindCoordinator {key}: {err.__name__}")
            if key_type == KEY_TRANSACTION:
                raise self.fatal(err(f"FindCoordinator {key}"))
            raise self.abortable(err(f"FindCoordinator {key}"))
        conn = await Connection.connect(c.host, c.port, client_id=cluster.client_id, timeout=cluster.request_timeout)
        await conn.api_versions(timeout=cluster.request_timeout)
        self._coordinators[(key_type, key)] = conn
        return conn

    async def _drop(self, key_type: int, key: str) -> None:
        conn = self._coordinators.pop((key_type, key), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        for k in list(self._coordinators):
            await self._drop(*k)

    async def _call(self, key_type: int, key: str, api_key: int, build: Callable[[int], Any],
                    check: Callable[[Any, int], None], what: str) -> Any:
        """One coordinator request, retried as the Java handlers retry until ``max_block``; ``check(body, v)``
        raises _Retry, a fatal or an abortable error, or returns for success."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_block
        last: BaseException | None = None
        while True:
            backoff = self.retry_backoff
            try:
                conn = await self._coordinator(key_type, key)
                v = conn.versions.get(api_key)
                if v is None:
                    raise self.fatal(Errors.UnsupportedVersionError(what))
                v = min(v, (MAX_VERSION_TV2 if self.tv2 else MAX_VERSION).get(api_key, v))
                timeout = max(0.1, min(self.producer.cluster.request_timeout, deadline - loop.time()))
                body = (await conn.request(build(v), v, timeout)).body
                check(body, v)
                return body
            except _Retry as r:
                last = r
                if r.backoff is not None:
                    backoff = r.backoff
                if r.recoordinate:
                    await self._drop(key_type, key)
            except (OSError, TimeoutError, Errors.KafkaConnectionError) as exc:
                last = exc
                await self._drop(key_type, key)
            if loop.time() + backoff >= deadline:
                raise Errors.KafkaTimeoutError(f"{what} not done within max_block_ms: {last!r}")
            await asyncio.sleep(backoff)

    def _classify(self, code: int, what: str, concurrent_backoff: float | None = None) -> None:
        """Java's per-handler rules shared by InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn."""
        if code == 0:
            return
        if code == _TRANSACTION_ABORTABLE:
            self.errors_seen.append((what, "TRANSACTION_ABORTABLE"))
            raise self.abortable(Errors.KafkaError(f"{what}: TRANSACTION_ABORTABLE"))
        err = Errors.for_code(code)
        self.errors_seen.append((what, err.__name__))
        if issubclass(err, _RECOORDINATE):
            raise _Retry(f"{what}: {err.__name__}", recoordinate=True)
        if issubclass(err, Errors.ConcurrentTransactionsError):
            raise _Retry(f"{what}: {err.__name__}", backoff=concurrent_backoff)
        if err.retriable:
            raise _Retry(f"{what}: {err.__name__}")
        if issubclass(err, _FENCED):
            raise self.fatal(Errors.ProducerFencedError(f"{what}: {err.__name__}"))
        if issubclass(err, _ABORTABLE):
            raise self.abortable(err(what))
        raise self.fatal(err(what))

    # -- API -----------------------------------------------------------------------------------------------

    async def init(self, bump: bool = False) -> None:
        """InitProducerId for the transactional id (``bump``: with the current id and epoch, KIP-360)."""
        if not bump:
            self.require(TxnState.UNINITIALIZED, TxnState.READY)
        pid, epoch = (self.producer.producer_id, self.producer.producer_epoch) if bump else (-1, -1)

        def build(v: int) -> Any:
            return InitProducerIdRequest(transactional_id=self.transactional_id,
                                         transaction_timeout_ms=self.transaction_timeout_ms,
                                         producer_id=pid if v >= 3 else -1, producer_epoch=epoch if v >= 3 else -1)

        body = await self._call(KEY_TRANSACTION, self.transactional_id, INIT_PRODUCER_ID, build,
                                lambda b, v: self._classify(b.error_code, "InitProducerId"), "InitProducerId")
        if not bump:
            self.tv2 = await self._cluster_tv() >= 2 and self.producer.tv2_allowed
        self.producer.set_producer_identity(body.producer_id, body.producer_epoch)
        self.epoch_bump_required = False
        self.state = TxnState.READY

    async def _cluster_tv(self) -> int:
        """The finalized transaction.version the coordinator's connection saw in its ApiVersions (0: none)."""
        conn = await self._coordinator(KEY_TRANSACTION, self.transactional_id)
        return conn.finalized_features.get(TRANSACTION_VERSION, 0)

    def begin(self) -> None:
        self.require(TxnState.READY)
        self.partitions.clear()
        self.offsets_group = None
        self.commit_sent = False
        self.state = TxnState.IN_TRANSACTION

    async def maybe_add_partition(self, tp: TopicPartition) -> None:
        """AddPartitionsToTxn before the first record to ``tp`` in this transaction (one request at a time)."""
        self.require(TxnState.IN_TRANSACTION)
        if tp in self.partitions:
            return
        if self.tv2:
            self.partitions.add(tp)         # TV2: the partition leader adds it when the Produce v12+ arrives
            return
        async with self._add_lock:
            if tp in self.partitions:
                return
            self.require(TxnState.IN_TRANSACTION)
            pid, epoch = self.producer.producer_id, self.producer.producer_epoch

            def build(v: int) -> Any:
                topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=tp.topic, partitions=[tp.partition])]
                return AddPartitionsToTxnRequest(v3_and_below_transactional_id=self.transactional_id,
                                                 v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                                 v3_and_below_topics=topics)

            def check(body: Any, v: int) -> None:
                codes = [p.partition_error_code for t in body.results_by_topic_v3_and_below
                         for p in t.results_by_partition]
                codes = [c for c in codes if c and c != Errors.OperationNotAttemptedError.errno] or [0]
                self._classify(codes[0], "AddPartitionsToTxn", concurrent_backoff=ADD_PARTITIONS_RETRY_BACKOFF)

            await self._call(KEY_TRANSACTION, self.transactional_id, ADD_PARTITIONS_TO_TXN, build, check,
                             "AddPartitionsToTxn")
            self.partitions.add(tp)

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator (both retried as Java does)."""
        self.require(TxnState.IN_TRANSACTION)
        pid, epoch = self.producer.producer_id, self.producer.producer_epoch
        if self.offsets_group != group.group_id and not self.tv2:   # TV2: TxnOffsetCommit v5 adds the partition
            await self._call(
                KEY_TRANSACTION, self.transactional_id, ADD_OFFSETS_TO_TXN,
                lambda v: AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=pid,
                                                 producer_epoch=epoch, group_id=group.group_id),
                lambda b, v: self._classify(b.error_code, "AddOffsetsToTxn"), "AddOffsetsToTxn")
            self.offsets_group = group.group_id
        pending = dict(offsets)

        def build(v: int) -> Any:
            by_topic: dict[str, list] = {}
            for tp, off in sorted(pending.items()):
                by_topic.setdefault(tp.topic, []).append(
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=tp.partition, committed_offset=off, committed_leader_epoch=-1,
                        committed_metadata=""))
            return TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group.group_id, producer_id=pid,
                producer_epoch=epoch, generation_id=group.generation_id, member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])

        def check(body: Any, v: int) -> None:
            retry: _Retry | None = None
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    code = p.error_code
                    if code == 0:
                        pending.pop(tp, None)
                        continue
                    err = Errors.for_code(code) if code != _TRANSACTION_ABORTABLE else None
                    self.errors_seen.append(("TxnOffsetCommit", err.__name__ if err else "TRANSACTION_ABORTABLE"))
                    if err is None or err is Errors.FencedInstanceIdError:
                        raise self.abortable(Errors.KafkaError(f"TxnOffsetCommit {tp}: code {code}"))
                    if err in (Errors.CoordinatorNotAvailableError, Errors.NotCoordinatorError,
                               Errors.RequestTimedOutError):
                        retry = _Retry(f"TxnOffsetCommit {tp}: {err.__name__}", recoordinate=True)
                    elif err.retriable:
                        retry = retry or _Retry(f"TxnOffsetCommit {tp}: {err.__name__}")
                    elif err in (Errors.UnknownMemberIdError, Errors.IllegalGenerationError):
                        raise self.abortable(Errors.CommitFailedError(
                            f"TxnOffsetCommit {tp}: {err.__name__} (consumer group metadata mismatch)"))
                    elif issubclass(err, _FENCED):
                        raise self.fatal(Errors.ProducerFencedError(f"TxnOffsetCommit: {err.__name__}"))
                    elif err is Errors.GroupAuthorizationFailedError:
                        raise self.abortable(err(f"TxnOffsetCommit {group.group_id}"))
                    else:
                        raise self.fatal(err(f"TxnOffsetCommit {tp}"))
            if retry is not None and pending:
                raise retry

        await self._call(KEY_GROUP, group.group_id, TXN_OFFSET_COMMIT, build, check, "TxnOffsetCommit")
        self.offsets_group = group.group_id

    async def end(self, commit: bool) -> None:
        """EndTxn(commit|abort) if anything joined the transaction (Java sends none for an empty one)."""
        if not self.partitions and self.offsets_group is None:
            self.state = TxnState.READY
            return
        pid, epoch = self.producer.producer_id, self.producer.producer_epoch
        what = "EndTxn(commit)" if commit else "EndTxn(abort)"
        body = await self._call(
            KEY_TRANSACTION, self.transactional_id, END_TXN,
            lambda v: EndTxnRequest(transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch,
                                    committed=commit),
            lambda b, v: self._classify(b.error_code, what), what)
        if getattr(body, "producer_id", -1) >= 0 and getattr(body, "producer_epoch", -1) >= 0:
            # EndTxn v5 (TV2): continue with the id and epoch it answered (Java's EndTxnHandler), new sequences;
            # the bump is done, so an abort after a failed record needs no InitProducerId
            self.producer.set_producer_identity(body.producer_id, body.producer_epoch)
            self.epoch_bump_required = False
        self.partitions.clear()
        self.offsets_group = None
        self.state = TxnState.READY
