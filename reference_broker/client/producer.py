"""Producer: Java-compatible partitioner, linger/size batching, acks 0/1/-1, retries, optional idempotence.

Why our own instead of kafka-python's: the suites need a producer whose every step is visible and
deterministic (seeded RNG for the sticky partitioner, one in-flight batch per partition so order and
sequence numbers are simple to reason about), and that runs on the same asyncio loop as the checks.

Behaviour (names follow the Java client's settings):
- Partition: explicit ``partition``, else for a key ``toPositive(murmur2(key)) % numPartitions`` (Java's
  ``BuiltInPartitioner.partitionForKey``), else a sticky partition per topic that moves on when its batch
  is sent or full (KIP-480 idea, not Java's byte-count heuristics of KIP-794).
- Batching: records for a partition go into a magic-v2 batch built by kafka-python's
  ``MemoryRecordsBuilder`` (compression gzip/snappy/lz4/zstd by the builder); a batch is sent when it is
  full (``batch_size``), when ``linger_ms`` has passed since it was opened, or on flush.
- In flight: at most one batch per partition (like ``max.in.flight.requests.per.connection=1`` per
  partition), so retries never reorder records of a partition; different partitions/brokers overlap.
- Errors: ``kafka.errors`` decides: retriable codes are retried up to ``retries`` times after
  ``retry_backoff_ms``; codes flagged ``invalid_metadata`` (and lost connections / timeouts) refresh
  metadata first, so a moved leader is found. Other codes fail the record futures with the Kafka error.
- Idempotence (``enable_idempotence``): InitProducerId once; each batch gets the partition's next sequence
  when it is closed and keeps it on retries. DUPLICATE_SEQUENCE_NUMBER counts as success (as in Java).
- Transactions (``transactional_id``; implies idempotence and acks=-1): ``init_transactions``,
  ``begin_transaction``, ``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``, with the
  coordinator protocol and the Java client's error handling in :mod:`.transactions`. Batches are transactional;
  a partition joins the transaction (AddPartitionsToTxn) before its first record is appended; Produce is capped
  at v11 (transaction version 1) — unless the cluster finalizes transaction.version 2 (and ``transaction_version``
  allows it): then Produce v12+ adds the partition and EndTxn v5 bumps the epoch (KIP-890 part 2). ``abort_transaction`` fails the records not yet sent (Java's
  abortUndrainedBatches) and waits for those in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import kafka.errors as Errors
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from .cluster import Cluster
from .protocol import DEFAULT_CLIENT_ID, Response
from .transactions import PRODUCE_MAX_VERSION_TXN, ConsumerGroupMetadata, TransactionManager, TxnState
from .types import RecordMetadata, TopicPartition

__all__ = ["COMPRESSION_TYPES", "Producer", "murmur2", "partition_for_key", "to_positive"]

PRODUCE = 0
INIT_PRODUCER_ID = 22

#: compression name -> attributes codec id (record batch v2)
COMPRESSION_TYPES = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def murmur2(data: bytes) -> int:
    """Java's ``org.apache.kafka.common.utils.Utils.murmur2``: a signed 32-bit result."""
    length = len(data)
    m = 0x5BD1E995
    r = 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rem = length % 4
    tail = n4 * 4
    # Java's switch falls through: case 3, then 2, then 1 (which also multiplies)
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs(), which differs for MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % numPartitions``."""
    return to_positive(murmur2(key)) % num_partitions


@dataclass
class _Batch:
    tp: TopicPartition
    builder: MemoryRecordsBuilder
    created: float
    futures: list[tuple[asyncio.Future[RecordMetadata], int]] = field(default_factory=list)
    closed: bool = False
    buffer: bytes = b""
    attempts: int = 0
    retry_at: float = 0.0
    base_sequence: int = -1

    @property
    def count(self) -> int:
        return len(self.futures)


class Producer:
    """Async producer. ``await send(...)`` enqueues and returns a future of :class:`RecordMetadata`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | Cluster,
        *,
        acks: int = -1,
        linger_ms: int = 0,
        batch_size: int = 16384,
        compression_type: str | None = None,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        enable_idempotence: bool = False,
        allow_auto_topic_creation: bool = False,
        metadata_max_wait_ms: int = 10000,
        client_id: str = DEFAULT_CLIENT_ID,
        rng: random.Random | None = None,
        produce_version: int | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        transaction_version: int = 2,
        max_block_ms: int = 60000,
    ) -> None:
        if transactional_id is not None:
            enable_idempotence = True  # as in Java: a transactional producer is idempotent
        if acks not in (0, 1, -1):
            raise ValueError("acks must be 0, 1 or -1")
        if compression_type not in COMPRESSION_TYPES:
            raise ValueError(f"unknown compression_type {compression_type!r}")
        if enable_idempotence and acks != -1:
            raise ValueError("idempotence requires acks=-1 (as in the Java client)")
        if isinstance(bootstrap, Cluster):
            self.cluster, self._owns = bootstrap, False
        else:
            self.cluster = Cluster(bootstrap, client_id=client_id, request_timeout=request_timeout_ms / 1000)
            self._owns = True
        self.acks = acks
        self.linger = linger_ms / 1000
        self.batch_size = batch_size
        self.compression = COMPRESSION_TYPES[compression_type]
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.idempotent = enable_idempotence
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata_max_wait = metadata_max_wait_ms / 1000
        self.rng = rng or random.Random()
        #: force a Produce version (default: the negotiated one); v3+ carries record batch v2
        self.produce_version = produce_version
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq: dict[TopicPartition, int] = {}
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._sticky: dict[str, int] = {}
        self._flushing = 0
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: every Produce round trip (Response objects), for checks that time or inspect them
        self.responses: list[Response] = []
        #: the transaction manager of a transactional producer (None otherwise)
        self.txn: TransactionManager | None = None
        #: the highest transaction version this producer may use (2: KIP-890 part 2 when the cluster finalizes it)
        self.tv2_allowed = transaction_version >= 2
        if transactional_id is not None:
            self.txn = TransactionManager(self, transactional_id, transaction_timeout_ms, max_block_ms,
                                          self.retry_backoff)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Load metadata, get a producer id if idempotent, start the sender task."""
        if self._owns:
            await self.cluster.start()
        if self.idempotent and self.txn is None:  # a transactional id's comes from init_transactions
            await self._init_producer_id()
        self._sender = asyncio.get_running_loop().create_task(self._run())
        self._sender.add_done_callback(self._sender_died)

    def _sender_died(self, task: asyncio.Task[None]) -> None:
        """A crashed sender must not leave record futures hanging forever: fail them with its error."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        for q in self._queues.values():
            for b in q:
                for f, _ in b.futures:
                    if not f.done():
                        f.set_exception(exc)

    async def _init_producer_id(self) -> None:
        conn = await self.cluster.any_connection()
        version = conn.versions.get(INIT_PRODUCER_ID)
        if version is None:
            raise Errors.UnsupportedVersionError("InitProducerId")
        for attempt in range(self.retries + 1):
            resp = await conn.request(
                InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
                ),
                version,
            )
            code = resp.body.error_code
            if code == 0:
                self.producer_id, self.producer_epoch = resp.body.producer_id, resp.body.producer_epoch
                return
            err = Errors.for_code(code)
            if not err.retriable or attempt == self.retries:
                raise err("InitProducerId")
            await asyncio.sleep(self.retry_backoff)

    # -- public API ----------------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Append a record to its partition's batch; the returned future completes when the broker answers."""
        if self._closed:
            raise Errors.IllegalStateError("producer is closed")
        if self._sender is None:
            raise Errors.IllegalStateError("producer not started")
        if self._sender.done():
            raise Errors.IllegalStateError("producer sender stopped") from (
                None if self._sender.cancelled() else self._sender.exception()
            )
        n = await self._num_partitions(topic)
        if partition is None:
            partition = self._choose_partition(topic, key, n)
        elif not 0 <= partition < n:
            raise Errors.UnknownTopicOrPartitionError(f"{topic}-{partition} (topic has {n} partitions)")
        tp = TopicPartition(topic, partition)
        if self.txn is not None:
            await self.txn.maybe_add_partition(tp)  # AddPartitionsToTxn before its first record
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        q = self._queues.setdefault(tp, deque())
        batch = q[-1] if q and not q[-1].closed else None
        if batch is None or batch.builder.append(ts, key, value, list(headers or [])) is None:
            if batch is not None:
                self._batch_full(batch)
            batch = self._new_batch(tp)
            q.append(batch)
            if batch.builder.append(ts, key, value, list(headers or [])) is None:  # pragma: no cover
                raise Errors.MessageSizeTooLargeError("record does not fit an empty batch")
        batch.futures.append((fut, ts))
        if batch.builder.is_full():
            self._batch_full(batch)
        if batch.builder.is_full() or self.linger == 0:
            self._wakeup.set()
        elif len(batch.futures) == 1:
            self._wakeup.set()  # sender must learn the new linger deadline
        return fut

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its metadata (raises the Kafka error on failure)."""
        fut = await self.send(topic, value, key, headers=headers, partition=partition, timestamp_ms=timestamp_ms)
        return await fut

    # -- transactions (see .transactions) -------------------------------------------------------------------

    def _txn_manager(self) -> TransactionManager:
        if self.txn is None:
            raise Errors.IllegalStateError("not a transactional producer (no transactional_id)")
        return self.txn

    def set_producer_identity(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id / epoch from InitProducerId: sequence numbers start over."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_seq.clear()

    async def init_transactions(self) -> None:
        """FindCoordinator + InitProducerId for the transactional id (fences older producers of the id)."""
        await self._txn_manager().init()

    def begin_transaction(self) -> None:
        self._txn_manager().begin()

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int],
                                          group: ConsumerGroupMetadata | str) -> None:
        """Commit a consumer group's next offsets (``tp -> offset``) as part of the transaction (KIP-98/447)."""
        meta = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        await self._txn_manager().send_offsets(offsets, meta)

    async def commit_transaction(self) -> None:
        """Flush the transaction's records, then EndTxn(commit). A record that failed leaves the producer in
        ABORTABLE_ERROR and raises its error (no EndTxn sent); retrying after a timeout resends EndTxn."""
        txn = self._txn_manager()
        if txn.state is not TxnState.COMMITTING:  # (COMMITTING: a retry after a timeout resends EndTxn)
            txn.require(TxnState.IN_TRANSACTION)
            txn.state = TxnState.COMMITTING
            await self.flush()
            txn.require(TxnState.COMMITTING)  # a record failed: raises its error, nothing was sent
        txn.commit_sent = True
        await txn.end(True)

    async def abort_transaction(self) -> None:
        """Fail the records not yet sent, wait for those in flight, EndTxn(abort); bump the epoch if a record
        failed (KIP-360: InitProducerId with the current id and epoch)."""
        txn = self._txn_manager()
        txn.require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING)
        txn.state = TxnState.ABORTING
        self._abort_undrained(Errors.KafkaError("the transaction was aborted"))
        await self.flush()
        txn.require(TxnState.ABORTING)
        await txn.end(False)
        if txn.epoch_bump_required:
            await txn.init(bump=True)

    def _abort_undrained(self, exc: BaseException) -> None:
        """Java's RecordAccumulator.abortUndrainedBatches: batches not in flight fail now."""
        for tp, q in self._queues.items():
            keep = [q[0]] if q and tp in self._in_flight else []
            for b in list(q)[len(keep):]:
                if b.closed and self.txn is not None:
                    self.txn.epoch_bump_required = True  # it had a sequence number: the broker may expect it
                for f, _ in b.futures:
                    if not f.done():
                        f.set_exception(exc)
            q.clear()
            q.extend(keep)
        self._wakeup.set()

    async def flush(self) -> None:
        """Send everything buffered now and wait for all of it to complete (successfully or not)."""
        futs = [f for q in self._queues.values() for b in q for f, _ in b.futures]
        if not futs:
            return
        self._flushing += 1
        self._wakeup.set()
        try:
            await asyncio.gather(*futs, return_exceptions=True)
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, stop the sender, close connections (if we own the cluster)."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self.flush()
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        for t in list(self._tasks):
            t.cancel()
        for q in self._queues.values():
            for b in q:
                for f, _ in b.futures:
                    if not f.done():
                        f.set_exception(Errors.KafkaConnectionError("producer closed"))
        if self.txn is not None:
            await self.txn.close()
        if self._owns:
            await self.cluster.close()

    # -- partitioning --------------------------------------------------------------------------------------

    async def _num_partitions(self, topic: str) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.metadata_max_wait
        while True:
            n = len(self.cluster.partitions_for(topic))
            if n:
                return n
            await self.cluster.refresh_metadata([topic], allow_auto_topic_creation=self.allow_auto_topic_creation)
            n = len(self.cluster.partitions_for(topic))
            if n:
                return n
            if loop.time() >= deadline:
                t = self.cluster.topics.get(topic)
                code = t.error_code if t else 0
                err = Errors.for_code(code) if code else Errors.KafkaTimeoutError
                raise err(f"topic {topic!r} not in metadata after {self.metadata_max_wait}s")
            await asyncio.sleep(self.retry_backoff)

    def _choose_partition(self, topic: str, key: bytes | None, n: int) -> int:
        if key is not None:
            return partition_for_key(key, n)
        p = self._sticky.get(topic)
        if p is None or p >= n:
            p = self.rng.randrange(n)
            self._sticky[topic] = p
        return p

    def _batch_full(self, batch: _Batch) -> None:
        if self._sticky.get(batch.tp.topic) == batch.tp.partition:
            del self._sticky[batch.tp.topic]

    def _new_batch(self, tp: TopicPartition) -> _Batch:
        builder = MemoryRecordsBuilder(magic=2, compression_type=self.compression, batch_size=self.batch_size)
        return _Batch(tp, builder, asyncio.get_running_loop().time())

    # -- sender --------------------------------------------------------------------------------------------

    def _ready(self, now: float) -> tuple[list[_Batch], float | None]:
        ready: list[_Batch] = []
        next_at: float | None = None
        for tp, q in self._queues.items():
            if not q or tp in self._in_flight:
                continue
            b = q[0]
            if b.closed:  # a retry
                due = b.retry_at
            elif len(q) > 1 or b.builder.is_full() or self._flushing or self._closed:
                due = now
            else:
                due = b.created + self.linger
            if due <= now:
                ready.append(b)
            else:
                next_at = due if next_at is None else min(next_at, due)
        return ready, next_at

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready, next_at = self._ready(now)
            if not ready:
                self._wakeup.clear()
                timeout = None if next_at is None else max(0.0, next_at - now)
                with contextlib.suppress(TimeoutError):
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow close()'s cancellation when a
                    # wakeup meets it (gh-86296), and close() would then wait for this loop forever
                    async with asyncio.timeout(timeout):
                        await self._wakeup.wait()
                continue
            by_leader: dict[int, list[_Batch]] = {}
            unknown: list[_Batch] = []
            for b in ready:
                leader = self.cluster.leader_for(b.tp)
                if leader is None:
                    unknown.append(b)
                else:
                    by_leader.setdefault(leader, []).append(b)
            for b in unknown:
                self._close_batch(b)
                self._in_flight.add(b.tp)
                self._spawn(self._retry_or_fail([b], Errors.LeaderNotAvailableError(f"no leader for {b.tp}"), True))
            for leader, batches in by_leader.items():
                for b in batches:
                    self._close_batch(b)
                    self._in_flight.add(b.tp)
                self._spawn(self._send_to(leader, batches))

    def _spawn(self, coro: object) -> None:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _close_batch(self, b: _Batch) -> None:
        if b.closed:
            return
        if self.idempotent:
            seq = self._next_seq.get(b.tp, 0)
            b.builder.set_producer_state(self.producer_id, self.producer_epoch, seq, self.txn is not None)
            b.base_sequence = seq
            self._next_seq[b.tp] = (seq + b.count) & 0x7FFFFFFF
        b.builder.close()
        b.buffer = bytes(b.builder.buffer())
        b.closed = True
        self._batch_full(b)

    def _produce_request(self, version: int, batches: list[_Batch]) -> ProduceRequest:
        topics: dict[str, list] = {}
        for b in batches:
            topics.setdefault(b.tp.topic, []).append(
                ProduceRequest.TopicProduceData.PartitionProduceData(index=b.tp.partition, records=b.buffer)
            )
        data = []
        for name, parts in topics.items():
            kw: dict[str, object] = {"name": name, "partition_data": parts}
            if version >= 13:
                kw["topic_id"] = self.cluster.topic_id(name)
            data.append(ProduceRequest.TopicProduceData(**kw))
        return ProduceRequest(
            transactional_id=self.txn.transactional_id if self.txn else None, acks=self.acks, timeout_ms=self.request_timeout_ms, topic_data=data
        )

    async def _send_to(self, leader: int, batches: list[_Batch]) -> None:
        try:
            conn = await self.cluster.connection(leader)
            version = self.produce_version if self.produce_version is not None else conn.versions.get(PRODUCE)
            if version is None:
                raise Errors.UnsupportedVersionError("Produce")
            if self.txn is not None and self.produce_version is None and not self.txn.tv2:
                version = min(version, PRODUCE_MAX_VERSION_TXN)     # TV1: no implicit adds (v12+)
            if self.idempotent and version < 3:
                raise Errors.UnsupportedVersionError("idempotence needs Produce v3+")
            resp = await conn.request(self._produce_request(version, batches), version, self.request_timeout_ms / 1000 + 5)
        except (OSError, TimeoutError, Errors.KafkaConnectionError) as exc:
            await self._retry_or_fail(batches, exc, True)
            return
        except Exception as exc:
            self._finish(batches, exc)
            return
        self.responses.append(resp)
        if resp.body is None:  # acks=0: the broker says nothing
            for b in batches:
                self._complete(b, -1, -1)
            return
        by_tp: dict[TopicPartition, object] = {}
        for t in resp.body.responses:
            name = t.name if t.name else self.cluster.topic_name_for_id(getattr(t, "topic_id", None))
            for p in t.partition_responses:
                by_tp[TopicPartition(name, p.index)] = p
        retry: list[_Batch] = []
        refresh = False
        last_err: BaseException | None = None
        for b in batches:
            p = by_tp.get(b.tp)
            if p is None:
                self._finish([b], Errors.KafkaProtocolError(f"no response for {b.tp}"))
                continue
            code = p.error_code
            if code == 0 or code == Errors.DuplicateSequenceNumberError.errno:
                self._complete(b, p.base_offset, getattr(p, "log_append_time_ms", -1))
                continue
            err_cls = Errors.for_code(code)
            err = err_cls(f"Produce {b.tp}: {getattr(p, 'error_message', None) or err_cls.__name__}")
            if err_cls.retriable:
                retry.append(b)
                refresh = refresh or err_cls.invalid_metadata
                last_err = err
            else:
                self._finish([b], err)
        if retry:
            await self._retry_or_fail(retry, last_err, refresh)

    async def _retry_or_fail(self, batches: list[_Batch], exc: BaseException | None, refresh: bool) -> None:
        keep = []
        for b in batches:
            b.attempts += 1
            if b.attempts > self.retries:
                self._finish([b], exc or Errors.KafkaError("retries exhausted"))
            else:
                keep.append(b)
        if not keep:
            return
        if refresh:
            with contextlib.suppress(Exception):
                await self.cluster.refresh_metadata({b.tp.topic for b in keep})
        loop = asyncio.get_running_loop()
        for b in keep:
            b.retry_at = loop.time() + self.retry_backoff
            self._in_flight.discard(b.tp)
        self._wakeup.set()

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int) -> None:
        for i, (fut, ts) in enumerate(b.futures):
            if not fut.done():
                off = base_offset + i if base_offset >= 0 else -1
                fut.set_result(RecordMetadata(b.tp.topic, b.tp.partition, off, ts, log_append_time))
        self._done(b)

    def _finish(self, batches: list[_Batch], exc: BaseException) -> None:
        if self.txn is not None and batches:
            self.txn.batch_failed(exc)
        for b in batches:
            for fut, _ in b.futures:
                if not fut.done():
                    fut.set_exception(exc)
            self._done(b)

    def _done(self, b: _Batch) -> None:
        q = self._queues.get(b.tp)
        if q and q[0] is b:
            q.popleft()
        elif q and b in q:
            q.remove(b)
        self._in_flight.discard(b.tp)
        self._wakeup.set()
