"""One small synchronous client interface over four Kafka client stacks, so a workload is written once and run
through the reference client stack, confluent-kafka (librdkafka), kafka-python or the Java client (kafka-clients,
in a JVM per client: chaos/java): the same history from two stacks against one broker tells a client bug from a
broker bug.

Outcomes follow the history contract. A send raises `Definite` only when the request certainly did not append
(the producer never retries, so an error answer is about the one attempt); anything else (timeouts, lost
connections, unknown errors) raises `Indefinite`, recorded as `info`. Polls and commits raise plain exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLIENTS = ("reference", "confluent", "kafka-python", "java")

# Kafka error names that mean "this produce request appended nothing" (the producer never retries).
DEFINITE_SEND_ERRORS = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "INVALID_REQUIRED_ACKS", "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED", "INVALID_TOPIC_EXCEPTION",
    # the same errors as kafka-python (MESSAGE_SIZE_TOO_LARGE, INVALID_TOPIC) and librdkafka (MSG_SIZE_TOO_LARGE,
    # TOPIC_EXCEPTION) name them; also raised before sending when a record exceeds the client's own limit
    "MESSAGE_SIZE_TOO_LARGE", "MSG_SIZE_TOO_LARGE", "INVALID_TOPIC", "TOPIC_EXCEPTION",
})


# With acks=all the leader appends first and answers once the ISR has the records; if leadership moves meanwhile,
# Kafka completes the parked produce with NOT_LEADER_OR_FOLLOWER (ReplicaManager completes delayed produces on
# becoming a follower; Partition.checkEnoughReplicasReachOffset answers it when the log is no longer the leader's)
# although the records are in the log and may survive on the new leader. Seen: a reference-cluster chaos run under
# isolate-controller (Java client) read a value whose send had that answer, which the checker took for an aborted
# read (G1a). With acks=0/1 the answer comes before or right after the append, so there the error stays definite.
AFTER_APPEND_WITH_ACKS_ALL = frozenset({"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION"})


# librdkafka retries a produce whose attempt failed with a retriable error on a new leader without counting it
# against `retries` (seen with retries=0: "Not leader for partition (actions Refresh,MsgNotPersisted)" from the old
# leader, then the same message sent to the new one), so its delivery report's error is the LAST attempt's: an
# earlier attempt may have been appended. Seen: reference cluster, isolate-controller, confluent: a send reported
# NOT_ENOUGH_REPLICAS whose value was read (G1a), and values appended twice (duplicate); never with the Java client.
# Only the errors no attempt can get past are definite for it.
LIBRDKAFKA_DEFINITE = frozenset({
    "INVALID_REQUIRED_ACKS", "MESSAGE_TOO_LARGE", "MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
    "TOPIC_AUTHORIZATION_FAILED", "INVALID_TOPIC_EXCEPTION", "TOPIC_EXCEPTION",
})


def definite_send_errors(acks: int) -> frozenset[str]:
    """The error names that prove a send with these acks appended nothing."""
    return DEFINITE_SEND_ERRORS - AFTER_APPEND_WITH_ACKS_ALL if acks == -1 else DEFINITE_SEND_ERRORS


class Definite(Exception):
    """The send certainly did not happen (history `fail`)."""


class Indefinite(Exception):
    """The send may or may not have happened (history `info`)."""


@dataclass
class ClientConfig:
    """What every stack needs; `extra` is passed through with Kafka client names (security.protocol, sasl.*...)."""

    bootstrap: str
    acks: int = -1
    timeout_s: float = 5.0
    group: str = "chaos-queue"
    commit: str = "sync"  # sync | async | auto
    extra: dict[str, str] = field(default_factory=dict)
    isolation: str | None = None  # read_committed | read_uncommitted; None: the stack's default
    transactional_id: str | None = None  # the txn workload's producers (chaos/txn_clients.py)
    txn_timeout_ms: int = 10000  # transaction.timeout.ms: a producer that vanished mid-transaction is aborted by then
    group_protocol: str = "classic"  # classic | consumer (KIP-848: the broker assigns; --group-protocol)

    @property
    def consumer_protocol(self) -> bool:
        """Whether the consumers join with KIP-848's protocol (--group-protocol consumer, or group.protocol given
        directly with --client-config)."""
        return "consumer" in (self.group_protocol.lower(), self.extra.get("group.protocol", "classic").lower())


Record = tuple[str, int, int, Any, Any]  # topic, partition, offset, key, value


def _value(raw: bytes | None) -> Any:
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace")
    return int(text) if text.lstrip("-").isdigit() else text


def _key(raw: bytes | None) -> Any:
    return None if raw is None else raw.decode("utf-8", "replace")


def _error_name(exc: BaseException) -> str:
    for attr in ("message", "name"):
        v = getattr(exc, attr, None)
        if isinstance(v, str) and v.isupper():
            return v
    code = getattr(exc, "args", [None])[0]
    if hasattr(code, "name") and callable(code.name):  # confluent KafkaError
        return str(code.name())
    return type(exc).__name__


def classify(exc: BaseException, acks: int = -1) -> Exception:
    """Definite for errors that prove nothing was appended (with these acks), Indefinite otherwise."""
    name = _error_name(exc)
    names = {name, name.upper(), type(exc).__name__}
    for n in list(names):
        if n.endswith("Error"):  # kafka-python: NotEnoughReplicasError -> NOT_ENOUGH_REPLICAS
            snake = "".join("_" + c if c.isupper() else c for c in n[:-5]).lstrip("_").upper()
            names.add(snake)
    definite = definite_send_errors(acks)
    if isinstance(exc, _ConfluentErr):
        definite = definite & LIBRDKAFKA_DEFINITE
    if names & definite:
        return Definite(name)
    return Indefinite(f"{type(exc).__name__}: {exc}")


class QueueClient:
    """Producer and consumer operations for one logical process (one thread)."""

    def send(self, topic: str, partition: int, key: str, value: int) -> int:
        """Append and return the offset; raises Definite or Indefinite."""
        raise NotImplementedError

    def assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        raise NotImplementedError

    def subscribe(self, topics: Sequence[str]) -> None:
        raise NotImplementedError

    def seek(self, topic: str, partition: int, offset: int) -> None:
        raise NotImplementedError

    def poll(self, timeout_s: float) -> tuple[list[Record], dict[str, int] | None]:
        """Records in client order and, where the stack knows them, the fetch positions read from."""
        raise NotImplementedError

    def commit(self, offsets: Mapping[str, int]) -> bool:
        """Commit these next-offsets ("t/p" -> offset); True when confirmed (sync), False when sent async."""
        raise NotImplementedError

    def can_commit(self) -> bool:
        """Whether commits mean anything for this client as set up (the reference stack commits in groups only)."""
        return True

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[str, int]:
        """The log end (high watermark) of each partition, for the final read."""
        raise NotImplementedError

    def positions(self) -> dict[str, int]:
        """The consumer's position (next offset to fetch) per assigned partition: past control records too, so a
        read_committed reader knows it reached a log end that is a transaction marker."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _read_positions(before: dict[str, int], out: list[Record]) -> dict[str, int] | None:
    """The contract's poll ``positions`` for kafka-python and librdkafka: the position read just before the poll
    (``before``), for the partitions the poll returned records of. Their consumers fetch in the background, so
    an empty poll does not show that any answer came back during it (the contract lists a partition only if
    one did): it says nothing, and its partitions are not listed. A returned record is at or after the position
    (both clients drop fetched records below it), so the first one shows what the log held from there."""
    read = {f"{t}/{p}" for t, p, *_ in out}
    return {k: o for k, o in before.items() if k in read} or None


# ---------------------------------------------------------------------------------------------- kafka-python
class KafkaPythonClient(QueueClient):
    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self._producer: Any = None
        self._consumer: Any = None
        self._assigned = False  # manual assignment: the positions before a poll are where it reads from

    def _kw(self) -> dict[str, Any]:
        return kafka_python_settings(self.cfg.extra)

    def send(self, topic: str, partition: int, key: str, value: int) -> int:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        if self._producer is None:
            self._producer = KafkaProducer(
                bootstrap_servers=self.cfg.bootstrap.split(","), acks="all" if self.cfg.acks == -1 else self.cfg.acks,
                retries=0, request_timeout_ms=int(self.cfg.timeout_s * 1000), max_block_ms=int(self.cfg.timeout_s * 1000),
                linger_ms=0, **self._kw())
        try:
            md = self._producer.send(topic, value=str(value).encode(), key=key.encode(), partition=partition)
            return int(md.get(timeout=self.cfg.timeout_s + 1).offset)
        except KafkaError as e:
            raise classify(e, self.cfg.acks) from e
        except Exception as e:  # noqa: BLE001 - unknown outcome
            raise Indefinite(f"{type(e).__name__}: {e}") from e

    def _consumer_(self) -> Any:
        from kafka import KafkaConsumer

        if self._consumer is None:
            self._consumer = KafkaConsumer(
                bootstrap_servers=self.cfg.bootstrap.split(","), group_id=self.cfg.group,
                enable_auto_commit=self.cfg.commit == "auto", auto_commit_interval_ms=1000,
                auto_offset_reset="earliest", request_timeout_ms=max(int(self.cfg.timeout_s * 1000), 6000),
                session_timeout_ms=6000, heartbeat_interval_ms=1000,
                **({"isolation_level": self.cfg.isolation} if self.cfg.isolation else {}), **self._kw())
        return self._consumer

    def positions(self) -> dict[str, int]:
        c = self._consumer_()
        return {f"{tp.topic}/{tp.partition}": int(c.position(tp)) for tp in c.assignment()}

    def assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        from kafka import TopicPartition

        self._consumer_().assign([TopicPartition(t, p) for t, p in partitions])
        self._assigned = True

    def subscribe(self, topics: Sequence[str]) -> None:
        self._consumer_().subscribe(list(topics))
        self._assigned = False

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from kafka import TopicPartition

        self._consumer_().seek(TopicPartition(topic, partition), offset)

    def poll(self, timeout_s: float) -> tuple[list[Record], dict[str, int] | None]:
        c = self._consumer_()
        before = {}
        if self._assigned:  # (in a group a rebalance inside poll may move positions)
            for tp in c.assignment():
                with contextlib.suppress(Exception):  # no position known (yet): none recorded for it
                    if (o := c.position(tp, timeout_ms=0)) is not None:
                        before[f"{tp.topic}/{tp.partition}"] = o
        batches = c.poll(timeout_ms=int(timeout_s * 1000))
        out = [(r.topic, r.partition, r.offset, _key(r.key), _value(r.value)) for recs in batches.values() for r in recs]
        return out, _read_positions(before, out)

    def commit(self, offsets: Mapping[str, int]) -> bool:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        c = self._consumer_()
        arg = {TopicPartition(*_split(k)): OffsetAndMetadata(o, "", -1) for k, o in offsets.items()}
        if self.cfg.commit == "async":
            c.commit_async(arg)
            return False
        c.commit(arg)
        return True

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[str, int]:
        from kafka import TopicPartition

        ends = self._consumer_().end_offsets([TopicPartition(t, p) for t, p in partitions])
        return {f"{tp.topic}/{tp.partition}": int(o) for tp, o in ends.items()}

    def close(self) -> None:
        for x in (self._producer, self._consumer):
            if x is not None:
                try:
                    x.close(timeout=2) if x is self._producer else x.close(autocommit=False)
                except Exception:  # noqa: BLE001, S110 - closing a client against a faulty cluster
                    pass


# ---------------------------------------------------------------------------------------------- confluent-kafka
def rdkafka_debug() -> dict[str, str]:
    """KCT_RDKAFKA_DEBUG=msg,protocol: librdkafka's debug contexts for the producers (to stderr), the evidence
    behind a finding such as a duplicate or an aborted read (not a --client-config: those are security settings)."""
    d = os.environ.get("KCT_RDKAFKA_DEBUG", "")
    return {"debug": d} if d else {}


class ConfluentClient(QueueClient):
    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self._producer: Any = None
        self._consumer: Any = None
        self._assigned = False  # manual assignment: the positions before a poll are where it reads from

    def send(self, topic: str, partition: int, key: str, value: int) -> int:
        from confluent_kafka import Producer

        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.cfg.bootstrap, "acks": str(self.cfg.acks),
                                       "retries": 0, "linger.ms": 0, "enable.idempotence": False,
                                       "message.timeout.ms": int(self.cfg.timeout_s * 1000),
                                       "request.timeout.ms": int(self.cfg.timeout_s * 1000), **rdkafka_debug(),
                                       **self.cfg.extra})
        result: dict[str, Any] = {}

        def done(err: Any, msg: Any) -> None:
            result["err"], result["msg"] = err, msg

        self._producer.produce(topic, value=str(value).encode(), key=key.encode(), partition=partition,
                               on_delivery=done)
        self._producer.flush(self.cfg.timeout_s + 2)
        if "err" not in result:
            raise Indefinite("no delivery report in time")
        if result["err"] is not None:
            raise classify(_ConfluentErr(result["err"]), self.cfg.acks)
        return int(result["msg"].offset())

    def _consumer_(self) -> Any:
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer({"bootstrap.servers": self.cfg.bootstrap, "group.id": self.cfg.group,
                                       "enable.auto.commit": self.cfg.commit == "auto",
                                       "auto.commit.interval.ms": 1000, "auto.offset.reset": "earliest",
                                       **rdkafka_group_settings(self.cfg),
                                       **({"isolation.level": self.cfg.isolation} if self.cfg.isolation else {}),
                                       **self.cfg.extra})
        return self._consumer

    def positions(self) -> dict[str, int]:
        c = self._consumer_()
        return {f"{tp.topic}/{tp.partition}": tp.offset for tp in c.position(c.assignment()) if tp.offset >= 0}

    def assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._consumer_().assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        self._assigned = True

    def subscribe(self, topics: Sequence[str]) -> None:
        self._consumer_().subscribe(list(topics))
        self._assigned = False

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self._consumer_().seek(TopicPartition(topic, partition, offset))

    def poll(self, timeout_s: float) -> tuple[list[Record], dict[str, int] | None]:
        c = self._consumer_()
        before = {}
        if self._assigned:  # (in a group a rebalance inside poll may move positions)
            with contextlib.suppress(Exception):  # OFFSET_INVALID (< 0): no position known yet
                before = {f"{tp.topic}/{tp.partition}": tp.offset for tp in c.position(c.assignment())
                          if tp.offset >= 0}
        msgs = c.consume(num_messages=500, timeout=timeout_s)
        out = []
        for m in msgs:
            if m.error() is not None:
                continue  # partition EOF and transient errors: not records
            out.append((m.topic(), m.partition(), m.offset(), _key(m.key()), _value(m.value())))
        return out, _read_positions(before, out)

    def commit(self, offsets: Mapping[str, int]) -> bool:
        from confluent_kafka import TopicPartition

        arg = [TopicPartition(*_split(k), o) for k, o in offsets.items()]
        if self.cfg.commit == "async":
            self._consumer_().commit(offsets=arg, asynchronous=True)
            return False
        self._consumer_().commit(offsets=arg, asynchronous=False)
        return True

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[str, int]:
        from confluent_kafka import TopicPartition

        c = self._consumer_()
        return {f"{t}/{p}": int(c.get_watermark_offsets(TopicPartition(t, p), timeout=self.cfg.timeout_s)[1])
                for t, p in partitions}

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1)
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001, S110
                pass


class _ConfluentErr(Exception):
    def __init__(self, err: Any) -> None:
        super().__init__(str(err))
        self.name = err.name()


# ---------------------------------------------------------------------------------------------- reference stack
class ReferenceClient(QueueClient):
    """The project's asyncio client stack on a private event loop (one per process thread)."""

    def __init__(self, cfg: ClientConfig) -> None:
        if cfg.extra:
            raise ValueError("the reference client stack speaks PLAINTEXT only; use --client confluent or kafka-python "
                             f"for {sorted(cfg.extra)}")
        self.cfg = cfg
        self.loop = asyncio.new_event_loop()
        self._producer: Any = None
        self._consumer: Any = None
        self._group = False
        self._isolation = 1 if cfg.isolation == "read_committed" else 0

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout or self.cfg.timeout_s + 2))

    def send(self, topic: str, partition: int, key: str, value: int) -> int:
        from kafka import errors as Errors

        from reference_broker.client import Producer

        try:
            if self._producer is None:
                self._producer = Producer(self.cfg.bootstrap, acks=self.cfg.acks, retries=0,
                                          request_timeout_ms=int(self.cfg.timeout_s * 1000),
                                          metadata_max_wait_ms=int(self.cfg.timeout_s * 1000))
                self._run(self._producer.start())
            md = self._run(self._producer.send_and_wait(topic, str(value).encode(), key.encode(), partition=partition))
            return int(md.offset)
        except Errors.KafkaError as e:
            raise classify(e, self.cfg.acks) from e
        except Exception as e:  # noqa: BLE001 - timeouts, closed connections: unknown outcome
            raise Indefinite(f"{type(e).__name__}: {e}") from e

    def _consumer_(self, group: bool) -> Any:
        from reference_broker.client import Consumer, GroupConsumer

        if self._consumer is None:
            if group:
                self._consumer = GroupConsumer(self.cfg.bootstrap, self.cfg.group, auto_offset_reset="earliest",
                                               enable_auto_commit=self.cfg.commit == "auto",
                                               auto_commit_interval_ms=1000, session_timeout_ms=6000,
                                               heartbeat_interval_ms=1000, isolation_level=self._isolation)
            else:
                self._consumer = Consumer(self.cfg.bootstrap, auto_offset_reset="earliest",
                                          isolation_level=self._isolation)
            self._group = group
            self._run(self._consumer.start())
        return self._consumer

    def assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        from reference_broker.client import TopicPartition

        self._consumer_(False).assign([TopicPartition(t, p) for t, p in partitions])

    def subscribe(self, topics: Sequence[str]) -> None:
        self._consumer_(True).subscribe(list(topics))

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from reference_broker.client import TopicPartition

        self._consumer_(self._group).seek(TopicPartition(topic, partition), offset)

    def poll(self, timeout_s: float) -> tuple[list[Record], dict[str, int] | None]:
        c = self._consumer
        if c is None:
            return [], None
        batches = self._run(c.poll(timeout_ms=int(timeout_s * 1000)), timeout_s + self.cfg.timeout_s + 2)
        out = [(r.topic, r.partition, r.offset, _key(r.key), _value(r.value)) for recs in batches.values() for r in recs]
        positions = None if self._group else dict(c.history_positions())
        return out, positions

    def can_commit(self) -> bool:
        return self._group

    def commit(self, offsets: Mapping[str, int]) -> bool:
        from reference_broker.client import TopicPartition

        c = self._consumer
        if not self._group or c is None:
            raise RuntimeError("the reference stack commits through a group (--sub-via subscribe)")
        arg = {TopicPartition(*_split(k)): o for k, o in offsets.items()}
        if self.cfg.commit == "async":
            c.commit_async(arg)
            return False
        self._run(c.commit(arg))
        return True

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[str, int]:
        from reference_broker.client import Consumer, TopicPartition

        async def ends() -> dict[str, int]:
            async with Consumer(self.cfg.bootstrap) as c:
                tps = [TopicPartition(t, p) for t, p in partitions]
                c.assign(tps)
                await c.seek_to_end(*tps)
                return {f"{tp.topic}/{tp.partition}": await c.position(tp) for tp in tps}

        return self._run(ends())

    def positions(self) -> dict[str, int]:
        c = self._consumer
        if c is None:
            return {}
        inner = c.consumer if self._group else c
        return {f"{tp.topic}/{tp.partition}": o for tp, o in inner.consumed_positions().items()}

    def close(self) -> None:
        for x in (self._producer, self._consumer):
            if x is not None:
                try:
                    self._run(x.close(), 3)
                except Exception:  # noqa: BLE001, S110
                    pass
        self.loop.close()


def _split(key: str) -> tuple[str, int]:
    topic, _, part = key.rpartition("/")
    return topic, int(part)


def parse_client_settings(pairs: Sequence[str]) -> dict[str, str]:
    """--client-config key=value pairs; only Kafka security settings pass (security.protocol, sasl.*, ssl.*)."""
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ValueError(f"--client-config {p!r}: expected key=value")
        if not (k == "security.protocol" or k.startswith(("sasl.", "ssl."))):
            raise ValueError(f"--client-config {k}: only security.protocol, sasl.* and ssl.* pass through")
        out[k] = v
    return out


# --client-config takes the Kafka clients' names (librdkafka's and Java's); kafka-python (the admin that creates the
# workload topic, and the kafka-python stack) spells them differently or not at all.
_KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism", "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password", "ssl.crl.location": "ssl_crlfile", "ssl.cipher.suites": "ssl_ciphers",
}
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def kafka_python_settings(extra: Mapping[str, str]) -> dict[str, Any]:
    """--client-config in kafka-python's names; a setting it cannot express is a clear error, not 30 s of retries.

    Java's PEM truststore and JAAS PLAIN/SCRAM login translate; a JKS store has no kafka-python form, so a TLS or SASL
    run that gives only Java's names must also give the librdkafka ones (ssl.ca.location, sasl.username...)."""
    out: dict[str, Any] = {}
    unknown = []
    for k, v in extra.items():
        if k in _KAFKA_PYTHON_NAMES:
            out[_KAFKA_PYTHON_NAMES[k]] = v.upper() if k == "security.protocol" else v
        elif k == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = v.lower() == "https"
        elif k == "sasl.jaas.config":
            fields = dict(_JAAS_FIELD.findall(v))
            out.setdefault("sasl_plain_username", fields.get("username"))
            out.setdefault("sasl_plain_password", fields.get("password"))
        elif k == "ssl.truststore.location" and extra.get("ssl.truststore.type", "").upper() == "PEM":
            out.setdefault("ssl_cafile", v)
        elif k != "ssl.truststore.type":
            unknown.append(k)
    protocol = out.get("security_protocol", "PLAINTEXT")
    if unknown and protocol != "PLAINTEXT" and not ({"ssl_cafile", "sasl_plain_username"} & out.keys()):
        raise ValueError(f"kafka-python (it creates the workload topic) has no equivalent of {', '.join(sorted(unknown))}"
                         f" for {protocol}: add the librdkafka names too (ssl.ca.location=PEM file, "
                         "ssl.certificate.location, ssl.key.location, sasl.username, sasl.password)")
    return {k: v for k, v in out.items() if v is not None}


def rdkafka_group_settings(cfg: ClientConfig) -> dict[str, Any]:
    """librdkafka's group settings: the other stacks' session timing for the classic protocol; with KIP-848
    (``group.protocol=consumer``) the timing is the broker's and librdkafka refuses session.timeout.ms and
    heartbeat.interval.ms ("not supported for group.protocol=consumer ... defined broker side")."""
    if cfg.consumer_protocol:
        return {"group.protocol": "consumer"}
    return {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}


CONSUMER_PROTOCOL_CLIENTS = ("confluent", "java")   # stacks whose consumers speak KIP-848 (group.protocol=consumer)


def check_group_protocol(name: str, cfg: ClientConfig) -> None:
    """Refuse a stack that cannot join with the protocol asked for, before any cluster starts."""
    if cfg.consumer_protocol and name not in CONSUMER_PROTOCOL_CLIENTS:
        raise ValueError(f"--group-protocol consumer (KIP-848): the {name} client stack speaks only the classic group "
                         f"protocol; use --client {' or '.join(CONSUMER_PROTOCOL_CLIENTS)}")


def settings_summary(cfg: ClientConfig) -> Mapping[str, Any]:
    """What goes into the run header (secrets never do)."""
    return {"acks": cfg.acks, "commit": cfg.commit, "security.protocol": cfg.extra.get("security.protocol",
                                                                                          "PLAINTEXT"),
            "group_protocol": "consumer" if cfg.consumer_protocol else "classic"}
