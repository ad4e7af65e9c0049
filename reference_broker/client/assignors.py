"""Partition assignors for the classic consumer group protocol, computing what the Java client computes.

Why apart from the group consumer: the leader's assignment is a pure function of (members, their subscriptions,
partition counts); keeping it pure lets tests compare it with the Java client's documented results and lets mixed
groups (our client + librdkafka/Java) agree on who owns what.

Member order is Java's ``AbstractPartitionAssignor.MemberInfo`` order: static members (with a group.instance.id)
first, sorted by instance id, then dynamic members sorted by member id.

- ``range`` (``RangeAssignor``): per topic, partitions in order split into contiguous ranges over the members
  subscribed to that topic; the first ``n % m`` members get one extra.
- ``roundrobin`` (``RoundRobinAssignor``): every subscribed partition (topics sorted by name, partitions in order)
  dealt to members in a circle, skipping members not subscribed to that partition's topic.

Subscriptions and assignments travel as kafka-python's ``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` (Kafka's JSON schemas), never hand-encoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .types import TopicPartition

__all__ = [
    "ASSIGNORS",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "sort_members",
]

SUBSCRIPTION_VERSION = 1  # v1 adds owned partitions (KIP-429); every broker treats the blob as opaque


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the group leader sees it in the JoinGroup response."""

    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned: tuple[TopicPartition, ...] = field(default=())


def sort_members(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    """Java's MemberInfo order: static members by instance id first, then dynamic ones by member id."""
    static = sorted((m for m in members if m.group_instance_id is not None), key=lambda m: m.group_instance_id or "")
    dynamic = sorted((m for m in members if m.group_instance_id is None), key=lambda m: m.member_id)
    return static + dynamic


class RangeAssignor:
    """Java's RangeAssignor (no rack awareness): contiguous ranges per topic."""

    name = "range"

    @staticmethod
    def assign(
        members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> dict[str, list[TopicPartition]]:
        """member id -> partitions; topics with no known partition count are skipped (as Java does)."""
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ordered = sort_members(members)
        topics = sorted({t for m in members for t in m.topics})
        for topic in topics:
            n = partitions_per_topic.get(topic)
            if not n:
                continue
            subs = [m for m in ordered if topic in m.topics]
            per, extra = divmod(n, len(subs))
            for i, m in enumerate(subs):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[m.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor:
    """Java's RoundRobinAssignor: all partitions dealt in a circle over the sorted members."""

    name = "roundrobin"

    @staticmethod
    def assign(
        members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> dict[str, list[TopicPartition]]:
        """member id -> partitions."""
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ordered = sort_members(members)
        if not ordered:
            return out
        topics = sorted({t for m in members for t in m.topics if partitions_per_topic.get(t)})
        i = 0
        for topic in topics:
            for p in range(partitions_per_topic[topic]):
                while topic not in ordered[i % len(ordered)].topics:
                    i += 1
                out[ordered[i % len(ordered)].member_id].append(TopicPartition(topic, p))
                i += 1
        return out


ASSIGNORS = {RangeAssignor.name: RangeAssignor, RoundRobinAssignor.name: RoundRobinAssignor}


def _by_topic(tps: Sequence[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in out.items()}


def encode_subscription(topics: Sequence[str], owned: Sequence[TopicPartition] = ()) -> bytes:
    """JoinGroup protocol metadata for the ``consumer`` protocol type."""
    sub = ConsumerProtocolSubscription(
        version=SUBSCRIPTION_VERSION,
        topics=sorted(topics),
        user_data=None,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in _by_topic(owned).items()
        ],
    )
    return bytes(sub.encode())


def decode_subscription(member_id: str, group_instance_id: str | None, metadata: bytes) -> MemberSubscription:
    """A member's JoinGroup metadata (any ConsumerProtocolSubscription version) as a MemberSubscription."""
    sub = ConsumerProtocolSubscription.decode(bytes(metadata))
    owned = tuple(
        TopicPartition(tp.topic, p) for tp in (getattr(sub, "owned_partitions", None) or []) for p in tp.partitions
    )
    return MemberSubscription(member_id, tuple(sub.topics), group_instance_id, owned)


def encode_assignment(partitions: Sequence[TopicPartition]) -> bytes:
    """SyncGroup assignment bytes (ConsumerProtocolAssignment v0, as the Java eager assignors send)."""
    a = ConsumerProtocolAssignment(
        version=0,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
            for t, ps in _by_topic(partitions).items()
        ],
        user_data=None,
    )
    return bytes(a.encode())


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """Partitions in a SyncGroup assignment; an empty blob (no partitions for this member) is []."""
    if not data:
        return []
    a = ConsumerProtocolAssignment.decode(bytes(data))
    return sorted(TopicPartition(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions)
