"""Small value types shared by the client stack (hashable, printable, comparable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic; the key of everything per-partition."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 for acks=0 (the broker does not say)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    log_append_time: int = -1


@dataclass(frozen=True)
class ConsumerRecord:
    """One fetched record, decoded from a v2 record batch."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    leader_epoch: int = -1


class BrokerMetadata(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionMetadata:
    """A partition as Metadata described it (``error_code`` 0 when healthy)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: object  # uuid.UUID, or None before Metadata v10
    partitions: dict[int, PartitionMetadata]
    is_internal: bool = False
    error_code: int = 0


class OffsetAndTimestamp(NamedTuple):
    """ListOffsets answer for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int = -1
