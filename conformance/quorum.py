"""The KRaft controller quorum as a check sees it from outside: DescribeQuorum's answer as plain numbers, and the
bound within which a new active controller must be elected, derived from the quorum's settings.

A broker forwards DescribeQuorum to the active controller (KIP-595; Kafka's KafkaApis.handleDescribeQuorumRequest
forwards it through the controller channel), so any live broker answers for the quorum.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster import LOAD_FACTOR, SLACK_S
from conformance.wire import Wire

METADATA_TOPIC = "__cluster_metadata"
# Kafka's defaults (QuorumConfig): a follower that heard nothing from the leader for fetch.timeout.ms starts an
# election; an election that does not finish within election.timeout.ms (plus up to as much jitter) is retried
# after a backoff of at most election.backoff.max.ms.
DEFAULT_FETCH_TIMEOUT_MS = 2_000
DEFAULT_ELECTION_TIMEOUT_MS = 1_000
DEFAULT_ELECTION_BACKOFF_MAX_MS = 1_000


@dataclass(frozen=True)
class Replica:
    """One voter's or observer's line of a DescribeQuorum answer (timestamps: -1 where unknown or before v1)."""

    replica_id: int
    log_end_offset: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(frozen=True)
class QuorumView:
    """DescribeQuorum's answer for __cluster_metadata-0: who leads at which epoch, the HW, voters and observers,
    and (v2) each node's listeners as (name, host, port)."""

    error: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, Replica]
    observers: dict[int, Replica]
    nodes: dict[int, list[tuple[str, str, int]]] = field(default_factory=dict)
    version: int = 0

    @property
    def leader(self) -> Replica | None:
        return self.voters.get(self.leader_id)


def _replica(r: Any) -> Replica:
    return Replica(r.replica_id, r.log_end_offset, getattr(r, "last_fetch_timestamp", -1),
                   getattr(r, "last_caught_up_timestamp", -1))


async def describe(w: Wire) -> QuorumView:
    """DescribeQuorum through the broker behind ``w``; a top-level or partition error comes back as ``error``."""
    body = await w.describe_quorum()
    version = w.version("DescribeQuorum")
    parts = [p for t in body.topics if t.topic_name == METADATA_TOPIC for p in t.partitions]
    if body.error_code or not parts:
        return QuorumView(body.error_code or -1, -1, -1, -1, {}, {}, version=version)
    p = parts[0]
    nodes = {n.node_id: [(li.name, li.host, li.port) for li in n.listeners] for n in getattr(body, "nodes", None) or []}
    return QuorumView(p.error_code, p.leader_id, p.leader_epoch, p.high_watermark,
                      {r.replica_id: _replica(r) for r in p.current_voters},
                      {r.replica_id: _replica(r) for r in p.observers}, nodes, version)


def failover_bound_s(settings: Mapping[str, Any]) -> float:
    """How long the quorum may take to elect a new active controller after its leader died or froze, from the
    settings: the followers notice after controller.quorum.fetch.timeout.ms; an election may be lost once (split
    vote) and is retried after at most election.timeout.ms + its jitter + election.backoff.max.ms. Times
    conformance.cluster.LOAD_FACTOR, plus its SLACK_S, as every other bound the suites wait on."""
    fetch = int(settings.get("controller.quorum.fetch.timeout.ms", DEFAULT_FETCH_TIMEOUT_MS))
    election = int(settings.get("controller.quorum.election.timeout.ms", DEFAULT_ELECTION_TIMEOUT_MS))
    backoff = int(settings.get("controller.quorum.election.backoff.max.ms", DEFAULT_ELECTION_BACKOFF_MAX_MS))
    return LOAD_FACTOR * (fetch + 2 * (2 * election + backoff)) / 1000 + SLACK_S
