"""MetadataImage: what the cluster looks like after applying the metadata log up to some offset.

Kafka's ``MetadataImage``/``MetadataDelta`` in one small class: brokers (registrations, fenced or not), topics
(names, ids, configs) and partitions (replicas, ISR, leader, leader epoch, partition epoch). The controller and
every broker hold one; both change it only through :meth:`MetadataImage.apply`, so they can never disagree about
what a record means. Iteration orders are deterministic (insertion = log order; sorted where it drives choices).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..features import ELR_VERSION
from .records import NO_LEADER


@dataclass
class BrokerRegistration:
    broker_id: int
    incarnation: str
    host: str
    port: int
    repl_host: str
    repl_port: int
    rack: str | None
    epoch: int                 # broker epoch: the offset of its registration record
    fenced: bool = True
    in_controlled_shutdown: bool = False   # unfenced but no longer eligible as leader or ISR member

    @property
    def active(self) -> bool:
        """Kafka's ClusterControlManager.isActive: neither fenced nor in controlled shutdown."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass
class PartitionState:
    topic: str
    topic_id: uuid.UUID
    index: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: list[int] = field(default_factory=list)              # KIP-966 eligible leader replicas
    last_known_elr: list[int] = field(default_factory=list)   # KIP-966: the last leader once the ISR emptied

    def offline_replicas(self, image: MetadataImage) -> list[int]:
        """Replicas on brokers that are not registered or fenced (Metadata's offline_replicas)."""
        return [r for r in self.replicas if not image.is_live(r)]


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionState] = field(default_factory=list)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass
class Delta:
    """What one batch of records changed: the broker reacts only to these (Kafka's MetadataDelta)."""

    brokers: set[int] = field(default_factory=set)
    partitions: set[tuple[str, int]] = field(default_factory=set)
    removed_topics: list[TopicImage] = field(default_factory=list)
    configs: bool = False                  # a ConfigRecord was applied (topic or broker dynamic configs)
    features: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.brokers or self.partitions or self.removed_topics or self.features)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[uuid.UUID, TopicImage] = {}
        # dynamic broker configs (ConfigRecord, resource BROKER): broker id as text, or "" for the cluster default
        self.broker_configs: dict[str, dict[str, str | None]] = {}
        self.features: dict[str, int] = {}     # finalized feature levels (KIP-584), from feature_level records
        self.features_offset = -1              # offset of the last feature_level record (Kafka: the features epoch)
        self.offset = -1             # offset of the last record applied

    # -- queries ----------------------------------------------------------------------------------------------

    def is_live(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    def live_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers (Metadata lists them, also while in controlled shutdown)."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def is_active(self, broker_id: int) -> bool:
        """May lead or join an ISR: registered, unfenced and not in controlled shutdown."""
        b = self.brokers.get(broker_id)
        return b is not None and b.active

    def active_brokers(self) -> list[BrokerRegistration]:
        return [b for _, b in sorted(self.brokers.items()) if b.active]

    def feature(self, name: str) -> int:
        """The finalized level of a feature; 0 when not finalized (Kafka: an absent feature is at level 0)."""
        return self.features.get(name, 0)

    @property
    def elr_enabled(self) -> bool:
        """KIP-966 is on once eligible.leader.replicas.version is finalized at 1 or more."""
        return self.feature(ELR_VERSION) >= 1

    def partition(self, topic: str, index: int) -> PartitionState | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def partitions_of(self, broker_id: int) -> list[PartitionState]:
        return [p for t in self.topics.values() for p in t.partitions if broker_id in p.replicas]

    # -- changes ----------------------------------------------------------------------------------------------

    def apply(self, offset: int, rec: dict, delta: Delta | None = None) -> Delta:
        """Apply one record; records at or below the applied offset are ignored (replays are idempotent)."""
        delta = delta if delta is not None else Delta()
        if offset <= self.offset:
            return delta
        self.offset = offset
        kind = rec["type"]
        if kind == "register_broker":
            self.brokers[rec["broker_id"]] = BrokerRegistration(
                rec["broker_id"], rec["incarnation"], rec["host"], rec["port"], rec.get("repl_host", rec["host"]),
                rec.get("repl_port", rec["port"]), rec.get("rack"), rec["epoch"], fenced=True)
            delta.brokers.add(rec["broker_id"])
        elif kind in ("fence_broker", "unfence_broker"):
            b = self.brokers.get(rec["broker_id"])
            if b is not None and b.epoch == rec["epoch"]:
                b.fenced = kind == "fence_broker"
                delta.brokers.add(b.broker_id)
        elif kind == "controlled_shutdown":
            b = self.brokers.get(rec["broker_id"])
            if b is not None and b.epoch == rec["epoch"]:
                b.in_controlled_shutdown = True
                delta.brokers.add(b.broker_id)
        elif kind == "topic":
            tid = uuid.UUID(rec["topic_id"])
            t = TopicImage(rec["name"], tid, dict(rec.get("configs", {})), internal=rec.get("internal", False))
            self.topics[t.name] = t
            self.topics_by_id[tid] = t
        elif kind in ("partition", "partition_change"):
            t = self.topics_by_id.get(uuid.UUID(rec["topic_id"]))
            if t is None:
                return delta
            st = PartitionState(t.name, t.topic_id, rec["partition"], list(rec["replicas"]), list(rec["isr"]),
                                rec["leader"], rec["leader_epoch"], rec["partition_epoch"],
                                list(rec.get("elr", ())), list(rec.get("last_known_elr", ())))
            if kind == "partition":
                assert st.index == len(t.partitions), (t.name, st.index)
                t.partitions.append(st)
            else:
                t.partitions[st.index] = st
            delta.partitions.add((t.name, st.index))
        elif kind == "feature_level":
            if rec["level"] > 0:
                self.features[rec["name"]] = rec["level"]
            else:
                self.features.pop(rec["name"], None)
            self.features_offset = offset
            delta.features.add(rec["name"])
        elif kind == "remove_topic":
            t = self.topics_by_id.pop(uuid.UUID(rec["topic_id"]), None)
            if t is not None:
                self.topics.pop(t.name, None)
                delta.removed_topics.append(t)
        elif kind == "config":
            self._apply_config(rec)
            delta.configs = True
        elif kind == "leader_change":
            pass    # the Raft leader's control record (KIP-595): an offset in the log, nothing in the image
        else:
            raise ValueError(f"unknown metadata record type {kind!r} at offset {offset}")
        return delta

    def _apply_config(self, rec: dict) -> None:
        """ConfigRecord: a topic's override (kept in TopicImage.configs, which every reader of topic settings uses)
        or a dynamic broker config; a None value removes it (Kafka: a ConfigRecord with a null value)."""
        name, key, value = rec["resource_name"], rec["name"], rec["value"]
        if rec["resource_type"] == TOPIC_RESOURCE:
            t = self.topics.get(name)
            target = t.configs if t is not None else None
        else:
            target = self.broker_configs.setdefault(name, {})
        if target is None:
            return
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4      # ConfigResource.Type ids


def partition_record(st: PartitionState, kind: str = "partition_change") -> dict:
    return {"type": kind, "topic_id": str(st.topic_id), "partition": st.index, "replicas": list(st.replicas),
            "isr": list(st.isr), "leader": st.leader, "leader_epoch": st.leader_epoch,
            "partition_epoch": st.partition_epoch, "elr": list(st.elr), "last_known_elr": list(st.last_known_elr)}


__all__ = ["ELR_VERSION", "NO_LEADER", "BrokerRegistration", "Delta", "MetadataImage", "PartitionState", "TopicImage",
           "partition_record"]
