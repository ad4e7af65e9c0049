"""Transactional clients for the txn workload (chaos/txn.py): one small synchronous interface over the client stacks
that do Kafka transactions — the reference stack, confluent-kafka (librdkafka) and the Java client
(chaos/java/driver.py's JavaTxnClient). kafka-python is refused (ValueError) rather than half-supported.

A TxnClient is a QueueClient (its consumer reads with ``cfg.isolation``, read_committed in the workload) plus a
transactional producer with ``cfg.transactional_id``. What the workload needs to tell outcomes apart:
- ``commit()`` returned: committed (history ``ok``);
- anything raised before ``commit()`` was called: the transaction cannot commit (no EndTxn(commit) was asked for;
  an abandoned transaction is aborted by the coordinator at the latest after transaction.timeout.ms, or by the
  next InitProducerId of its transactional id);
- ``commit()`` raised: unknown, unless a following ``abort()`` succeeds — every stack refuses to abort while a
  commit may still be in flight (Java: "commitTransaction timed out and must be retried"; librdkafka: a commit
  not acknowledged; reference: state COMMITTING), so a successful abort means the transaction was aborted.
``reset()`` drops the producer (after a fatal error: fenced, or an unknown state); the next ``init()`` makes a new
one, whose InitProducerId fences the old epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .clients import ClientConfig, ConfluentClient, QueueClient, ReferenceClient, _split, rdkafka_debug

TXN_CLIENTS = ("reference", "confluent", "java")


class TxnClient(QueueClient):
    """QueueClient + transactional producer (module docstring)."""

    def init(self) -> None:
        """Create the producer if needed and init_transactions (idempotent)."""
        raise NotImplementedError

    def begin(self) -> None:
        raise NotImplementedError

    def txn_send(self, topic: str, partition: int, key: str, value: int) -> int | None:
        """Send inside the transaction and wait for the broker's answer; the offset (None when unknown)."""
        raise NotImplementedError

    def send_offsets(self, offsets: Mapping[str, int]) -> None:
        """send_offsets_to_transaction with this client's consumer group metadata."""
        raise NotImplementedError

    def commit(self) -> bool:  # type: ignore[override]
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def rewind(self) -> None:
        """Seek the consumer back to its group's committed offsets (or the beginning): after an aborted
        consume-transform-produce transaction its input must be read again."""
        raise NotImplementedError

    def reset(self) -> None:
        """Drop the producer (the next init makes a new one)."""
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------- reference stack
class ReferenceTxnClient(ReferenceClient, TxnClient):
    def __init__(self, cfg: ClientConfig) -> None:
        super().__init__(cfg)
        self._txp: Any = None

    def init(self) -> None:
        from reference_broker.client import Producer

        if self._txp is not None:
            return
        t = int(self.cfg.timeout_s * 1000)
        p = Producer(self.cfg.bootstrap, transactional_id=self.cfg.transactional_id, request_timeout_ms=t,
                     max_block_ms=t, metadata_max_wait_ms=t, transaction_timeout_ms=self.cfg.txn_timeout_ms)
        try:
            self._run(p.start())
            self._run(p.init_transactions(), self.cfg.timeout_s + 5)
        except BaseException:
            self._run(p.close(), 5)
            raise
        self._txp = p

    def begin(self) -> None:
        self._txp.begin_transaction()

    def txn_send(self, topic: str, partition: int, key: str, value: int) -> int | None:
        md = self._run(self._txp.send_and_wait(topic, str(value).encode(), key.encode(), partition=partition))
        return int(md.offset)

    def send_offsets(self, offsets: Mapping[str, int]) -> None:
        from reference_broker.client import TopicPartition

        self._run(self._txp.send_offsets_to_transaction(
            {TopicPartition(*_split(k)): o for k, o in offsets.items()}, self._consumer.group_metadata()),
            self.cfg.timeout_s * 2 + 2)

    def commit(self) -> bool:  # type: ignore[override]
        self._run(self._txp.commit_transaction(), self.cfg.timeout_s * 2 + 2)
        return True

    def abort(self) -> None:
        self._run(self._txp.abort_transaction(), self.cfg.timeout_s * 2 + 2)

    def rewind(self) -> None:
        c = self._consumer
        owned = sorted(c.assignment())
        committed = self._run(c.committed(owned)) if owned else {}
        for tp in owned:
            c.seek(tp, committed.get(tp, 0))

    def reset(self) -> None:
        p, self._txp = self._txp, None
        if p is not None:
            try:
                self._run(p.close(), 5)
            except Exception:  # noqa: BLE001, S110 - a producer in a fatal state or a faulty cluster
                pass

    def close(self) -> None:
        self.reset()
        super().close()


# ---------------------------------------------------------------------------------------------- confluent-kafka
class ConfluentTxnClient(ConfluentClient, TxnClient):
    def __init__(self, cfg: ClientConfig) -> None:
        super().__init__(cfg)
        self._txp: Any = None

    def init(self) -> None:
        from confluent_kafka import Producer

        if self._txp is not None:
            return
        t = int(self.cfg.timeout_s * 1000)
        p = Producer({"bootstrap.servers": self.cfg.bootstrap, "transactional.id": self.cfg.transactional_id,
                      "transaction.timeout.ms": self.cfg.txn_timeout_ms, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 0, "message.timeout.ms": t, "request.timeout.ms": t,
                      **self.cfg.extra, **rdkafka_debug()})
        p.init_transactions(self.cfg.timeout_s * 2)
        self._txp = p

    def begin(self) -> None:
        self._txp.begin_transaction()

    def txn_send(self, topic: str, partition: int, key: str, value: int) -> int | None:
        from confluent_kafka import KafkaException

        result: dict[str, Any] = {}

        def done(err: Any, msg: Any) -> None:
            result["err"], result["msg"] = err, msg

        self._txp.produce(topic, value=str(value).encode(), key=key.encode(), partition=partition, on_delivery=done)
        self._txp.flush(self.cfg.timeout_s + 2)
        if "err" not in result:
            raise TimeoutError("no delivery report in time")
        if result["err"] is not None:
            raise KafkaException(result["err"])
        return int(result["msg"].offset())

    def send_offsets(self, offsets: Mapping[str, int]) -> None:
        from confluent_kafka import TopicPartition

        self._txp.send_offsets_to_transaction([TopicPartition(*_split(k), o) for k, o in offsets.items()],
                                              self._consumer_().consumer_group_metadata(), self.cfg.timeout_s * 2)

    def commit(self) -> bool:  # type: ignore[override]
        self._txp.commit_transaction(self.cfg.timeout_s * 2)
        return True

    def abort(self) -> None:
        self._txp.abort_transaction(self.cfg.timeout_s * 2)

    def rewind(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        c = self._consumer_()
        owned = c.assignment()
        if not owned:
            return
        for tp in c.committed(owned, timeout=self.cfg.timeout_s):
            c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def reset(self) -> None:
        p, self._txp = self._txp, None
        if p is not None:
            try:
                p.flush(1)
            except Exception:  # noqa: BLE001, S110
                pass

    def close(self) -> None:
        self.reset()
        super().close()
