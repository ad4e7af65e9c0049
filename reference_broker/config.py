"""Broker configuration under Apache Kafka's own key names, so a user reads them as Kafka settings."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# key -> (type, default). Only keys the reference broker honours are accepted; an unknown key is an error so a
# typo never silently falls back to a default.
DEFAULTS: dict[str, tuple[type, Any]] = {
    "node.id": (int, 0),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "log.segment.bytes": (int, 1 << 30),
    "log.index.interval.bytes": (int, 4096),
    "log.flush.interval.messages": (int, (1 << 63) - 1),
    "log.flush.interval.ms": (int, (1 << 63) - 1),
    "log.flush.scheduler.interval.ms": (int, 1_000),
    "socket.request.max.bytes": (int, 104_857_600),
    "message.max.bytes": (int, 1_048_588),
    "fetch.max.bytes": (int, 57_671_680),
    "min.insync.replicas": (int, 1),
    "replica.lag.time.max.ms": (int, 30_000),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.min.bytes": (int, 1),
    "replica.fetch.max.bytes": (int, 1_048_576),
    "replica.fetch.response.max.bytes": (int, 10_485_760),
    "replica.fetch.backoff.ms": (int, 1_000),
    "replica.socket.timeout.ms": (int, 30_000),
    "broker.session.timeout.ms": (int, 9_000),
    "broker.heartbeat.interval.ms": (int, 2_000),
    "offsets.topic.replication.factor": (int, 3),
    # Kafka's advertised.listeners, reduced to one PLAINTEXT HOST:PORT clients are told to connect to (a proxy,
    # for fault injection); empty: the address the broker listens on.
    "advertised.listeners": (str, ""),
    # Reference-only: how this broker reaches other brokers for replication, "ID=HOST:PORT,..." (per-link proxies
    # make "partition broker 1 from 2" one proxy switch); brokers not named use their registered address.
    "replica.link.addresses": (str, ""),
    "unclean.leader.election.enable": (bool, False),
    # how often the controller elects leaders uncleanly for leaderless partitions (Kafka's periodic electUnclean
    # task); fencing a leader elects uncleanly at once where the topic allows it
    "unclean.leader.election.interval.ms": (int, 300_000),
    "group.initial.rebalance.delay.ms": (int, 3_000),
    "group.min.session.timeout.ms": (int, 6_000),
    "group.max.session.timeout.ms": (int, 1_800_000),
    # KIP-848 consumer groups (GroupCoordinatorConfig's names and defaults); Kafka requires min <= value <= max and
    # heartbeat interval < session timeout (checked when the coordinator starts)
    "group.consumer.session.timeout.ms": (int, 45_000),
    "group.consumer.min.session.timeout.ms": (int, 45_000),
    "group.consumer.max.session.timeout.ms": (int, 60_000),
    "group.consumer.heartbeat.interval.ms": (int, 5_000),
    "group.consumer.min.heartbeat.interval.ms": (int, 5_000),
    "group.consumer.max.heartbeat.interval.ms": (int, 15_000),
    "group.consumer.max.size": (int, 2_147_483_647),
    # the server assignors by name, the first is the default (Kafka: class names or uniform/range)
    "group.consumer.assignors": (str, "uniform,range"),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.retention.minutes": (int, 10_080),
    "offsets.commit.timeout.ms": (int, 5_000),
    # idempotent producer state (Kafka's ProducerStateManagerConfig / UnifiedLog's expiration check)
    "producer.id.expiration.ms": (int, 86_400_000),
    "producer.id.expiration.check.interval.ms": (int, 600_000),
    # transactions (Kafka's TransactionStateManagerConfig / TransactionLogConfig names and defaults)
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "transaction.max.timeout.ms": (int, 900_000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10_000),
    "transaction.partition.verification.enable": (bool, True),
    # the `transaction.version` feature level the metadata log is formatted with (KIP-890 part 2; Kafka sets it when the storage is
    # formatted, `kafka-storage format --feature transaction.version=N`, 2 by default in 4.x): 2 lets clients bump the
    # epoch per transaction (EndTxn v5) and add partitions through Produce v12; 0/1 keep them on the classic protocol
    "transaction.version": (int, 2),
    # the `eligible.leader.replicas.version` level the metadata log is formatted with (KIP-966; Kafka 4.4.0 formats
    # with 1): 1 keeps replicas that leave the ISR below min.insync.replicas as eligible leaders (ELR)
    "eligible.leader.replicas.version": (int, 1),
    "cluster.id": (str, "reference-cluster-0000"),
    # the metadata quorum (KIP-595), Kafka's QuorumConfig names and defaults: "ID@HOST:PORT,..." of the controller
    # voters (empty: a single controller, no Raft), and the Raft timers
    "controller.quorum.voters": (str, ""),
    "controller.quorum.election.timeout.ms": (int, 1_000),
    "controller.quorum.election.backoff.max.ms": (int, 1_000),
    "controller.quorum.fetch.timeout.ms": (int, 2_000),
    "controller.quorum.request.timeout.ms": (int, 2_000),
    "controller.quorum.retry.backoff.ms": (int, 20),
    "controller.quorum.append.linger.ms": (int, 25),
}


# Broker settings Kafka 4.4.0 lets IncrementalAlterConfigs / AlterConfigs change at run time (DynamicBrokerConfig)
# that the reference honours: read through the metadata image (ConfigRecords) when the config is bound to one.
# min.insync.replicas only as the cluster default (Kafka refuses it per broker while ELR is enabled).
DYNAMIC_KEYS = frozenset({"log.segment.bytes", "log.index.interval.bytes", "log.flush.interval.messages",
                          "log.flush.interval.ms", "message.max.bytes", "min.insync.replicas",
                          "unclean.leader.election.enable", "producer.id.expiration.ms",
                          "transaction.partition.verification.enable"})
# Settings of the reference Kafka does not know as broker configs (it stores them like any unknown dynamic name)
REFERENCE_ONLY_KEYS = frozenset({"replica.link.addresses", "transaction.version", "cluster.id"})
# config_source ids (DescribeConfigs): ConfigSource in Kafka's clients
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5


class ConfigError(ValueError):
    """A configuration key or value that the broker cannot honour."""


def _coerce(key: str, typ: type, value: Any) -> Any:
    if isinstance(value, typ) and not (typ is int and isinstance(value, bool)):
        return value
    text = str(value).strip()
    try:
        if typ is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
        return typ(text)
    except ValueError:
        raise ConfigError(f"{key}: expected {typ.__name__}, got {value!r}") from None


class BrokerConfig:
    """Typed view over Kafka-named settings: ``cfg["min.insync.replicas"]``."""

    def __init__(self, overrides: Mapping[str, Any] | None = None) -> None:
        self._values = {k: d for k, (_, d) in DEFAULTS.items()}
        self._explicit: set[str] = set()
        self._image: Any = None            # a MetadataImage once bound: its dynamic broker configs override
        self._node = ""
        for k, v in (overrides or {}).items():
            self.set(k, v)

    def set(self, key: str, value: Any) -> None:
        if key not in DEFAULTS:
            raise ConfigError(f"unknown broker config {key!r}; known: {', '.join(sorted(DEFAULTS))}")
        self._values[key] = _coerce(key, DEFAULTS[key][0], value)
        self._explicit.add(key)

    def is_set(self, key: str) -> bool:
        """True when the user gave ``key`` (not Kafka's default)."""
        return key in self._explicit

    def bind_dynamic(self, image: Any, node_id: int) -> None:
        """Read dynamic broker configs (ConfigRecords for this broker, then the cluster default "") from ``image``,
        the metadata image the node applies: a change made by IncrementalAlterConfigs is seen by every later
        lookup, on every broker, and survives a restart (the metadata log replays it)."""
        self._image, self._node = image, str(node_id)

    def dynamic(self, key: str) -> tuple[str | None, int] | None:
        """(value, source) of ``key`` as a dynamic config of this broker (DYNAMIC_BROKER_CONFIG) or of the cluster
        (DYNAMIC_DEFAULT_BROKER_CONFIG), any name (Kafka stores unknown ones too); None when not set."""
        configs = getattr(self._image, "broker_configs", None)
        if not configs:
            return None
        for name, source in ((self._node, DYNAMIC_BROKER_CONFIG), ("", DYNAMIC_DEFAULT_BROKER_CONFIG)):
            d = configs.get(name)
            if d and key in d:
                return d[key], source
        return None

    def source(self, key: str) -> int:
        """Where the value of one of our keys comes from (DescribeConfigs' config_source)."""
        if key in DYNAMIC_KEYS and (dyn := self.dynamic(key)) is not None:
            return dyn[1]
        if key in self._explicit and self._values[key] != DEFAULTS[key][1]:
            return STATIC_BROKER_CONFIG
        return DEFAULT_CONFIG

    def static(self, key: str) -> Any:
        """The value given at start (or Kafka's default), ignoring dynamic configs."""
        return self._values[key]

    def __getitem__(self, key: str) -> Any:
        if self._image is not None and key in DYNAMIC_KEYS:
            dyn = self.dynamic(key)
            if dyn is not None and dyn[0] is not None:
                try:
                    return _coerce(key, DEFAULTS[key][0], dyn[0])
                except ConfigError:
                    pass
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return {k: self[k] for k in self._values}

    @classmethod
    def from_pairs(cls, pairs: Iterable[str]) -> BrokerConfig:
        """Parse ``key=value`` strings (the CLI's ``--config``)."""
        overrides = {}
        for p in pairs:
            if "=" not in p:
                raise ConfigError(f"--config expects key=value, got {p!r}")
            k, v = p.split("=", 1)
            overrides[k.strip()] = v
        return cls(overrides)
