"""Real clients (confluent-kafka / librdkafka and kafka-python) with their polls and commits recorded.

Why: some rules are about what real consumers do with a broker's answers (``auto.offset.reset`` after an empty
OffsetFetch or an OFFSET_OUT_OF_RANGE); the check must drive the clients users run, and its history must show
what they read. Both wrappers offer the same small surface — ``assign``, ``poll_records``, ``position``,
``commit``, ``close`` — and record ``assign``/``poll``/``commit`` operations (see conformance.recording).
``reset`` takes Kafka's names: ``earliest``, ``latest``, ``none`` (librdkafka calls the last one ``error``).

Records with keys, headers and timestamps: ``poll_full`` returns :class:`Rec` (what the client delivered, whole),
``seek`` moves the position (recorded as an ``assign`` at that offset, so the history's poll-continuity tracking
restarts there). ``producer(...)`` gives a recorded producer of either client (``send_all``: one ``send``
operation per flushed group of records, like ``Wire.produce``), with linger and compression settings.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from history.schema import key_of

from .evidence import Evidence
from .recording import Op, SessionHistory, decode_value, record_id

CLIENTS = ("confluent-kafka", "kafka-python")
CODECS = ("gzip", "snappy", "lz4", "zstd")
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Rec:
    """One record as a client sent or delivered it. ``offset`` is -1 until the broker assigned one;
    ``timestamp`` is milliseconds (CreateTime as sent) or None to let the client stamp it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None

    def shape(self) -> tuple[Any, ...]:
        """What must survive a produce/fetch round trip (KIP-82 headers in order, key, value, timestamp)."""
        return (self.offset, self.key, self.value, tuple(self.headers), self.timestamp)

    def history(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "value": record_id(self.key, self.value)}


class ClientDefect(RuntimeError):
    """The client itself failed in a way that says nothing about the broker (a known client bug, named)."""


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

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Move the position to ``offset`` (KafkaConsumer.seek); recorded as an ``assign`` at that offset."""
        v = {"partitions": [key_of(topic, partition)], "offset": offset}
        with self._op("assign", v) as op:
            self._seek(topic, partition, offset)
            op.ok(v)

    def poll_records(self, want: int, timeout_s: float) -> list[tuple[str, int, int, Any]]:
        """Poll until ``want`` records arrived or ``timeout_s`` passed; raises NoOffsetError for reset=none."""
        return [(r.topic, r.partition, r.offset, decode_value(r.value)) for r in self.poll_full(want, timeout_s)]

    def poll_full(self, want: int, timeout_s: float, *, quiet_s: float | None = None) -> list[Rec]:
        """Poll until ``want`` records arrived or ``timeout_s`` passed (or, with ``quiet_s``, until that long
        passed after reaching ``want`` — to catch duplicates); records come whole (key, headers, timestamp)."""
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(out) >= want:
                if quiet_s is None:
                    break
                deadline = min(deadline, time.monotonic() + quiet_s)
                quiet_s = None
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
                value: dict[str, Any] = {"records": [r.history() for r in got]}
                read = {key_of(r.topic, r.partition) for r in got}
                if positions := {k: o for k, o in before.items() if k in read}:
                    value["positions"] = positions
                op.ok(value)
            out += got
        if self.evidence is not None:
            self.evidence.note(f"{self.client} polled", [(key_of(r.topic, r.partition), r.offset) for r in out][:400])
        return out

    def commit(self, topic: str, partition: int, offset: int) -> None:
        v = {"group": self.group, "offsets": {key_of(topic, partition): offset}}
        with self._op("commit", v) as op:
            self._commit(topic, partition, offset)
            op.ok(v)

    # subclass hooks
    def _assign(self, topic: str, partitions: list[int]) -> None:
        raise NotImplementedError

    def _poll(self, timeout_s: float) -> list[Rec]:
        raise NotImplementedError

    def _seek(self, topic: str, partition: int, offset: int) -> None:
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
        self._eof: dict[tuple[str, int], int] = {}

    def _assign(self, topic: str, partitions: list[int]) -> None:
        from confluent_kafka import TopicPartition

        self._c.assign([TopicPartition(topic, p) for p in partitions])

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        # librdkafka's seek() needs a started fetcher ("Erroneous state" right after assign); assigning at an
        # offset is its documented way to start a partition there.
        self._c.assign([TopicPartition(topic, partition, offset)])

    def _poll(self, timeout_s: float) -> list[Rec]:
        from confluent_kafka import KafkaError

        m = self._c.poll(timeout_s)
        if m is None:
            return []
        if m.error():
            err = m.error()
            if err.code() == KafkaError._AUTO_OFFSET_RESET:
                raise NoOffsetError(f"librdkafka: {err}")
            if err.code() == KafkaError._PARTITION_EOF:   # (enable.partition.eof) the fetcher reached the end
                self._eof[(m.topic(), m.partition())] = m.offset()
                return []
            if err.code() == KafkaError.NOT_COORDINATOR and "committed offsets" in err.str():
                # A retriable broker answer librdkafka does not retry: the partition is never started
                # (librdkafka#5586). A client defect, so the check errs instead of blaming the broker.
                raise ClientDefect(f"librdkafka {_librdkafka_version()} stopped an assigned partition after a retriable "
                                   f"NOT_COORDINATOR to OffsetFetch and will not fetch it (librdkafka#5586): {err}")
            self.errors.append(str(err))
            return []
        _ts_type, ts = m.timestamp()
        return [Rec(m.topic(), m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                    ts if ts >= 0 else None)]

    def _commit(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self._c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)

    def position(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        (tp,) = self._c.position([TopicPartition(topic, partition)])
        if tp.offset < 0:   # librdkafka knows a position only after a message; else the end it reached, if any
            return self._eof.get((topic, partition))
        return tp.offset

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

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        from kafka import TopicPartition

        self._c.seek(TopicPartition(topic, partition), offset)

    def _poll(self, timeout_s: float) -> list[Rec]:
        import kafka.errors as Errors

        try:
            got = self._c.poll(timeout_ms=int(timeout_s * 1000))
        except (Errors.NoOffsetForPartitionError, Errors.OffsetOutOfRangeError) as exc:
            raise NoOffsetError(f"kafka-python: {exc!r}") from exc
        return [Rec(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers or ()),
                    r.timestamp if r.timestamp is not None and r.timestamp >= 0 else None)
                for recs in got.values() for r in recs]

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


# -- producers ------------------------------------------------------------------------------------------------
class UnsupportedByClient(Exception):
    """The client (as installed) cannot do what a check asks, e.g. a compression codec it was built without."""


@dataclass
class SendOutcome:
    """What the producer was told for each record of a ``send_all``: the record with its offset, or an error."""

    sent: list[Rec] = field(default_factory=list)
    errors: list[tuple[Rec, str]] = field(default_factory=list)


class RecordedProducer:
    """A real producer with its sends recorded: ``send_all(records)`` queues them all (the client batches them
    under its linger), flushes, and records one ``send`` operation whose ok carries every record's offset."""

    client = "?"

    def __init__(self, bootstrap: str, history: SessionHistory | None, evidence: Evidence | None) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.evidence = evidence
        self.process = history.process() if history is not None else 0

    def send_all(self, records: Sequence[Rec], timeout_s: float = 30.0) -> SendOutcome:
        """Send every record (kept in order per partition), wait for all acknowledgements."""
        invoke = {"records": [{"topic": r.topic, "partition": r.partition, "key": None,
                               "value": record_id(r.key, r.value)} for r in records]}
        with Op(self.history, self.process, "send", invoke) as op:
            out = self._send_all(records, timeout_s)
            done = [dict(r.history(), key=None) for r in out.sent]
            if out.errors:
                op.fail({"records": invoke["records"], "errors": [e for _r, e in out.errors][:20],
                         "acknowledged": done})
            else:
                op.ok({"records": done})
        if self.evidence is not None:
            self.evidence.note(f"{self.client} sent", {"records": len(records), "acknowledged": len(out.sent),
                                                      "offsets": sorted({r.offset for r in out.sent})[:5],
                                                      "errors": [e for _r, e in out.errors][:5]})
        return out

    def _send_all(self, records: Sequence[Rec], timeout_s: float) -> SendOutcome:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> RecordedProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConfluentProducer(RecordedProducer):
    """librdkafka's producer; ``compression`` is ``compression.type``, ``linger_ms`` is ``linger.ms``."""

    client = "confluent-kafka"

    def __init__(self, bootstrap: str, history: SessionHistory | None = None, evidence: Evidence | None = None,
                 *, compression: str = "none", linger_ms: int = 50, **config: Any) -> None:
        super().__init__(bootstrap, history, evidence)
        from confluent_kafka import KafkaException, Producer

        try:
            self._p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all",
                                "linger.ms": linger_ms, "batch.num.messages": 10000, "compression.type": compression,
                                "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
                                "retries": 0, "message.timeout.ms": 30000, **config})
        except KafkaException as exc:
            raise UnsupportedByClient(f"librdkafka {self._libversion()}: {exc}") from exc

    @staticmethod
    def _libversion() -> str:
        import confluent_kafka

        return confluent_kafka.libversion()[0]

    def _send_all(self, records: Sequence[Rec], timeout_s: float) -> SendOutcome:
        out = SendOutcome()
        acks: dict[int, tuple[Rec, Any, Any]] = {}

        def report(i: int, rec: Rec) -> Any:
            def done(err: Any, msg: Any) -> None:
                acks[i] = (rec, err, msg)
            return done

        for i, r in enumerate(records):
            kw: dict[str, Any] = {"key": r.key, "value": r.value, "partition": r.partition, "on_delivery": report(i, r)}
            if r.headers:
                kw["headers"] = list(r.headers)
            if r.timestamp is not None:
                kw["timestamp"] = r.timestamp
            while True:
                try:
                    self._p.produce(r.topic, **kw)
                    break
                except BufferError:          # local queue full: let it drain
                    self._p.poll(0.05)
        self._p.flush(timeout_s)
        for i, r in enumerate(records):
            got = acks.get(i)
            if got is None:
                out.errors.append((r, "no delivery report in time"))
            elif got[1] is not None:
                out.errors.append((r, f"{got[1].name()}: {got[1].str()}"))
            else:
                out.sent.append(Rec(r.topic, r.partition, got[2].offset(), r.key, r.value, r.headers, r.timestamp))
        return out

    def close(self) -> None:
        self._p.flush(5)


class KafkaPythonProducer(RecordedProducer):
    """kafka-python's KafkaProducer; ``compression`` is ``compression_type``, ``linger_ms`` the same."""

    client = "kafka-python"

    def __init__(self, bootstrap: str, history: SessionHistory | None = None, evidence: Evidence | None = None,
                 *, compression: str = "none", linger_ms: int = 50, **config: Any) -> None:
        super().__init__(bootstrap, history, evidence)
        from kafka import KafkaProducer
        from kafka.errors import UnsupportedCodecError

        try:
            self._p = KafkaProducer(**{"bootstrap_servers": bootstrap.split(","), "acks": "all",
                                       "linger_ms": linger_ms, "batch_size": 1 << 20, "retries": 0,
                                       "max_in_flight_requests_per_connection": 1,
                                       "compression_type": None if compression == "none" else compression,
                                       "request_timeout_ms": 30000, **config})
        except (UnsupportedCodecError, AssertionError, ValueError) as exc:
            raise UnsupportedByClient(f"kafka-python: {exc!r}") from exc

    def _send_all(self, records: Sequence[Rec], timeout_s: float) -> SendOutcome:
        out = SendOutcome()
        futures = [(r, self._p.send(r.topic, key=r.key, value=r.value, partition=r.partition,
                                    headers=list(r.headers) or None, timestamp_ms=r.timestamp)) for r in records]
        self._p.flush(timeout=timeout_s)
        for r, fut in futures:
            try:
                md = fut.get(timeout=max(0.1, timeout_s / 10))
            except Exception as exc:  # noqa: BLE001 - every failure is reported with the record it hit
                out.errors.append((r, f"{type(exc).__name__}: {exc}"[:300]))
                continue
            out.sent.append(Rec(r.topic, r.partition, md.offset, r.key, r.value, r.headers, r.timestamp))
        return out

    def close(self) -> None:
        self._p.close(timeout=5)


def producer(client: str, bootstrap: str, history: SessionHistory | None = None, evidence: Evidence | None = None,
             **kw: Any) -> RecordedProducer:
    """A recorded producer of the named client; raises UnsupportedByClient for a codec it lacks."""
    if client == "confluent-kafka":
        return ConfluentProducer(bootstrap, history, evidence, **kw)
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, history, evidence, **kw)
    raise ValueError(f"unknown client {client!r}; known: {CLIENTS}")


def _librdkafka_version() -> str:
    import confluent_kafka

    return confluent_kafka.libversion()[0]
