"""The quorum RPCs (KIP-595 Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch, KIP-996 pre-vote) as plain dataclasses.

kafka-python ships no schemas for these internal RPCs, so they are small and documented here; the wire format is
left to the integration (see the package docstring). Field names follow Kafka's JSON schemas (VoteRequest.json,
FetchRequest.json, ...) trimmed to one partition: the metadata log is a single partition (``__cluster_metadata-0``).
Every response carries the responder's current epoch and leader, because that is how a replica learns of a newer
epoch in KafkaRaftClient (maybeHandleCommonResponse). Error codes are kafka.errors' errnos, never bare integers.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka import errors as E

from .log import LogEntry

NONE = E.NoError.errno
FENCED_LEADER_EPOCH = E.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = E.UnknownLeaderEpochError.errno
# Kafka renamed NOT_LEADER_FOR_PARTITION (code 6) to NOT_LEADER_OR_FOLLOWER (KIP-392); kafka-python keeps the old name.
NOT_LEADER_OR_FOLLOWER = E.NotLeaderForPartitionError.errno
INCONSISTENT_VOTER_SET = E.InconsistentVoterSetError.errno

ERROR_NAMES = {NONE: "NONE", FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH", UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH",
               NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER", INCONSISTENT_VOTER_SET: "INCONSISTENT_VOTER_SET"}


@dataclass(frozen=True)
class VoteRequest:
    """Ask for a vote in ``candidate_epoch`` (KIP-595), or, with ``pre_vote``, ask whether a vote *would* be granted
    without anyone bumping an epoch (KIP-996). A prospective node sends its epoch + 1: the epoch it would stand in."""
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    error: int
    leader_epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    """A new leader announces itself to the voters (they would otherwise learn it only on their next fetch timeout)."""
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    error: int
    leader_epoch: int
    leader_id: int | None


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    """A resigning leader (graceful shutdown or failed check-quorum) hands over: voters earlier in
    ``preferred_successors`` (most caught-up first) start their election sooner."""
    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    error: int
    leader_epoch: int
    leader_id: int | None


@dataclass(frozen=True)
class FetchRequest:
    """Replication is pull-based (KIP-595): the fetch offset doubles as the follower's acknowledgement, and
    ``last_fetched_epoch`` lets the leader detect a divergent log suffix."""
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    """Records from the fetch offset, or ``diverging_epoch`` = (epoch, end offset) telling the follower where to
    truncate (KIP-595's DivergingEpoch); ``high_watermark`` -1 while the leader has not committed in its epoch."""
    error: int
    leader_epoch: int
    leader_id: int | None
    high_watermark: int = -1
    records: tuple[LogEntry, ...] = ()
    diverging_epoch: tuple[int, int] | None = None


Body = (VoteRequest | VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse | EndQuorumEpochRequest
        | EndQuorumEpochResponse | FetchRequest | FetchResponse)


@dataclass(frozen=True)
class RaftMessage:
    """One RPC between two nodes; ``correlation_id`` pairs a response with its request (stale answers are dropped)."""
    src: int
    dst: int
    correlation_id: int
    body: Body

    def describe(self) -> str:
        """A stable one-line form for event traces (byte-identical for the same seed)."""
        return f"{self.src}->{self.dst}#{self.correlation_id} {self.body!r}"
