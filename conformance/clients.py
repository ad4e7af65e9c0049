"""Real clients (confluent-kafka / librdkafka and kafka-python) with their polls and commits recorded.

Why: some rules are about what real consumers do with a broker's answers (``auto.offset.reset`` after an empty
OffsetFetch or an OFFSET_OUT_OF_RANGE); the check must drive the clients users run, and its history must show
what they read. Both wrappers offer the same small surface — ``assign``, ``poll_records``, ``position``,
``commit``, ``close`` — and record ``assign``/``poll``/``commit`` operations (see conformance.recording).
``reset`` takes Kafka's names: ``earliest``, ``latest``, ``none`` (librdkafka calls the last one ``error``).
"""
from __future__ import annotations

import time
from typing import Any

from history.schema import key_of

from .evidence import Evidence
from .recording import Op, SessionHistory, decode_value

CLIENTS = ("confluent-kafka", "kafka-python")


class NoOffsetError(Exception):
    """The client reported that it has no offset and must not guess (auto.offset.reset=none)."""


class RecordedConsumer:
    """Common recording for both clients; subclasses implement ``_poll`` / ``_assign`` / ``_position``."""

    client = "?"

    def __init__(self, bootstrap: str, group: str, reset: str, history: SessionHistory | None,
                 evidence: Evidence | None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.reset = reset
        self.history = history
        self.evidence = evidence
        self.process = history.process() if history is not None else 0
        self.errors: list[str] = []

    def _op(self, f: str, value: Any) -> Op:
        return Op(self.history, self.process, f, value)

    def assign(self, topic: str, partitions: list[int]) -> None:
        with self._op("assign", {"partitions": [key_of(topic, p) for p in partitions]}) as op:
            self._assign(topic, partitions)
            op.ok({"partitions": [key_of(topic, p) for p in partitions]})

    def poll_records(self, want: int, timeout_s: float) -> list[tuple[str, int, int, Any]]:
        """Poll until ``want`` records arrived or ``timeout_s`` passed; raises NoOffsetError for reset=none."""
        out: list[tuple[str, int, int, Any]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < deadline:
            # reset=none: no offset reset can move a position inside poll (it raises instead), so the position
            # before it is where each partition's returned records start (see conformance.recording)
            before = self._positions() if self.reset == "none" else {}
            with self._op("poll", {}) as op:
                try:
                    got = self._poll(min(0.5, max(0.05, deadline - time.monotonic())))
                except NoOffsetError as exc:
                    op.fail({"error": str(exc)[:300]})
                    self.errors.append(str(exc))
                    raise
                value: dict[str, Any] = {"records": [{"topic": t, "partition": p, "offset": o,
                                                      "value": decode_value(v)} for t, p, o, v in got]}
                read = {key_of(t, p) for t, p, _, _ in got}
                if positions := {k: o for k, o in before.items() if k in read}:
                    value["positions"] = positions
                op.ok(value)
            out += [(t, p, o, decode_value(v)) for t, p, o, v in got]
        if self.evidence is not None:
            self.evidence.note(f"{self.client} polled", [(key_of(t, p), o) for t, p, o, _ in out])
        return out

    def commit(self, topic: str, partition: int, offset: int) -> None:
        v = {"group": self.group, "offsets": {key_of(topic, partition): offset}}
        with self._op("commit", v) as op:
            self._commit(topic, partition, offset)
            op.ok(v)

    # subclass hooks
    def _assign(self, topic: str, partitions: list[int]) -> None:
        raise NotImplementedError

    def _poll(self, timeout_s: float) -> list[tuple[str, int, int, bytes | None]]:
        raise NotImplementedError

    def _commit(self, topic: str, partition: int, offset: int) -> None:
        raise NotImplementedError

    def position(self, topic: str, partition: int) -> int | None:
        raise NotImplementedError

    def _positions(self) -> dict[str, int]:
        """Every assigned partition's known fetch position ("t/p" -> offset), without blocking or resetting."""
        return {}

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> RecordedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConfluentConsumer(RecordedConsumer):
    """librdkafka through confluent-kafka."""

    client = "confluent-kafka"

    def __init__(self, bootstrap: str, group: str, reset: str, history: SessionHistory | None = None,
                 evidence: Evidence | None = None, **config: Any) -> None:
        super().__init__(bootstrap, group, reset, history, evidence)
        from confluent_kafka import Consumer

        self._c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "error" if reset == "none" else reset,
                            "broker.address.family": "v4", "fetch.wait.max.ms": 100,
                            "topic.metadata.refresh.interval.ms": 1000, **config})

    def _assign(self, topic: str, partitions: list[int]) -> None:
        from confluent_kafka import TopicPartition

        self._c.assign([TopicPartition(topic, p) for p in partitions])

    def _poll(self, timeout_s: float) -> list[tuple[str, int, int, bytes | None]]:
        from confluent_kafka import KafkaError

        m = self._c.poll(timeout_s)
        if m is None:
            return []
        if m.error():
            err = m.error()
            if err.code() == KafkaError._AUTO_OFFSET_RESET:
                raise NoOffsetError(f"librdkafka: {err}")
            if err.code() == KafkaError._PARTITION_EOF:
                return []
            self.errors.append(str(err))
            return []
        return [(m.topic(), m.partition(), m.offset(), m.value())]

    def _commit(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self._c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)

    def position(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        (tp,) = self._c.position([TopicPartition(topic, partition)])
        return tp.offset if tp.offset >= 0 else None

    def _positions(self) -> dict[str, int]:
        try:
            return {key_of(tp.topic, tp.partition): tp.offset for tp in self._c.position(self._c.assignment())
                    if tp.offset >= 0}
        except Exception:  # noqa: BLE001 - no position known: record none
            return {}

    def close(self) -> None:
        self._c.close()


class KafkaPythonConsumer(RecordedConsumer):
    """kafka-python's KafkaConsumer."""

    client = "kafka-python"

    def __init__(self, bootstrap: str, group: str, reset: str, history: SessionHistory | None = None,
                 evidence: Evidence | None = None, **config: Any) -> None:
        super().__init__(bootstrap, group, reset, history, evidence)
        from kafka import KafkaConsumer

        self._c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False,
                                auto_offset_reset=reset, fetch_max_wait_ms=100, request_timeout_ms=15000,
                                **config)

    def _assign(self, topic: str, partitions: list[int]) -> None:
        from kafka import TopicPartition

        self._c.assign([TopicPartition(topic, p) for p in partitions])

    def _poll(self, timeout_s: float) -> list[tuple[str, int, int, bytes | None]]:
        import kafka.errors as Errors

        try:
            got = self._c.poll(timeout_ms=int(timeout_s * 1000))
        except (Errors.NoOffsetForPartitionError, Errors.OffsetOutOfRangeError) as exc:
            raise NoOffsetError(f"kafka-python: {exc!r}") from exc
        return [(r.topic, r.partition, r.offset, r.value) for recs in got.values() for r in recs]

    def _commit(self, topic: str, partition: int, offset: int) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self._c.commit({TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)})

    def position(self, topic: str, partition: int) -> int | None:
        import kafka.errors as Errors
        from kafka import TopicPartition

        try:
            return self._c.position(TopicPartition(topic, partition))
        except (Errors.NoOffsetForPartitionError, Errors.OffsetOutOfRangeError) as exc:
            raise NoOffsetError(f"kafka-python: {exc!r}") from exc

    def _positions(self) -> dict[str, int]:
        out = {}
        for tp in self._c.assignment():
            try:
                o = self._c.position(tp, timeout_ms=0)
            except Exception:  # noqa: BLE001 - no position known: record none for it
                continue
            if o is not None:
                out[key_of(tp.topic, tp.partition)] = o
        return out

    def close(self) -> None:
        self._c.close()


def consumer(client: str, bootstrap: str, group: str, reset: str, history: SessionHistory | None = None,
             evidence: Evidence | None = None, **config: Any) -> RecordedConsumer:
    """A recorded consumer of the named client (``confluent-kafka`` or ``kafka-python``)."""
    if client == "confluent-kafka":
        return ConfluentConsumer(bootstrap, group, reset, history, evidence, **config)
    if client == "kafka-python":
        return KafkaPythonConsumer(bootstrap, group, reset, history, evidence, **config)
    raise ValueError(f"unknown client {client!r}; known: {CLIENTS}")
