"""The coordinators' partition writer: how the group coordinator (``__consumer_offsets``) and the transaction
coordinator (``__transaction_state``) write to, read and own the partitions of their internal topic.

One class for both topics (Kafka's CoordinatorPartitionWriter for groups; TransactionStateManager's appends for
transactions), and every write goes through ``ReplicaManager.append_records`` with origin COORDINATOR:
- ``append``: acks=1, as Kafka's CoordinatorPartitionWriter.append: the coordinator acts on the write at once and
  waits for the HW itself (``wait_committed``), as the CoordinatorRuntime does; no min.insync.replicas check.
- ``write``: acks=all, as TransactionStateManager.appendTransactionToLog: NOT_ENOUGH_REPLICAS before the append
  when the ISR is below min ISR, answered once the HW passed the batch, errors mapped for the client by the one
  table (``offset_store.APPEND_ERRORS``, with the two coordinators' difference beside it).
- ``partition_for``: the one rule deciding which partition owns a group id or a transactional id:
  abs(hashCode(id)) % the topic's partition count in the metadata, the configured count before the topic exists
  (GroupCoordinatorService.partitionFor / TransactionStateManager.partitionFor with the count Kafka's
  BrokerServer reads from its metadata cache, falling back to offsets.topic.num.partitions /
  transaction.state.log.num.partitions).

Threading rule: used only on the broker's event loop.
"""
from __future__ import annotations

from .log import batch as B
from .offset_store import AppendError, coordinator_error, partition_for
from .partition import AppendOrigin
from .replica_manager import AppendEntry, ReplicaManager


class CoordinatorPartitionWriter:
    """An internal topic's partitions as its coordinator sees them (the offset store's OffsetsPartitions)."""

    def __init__(self, replicas: ReplicaManager, topic: str, configured_partitions: int, coordinator: str) -> None:
        self.replicas = replicas
        self.topic = topic
        self.configured_partitions = configured_partitions
        self.coordinator = coordinator

    # -- ownership ------------------------------------------------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partition count in the metadata; the configured count before the topic exists."""
        image = self.replicas.image
        t = image.topics.get(self.topic) if image is not None else None
        return len(t.partitions) if t is not None and t.partitions else self.configured_partitions

    def partition_for(self, key: str) -> int:
        """The partition owning a group id / transactional id: abs(hashCode(key)) % partition count."""
        return partition_for(key, self.partition_count())

    # -- writes ---------------------------------------------------------------------------------------------------

    def _entry(self, index: int, batch: bytes) -> AppendEntry:
        return AppendEntry(self.topic, index, batch, B.parse_header(batch))

    def append(self, index: int, batch: bytes) -> int:
        """acks=1 (CoordinatorPartitionWriter.append): append now; the offset after the batch (the HW to wait for),
        or AppendError with the log's error when nothing was written. A transactional batch (TxnOffsetCommit) is
        checked by producer epoch only (origin COORDINATOR)."""
        r = self.replicas.append_records([self._entry(index, batch)], 1, AppendOrigin.COORDINATOR,
                                         0.0).results[(self.topic, index)]
        if r.error:
            raise AppendError(r.error, f"append to {self.topic}-{index} failed with error {r.error}")
        self._flush(index)
        return r.end_offset

    async def write(self, index: int, batch: bytes, timeout_s: float) -> int:
        """acks=all (TransactionStateManager.appendTransactionToLog): 0 once the HW passed the batch, else the
        client's error for this coordinator (``coordinator_error``)."""
        pending = self.replicas.append_records([self._entry(index, batch)], -1, AppendOrigin.COORDINATOR, timeout_s)
        if not pending.results[(self.topic, index)].error:
            self._flush(index)
        return coordinator_error((await pending.wait())[(self.topic, index)].error, self.coordinator)

    def _flush(self, index: int) -> None:
        """Coordinator state is flushed at each write (the log's own flush policy governs client data)."""
        p = self.replicas.get(self.topic, index)
        if p is not None:
            p.log.flush()

    async def wait_committed(self, index: int, offset: int, timeout_s: float) -> int:
        """Wait until the HW reaches ``offset`` (the CoordinatorRuntime's high-watermark wait): 0 or the log's
        error (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...)."""
        return await self.replicas.wait_committed(self.topic, index, offset, timeout_s)

    # -- reads ----------------------------------------------------------------------------------------------------

    def high_watermark(self, index: int) -> int:
        p = self.replicas.get(self.topic, index)
        return p.hw if p is not None else 0

    def read(self, index: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        p = self.replicas.get(self.topic, index)
        if p is None or offset >= p.log.log_end_offset:
            return b"", offset
        return p.log.read(offset, max_bytes, p.log.log_end_offset, True).data, p.log.log_end_offset

    def log_start(self, index: int) -> int:
        p = self.replicas.get(self.topic, index)
        return p.log.log_start_offset if p is not None else 0
