"""The state one broker owns: topics, partitions, config, clock and RNG, all on one event loop.

Handlers in apis/ stay thin and call into this object. Topic metadata is persisted (atomically, fsync'd) in
``<data-dir>/topics.json`` and each partition's log lives in ``<data-dir>/<topic>-<partition>/`` as in Kafka.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import errors as E

from .clock import Clock, make_rng
from .config import BrokerConfig
from .faults import Faults
from .log.base import Log
from .log.memory import MemoryLog
from .partition import Partition

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")

# Topic-level configs the broker honours or stores, with the broker config each one overrides (Kafka's
# LogConfig names). Values of numeric keys must parse as integers.
TOPIC_CONFIGS: dict[str, str | None] = {
    "min.insync.replicas": "min.insync.replicas",
    "max.message.bytes": "message.max.bytes",
    "segment.bytes": "log.segment.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": None,
    "retention.ms": None,
    "retention.bytes": None,
    "message.timestamp.type": None,
    "compression.type": None,
}
_NUMERIC_TOPIC_CONFIGS = {"min.insync.replicas", "max.message.bytes", "segment.bytes", "retention.ms",
                          "retention.bytes"}
MAX_TOPIC_NAME = 249


class DataDirError(RuntimeError):
    """The data directory cannot be used (not a directory, not writable, corrupt metadata)."""


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate rules; returns why ``name`` is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1
    internal: bool = False


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path | None, *, clock: Clock | None = None,
                 seed: int | None = None, faults: Faults | None = None) -> None:
        self.config = config
        self.faults = faults or Faults()
        self.node_id: int = config["node.id"]
        self.cluster_id: str = config["cluster.id"]
        self.data_dir = data_dir
        self.clock = clock or Clock()
        self.rng = make_rng(seed)
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.host = "127.0.0.1"
        self.port = 0
        self._next_producer_id = 1000 * (self.node_id + 1)
        if data_dir is not None:
            self._open_data_dir(data_dir)
        from .group_coordinator import GroupCoordinator

        self.groups = GroupCoordinator(self)   # replays __consumer_offsets

    # -- cluster view -----------------------------------------------------------------------------------------

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(self.node_id, self.host, self.port)]

    @property
    def controller_id(self) -> int:
        return self.node_id

    def next_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        self._save_metadata()
        return pid

    # -- topics -----------------------------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def topic_setting(self, topic: str, key: str) -> Any:
        """A topic config if the topic overrides it, else the broker default it maps to (Kafka's LogConfig)."""
        t = self.topics.get(topic)
        if t is not None and key in t.configs and key in _NUMERIC_TOPIC_CONFIGS:
            return int(t.configs[key])
        if t is not None and key in t.configs:
            return t.configs[key]
        return self.config[TOPIC_CONFIGS[key]]

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False,
                     internal: bool = False) -> tuple[int, str | None]:
        """CreateTopics' checks in Kafka's order; returns (error code, message)."""
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        why = topic_name_error(name)
        if why:
            return E.InvalidTopicError.errno, why
        if name in self.topics:
            return E.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists."
        if num_partitions <= 0:
            return E.InvalidPartitionsError.errno, "Number of partitions must be larger than 0."
        if replication_factor <= 0:
            return E.InvalidReplicationFactorError.errno, "Replication factor must be larger than 0."
        if replication_factor > len(self.brokers()):
            return (E.InvalidReplicationFactorError.errno,
                    f"Unable to replicate the partition {replication_factor} time(s): "
                    f"The target replication factor of {replication_factor} cannot be reached because only "
                    f"{len(self.brokers())} broker(s) are registered.")
        for key, value in (configs or {}).items():
            if key not in TOPIC_CONFIGS:
                return E.InvalidConfigurationError.errno, f"Unknown topic config name: {key}"
            if key in _NUMERIC_TOPIC_CONFIGS:
                try:
                    int(value)
                except (TypeError, ValueError):
                    return E.InvalidConfigurationError.errno, f"Invalid value {value} for configuration {key}"
        if validate_only:
            return E.NoError.errno, None
        topic_id = uuid.UUID(int=self.rng.getrandbits(128))
        self._add_topic(name, topic_id, num_partitions, dict(configs or {}), replication_factor, internal)
        self._save_metadata()
        return E.NoError.errno, None

    def _add_topic(self, name: str, topic_id: uuid.UUID, n: int, configs: dict[str, str], rf: int,
                   internal: bool) -> Topic:
        parts = [Partition(name, i, topic_id, self._open_log(name, i), node_id=self.node_id,
                           replicas=[self.node_id], leader_id=self.node_id)
                 for i in range(n)]
        for p in parts:
            p.wake_on_append = not self.faults.on("fetch.no_wake_on_append")
            p.fault_latest_is_leo = self.faults.on("list_offsets.latest_is_leo")
        t = Topic(name, topic_id, parts, configs, rf, internal)
        self.topics[name] = t
        self.topics_by_id[topic_id] = t
        return t

    def delete_topic(self, name: str) -> int:
        t = self.topics.pop(name, None)
        if t is None:
            return E.UnknownTopicOrPartitionError.errno
        self.topics_by_id.pop(t.topic_id, None)
        for p in t.partitions:
            p.mark_deleted()          # parked fetches complete with UNKNOWN_TOPIC_OR_PARTITION (Case C)
            p.log.close()
            if self.data_dir is not None:
                shutil.rmtree(self.data_dir / f"{name}-{p.index}", ignore_errors=True)
        self._save_metadata()
        return E.NoError.errno

    # -- storage ----------------------------------------------------------------------------------------------

    def _open_log(self, topic: str, index: int) -> Log:
        if self.data_dir is None:
            return MemoryLog()
        from .log.file import FileLog, FileLogConfig

        cfg = FileLogConfig.from_broker_config(self.config)
        return FileLog(self.data_dir / f"{topic}-{index}", cfg)

    def _open_data_dir(self, d: Path) -> None:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DataDirError(f"cannot create data dir {d}: {e.strerror}") from None
        if not d.is_dir():
            raise DataDirError(f"data dir {d} is not a directory")
        if not os.access(d, os.W_OK | os.X_OK):
            raise DataDirError(f"data dir {d} is not writable")
        meta = d / "topics.json"
        if not meta.exists():
            return
        try:
            doc = json.loads(meta.read_text())
            self._next_producer_id = max(self._next_producer_id, int(doc.get("next_producer_id", 0)))
            for t in doc["topics"]:
                self._add_topic(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})),
                                int(t.get("replication_factor", 1)), bool(t.get("internal", False)))
        except (ValueError, KeyError, TypeError) as e:
            raise DataDirError(f"{meta} is corrupt ({type(e).__name__}: {e}); refusing to start") from None

    def _save_metadata(self) -> None:
        if self.data_dir is None:
            return
        doc: dict[str, Any] = {
            "next_producer_id": self._next_producer_id,
            "topics": [{"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions),
                        "configs": t.configs, "replication_factor": t.replication_factor, "internal": t.internal}
                       for t in self.topics.values()],
        }
        tmp = self.data_dir / "topics.json.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.data_dir / "topics.json")

    async def flush_scheduler(self) -> None:
        """Kafka's log flusher: every log.flush.scheduler.interval.ms, flush logs whose flush.ms is due, so an idle
        partition's data becomes durable on time, not only at its next append."""
        interval = self.config["log.flush.scheduler.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for t in list(self.topics.values()):
                for p in t.partitions:
                    maybe_flush = getattr(p.log, "maybe_flush", None)
                    if maybe_flush is not None and not p.deleted:
                        maybe_flush()

    def close(self) -> None:
        for t in self.topics.values():
            for p in t.partitions:
                p.log.flush()
                p.log.close()
