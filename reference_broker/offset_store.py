"""Durable committed offsets and group records in the internal ``__consumer_offsets`` topic.

Like Kafka, the group coordinator writes every offset commit (and each completed generation) as a record to the
partition ``abs(hashCode(group_id)) % the partition count of`` an internal, broker-managed topic, and
rebuilds its state by replaying those partitions on start. Deliberate difference (GAPS.md): keys and values are
JSON, not Kafka's OffsetCommitKey/Value binary schemas, and the topic is not compacted.

Threading rule: used only on the broker's event loop.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from kafka import errors as E
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

log = logging.getLogger("reference_broker.offsets")

OFFSETS_TOPIC = "__consumer_offsets"

GROUP = "group"
TXN = "transaction"

# How a failed or timed-out coordinator write is answered to the client: Kafka's
# CoordinatorOperationExceptionHelper.handleOperationException (groups) and TransactionStateManager.
# appendTransactionToLog (transactions) agree on these; any other error is answered as it is (a transactional
# offset commit of a fenced producer gets the log's INVALID_PRODUCER_EPOCH).
APPEND_ERRORS = {
    E.UnknownTopicOrPartitionError.errno: E.CoordinatorNotAvailableError.errno,
    E.NotEnoughReplicasError.errno: E.CoordinatorNotAvailableError.errno,
    E.NotEnoughReplicasAfterAppendError.errno: E.CoordinatorNotAvailableError.errno,
    E.RequestTimedOutError.errno: E.CoordinatorNotAvailableError.errno,
    E.NotLeaderForPartitionError.errno: E.NotCoordinatorError.errno,
    E.KafkaStorageError.errno: E.NotCoordinatorError.errno,
    E.MessageSizeTooLargeError.errno: E.UnknownError.errno,
    E.RecordListTooLargeError.errno: E.UnknownError.errno,
}
# Where the two coordinators differ: the group coordinator also answers INVALID_FETCH_SIZE as UNKNOWN_SERVER_ERROR
# (handleOperationException lists it; TransactionStateManager does not, so it passes through there).
DIFFERENCES = {
    GROUP: {E.InvalidFetchRequestError.errno: E.UnknownError.errno},        # INVALID_FETCH_SIZE
    TXN: {},
}


def coordinator_error(code: int, coordinator: str) -> int:
    """The error a client of ``coordinator`` (GROUP or TXN) gets for a write that failed with ``code``."""
    if code == 0:
        return 0
    return DIFFERENCES[coordinator].get(code, APPEND_ERRORS.get(code, code))


class AppendError(Exception):
    """An append to an offsets partition failed before anything was written; ``code`` is Kafka's error."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"error {code}")
        self.code = code


class OffsetsPartitions(Protocol):
    """What a coordinator needs from the broker (``coordinator_writer.CoordinatorPartitionWriter``): which
    partition owns a key, append to / read a partition it leads, and learn when an append is committed (the
    partition's high watermark passed it)."""

    def partition_for(self, key: str) -> int:
        """The partition owning a group id / transactional id (abs(hashCode) % the topic's partition count)."""

    async def write(self, index: int, batch: bytes, timeout_s: float) -> int:
        """Append with acks=all; 0 once committed, else the client's error (the coordinators' one table)."""

    def append(self, index: int, batch: bytes) -> int:
        """Append as leader; returns the offset after the batch (the HW it must reach to be committed);
        raises AppendError when nothing was written (e.g. this broker does not lead the partition). A
        transactional batch (TxnOffsetCommit) is checked by producer epoch only (origin COORDINATOR)."""

    def read(self, index: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """Whole batches from ``offset`` and the log end offset."""

    def log_start(self, index: int) -> int: ...

    def high_watermark(self, index: int) -> int:
        """The partition's HW here: every record below it is committed."""

    async def wait_committed(self, index: int, offset: int, timeout_s: float) -> int:
        """Wait until the HW reaches ``offset``: 0, or Kafka's error (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER,
        ...) when it did not within ``timeout_s``."""


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % numPartitions."""
    h = java_string_hash(group_id)
    return (h & 0x7FFFFFFF if h == -(1 << 31) else abs(h)) % partitions


class OffsetStore:
    def __init__(self, partitions: OffsetsPartitions, now_ms: Callable[[], int]) -> None:
        self.partitions = partitions
        self.now_ms = now_ms

    def _write(self, group_id: str, entries: list[tuple[dict, dict | None]], producer: tuple[int, int] | None = None
               ) -> int:
        pid, epoch = producer if producer is not None else (-1, -1)
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                      producer_id=pid, producer_epoch=epoch, base_sequence=-1, batch_size=1 << 30)
        now = self.now_ms()
        for i, (key, value) in enumerate(entries):
            b.append(i, timestamp=now, key=json.dumps(key, sort_keys=True).encode(),
                     value=None if value is None else json.dumps(value).encode(), headers=[])
        return self.partitions.append(self.index_of(group_id), bytes(b.build()))

    def index_of(self, group_id: str) -> int:
        """The offsets partition owning ``group_id`` (the writer's one ownership rule)."""
        return self.partitions.partition_for(group_id)

    def high_watermark(self, index: int) -> int:
        return self.partitions.high_watermark(index)

    async def wait_committed(self, index: int, offset: int, timeout_s: float) -> int:
        return await self.partitions.wait_committed(index, offset, timeout_s)

    def write_offsets(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        return self._write(group_id, [({"type": "offset", "group": group_id, "topic": t, "partition": p},
                                {"offset": o.offset, "leader_epoch": o.leader_epoch, "metadata": o.metadata,
                                 "commit_timestamp": o.commit_timestamp})
                               for (t, p), o in offsets.items()])

    def write_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        """TxnOffsetCommit: the offsets in a transactional batch of the producer; they apply only when its COMMIT
        marker follows (GroupMetadataManager.storeOffsets with a producer id)."""
        return self._write(group_id, [({"type": "offset", "group": group_id, "topic": t, "partition": p},
                                       {"offset": o.offset, "leader_epoch": o.leader_epoch, "metadata": o.metadata,
                                        "commit_timestamp": o.commit_timestamp})
                                      for (t, p), o in offsets.items()], (producer_id, producer_epoch))

    def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> int:
        return self._write(group_id, [({"type": "offset", "group": group_id, "topic": t, "partition": p}, None)
                                   for t, p in tps])

    def write_group(self, group_id: str, generation: int, protocol_type: str | None,
                    protocol_name: str | None) -> int:
        return self._write(group_id, [({"type": "group", "group": group_id},
                                {"generation": generation, "protocol_type": protocol_type,
                                 "protocol_name": protocol_name})])

    def write_consumer_group(self, group_id: str, group_epoch: int) -> int:
        """A KIP-848 consumer group exists (Kafka writes ConsumerGroupMetadata records; only the group's existence
        and epoch are kept here: a new coordinator knows the group, its members rejoin)."""
        return self._write(group_id, [({"type": "consumer_group", "group": group_id}, {"group_epoch": group_epoch})])

    def delete_group(self, group_id: str, tps: list[tuple[str, int]]) -> int:
        entries: list[tuple[dict, dict | None]] = [
            ({"type": "offset", "group": group_id, "topic": t, "partition": p}, None) for t, p in tps]
        entries.append(({"type": "group", "group": group_id}, None))
        return self._write(group_id, entries)

    def replay(self, index: int) -> Iterator[tuple[int, dict, dict | None]]:
        """Every (offset, key, value) written to offsets partition ``index``, in log order (a tombstone has value
        None). A transactional offset commit's key carries ``producer_id``; a transaction marker comes as key
        ``{"type": "marker", "producer_id": ..., "commit": ...}`` with value None."""
        offset = self.partitions.log_start(index)
        while True:
            data, end = self.partitions.read(index, offset, 1 << 20)
            if offset >= end or not data:
                return
            records = MemoryRecords(data)
            while (batch := records.next_batch()) is not None:
                if batch.is_control_batch:
                    for rec in batch:
                        offset = rec.offset + 1
                        kind = int.from_bytes(bytes(rec.key)[2:4], "big") if rec.key and len(rec.key) >= 4 else -1
                        yield rec.offset, {"type": "marker", "producer_id": batch.producer_id,
                                           "commit": kind == 1}, None
                    continue
                txn_pid = batch.producer_id if batch.is_transactional else None
                for rec in batch:
                    offset = rec.offset + 1
                    try:
                        key = json.loads(rec.key)
                        value = None if rec.value is None else json.loads(rec.value)
                    except ValueError:
                        log.warning("%s-%d offset %d: unreadable record skipped", OFFSETS_TOPIC, index, rec.offset)
                        continue
                    if txn_pid is not None:
                        key["producer_id"] = txn_pid
                    yield rec.offset, key, value
