"""Election state, its durable store, the epoch states a replica moves through, and QuorumState tying them.

ElectionState (epoch, voted-for, leader) is what Kafka keeps in the ``quorum-state`` file; it is written BEFORE a vote
is answered or a transition takes effect, so a restarted voter can never vote twice in one epoch (KIP-595). The
EpochState classes mirror Kafka's: Unattached, Prospective (KIP-996 pre-vote), Candidate, Leader, Follower, Resigned.
They hold timers as absolute deadlines in milliseconds: time comes from the caller, never from ``time``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ElectionState:
    """Kafka's ElectionState: the durable part of a replica's quorum state."""
    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


class QuorumStateStore(Protocol):
    """Kafka's QuorumStateStore: read once at start-up, written on every election-state change."""

    def read(self) -> ElectionState | None: ...
    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """A store that survives a simulated crash because the harness keeps the object (it plays the disk)."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


class FileQuorumStateStore:
    """Kafka's FileQuorumStateStore: a small JSON file replaced atomically (write temp, fsync, rename, fsync the
    directory) so a crash leaves either the old state or the new one, never a torn file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> ElectionState | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                d = json.load(f)
        except FileNotFoundError:
            return None
        return ElectionState(d["leaderEpoch"], d.get("votedId"), d.get("leaderId"))

    def write(self, state: ElectionState) -> None:
        tmp = self.path + ".tmp"
        doc = {"leaderEpoch": state.epoch, "votedId": state.voted_for, "leaderId": state.leader_id,
               "data_version": 0}
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@dataclass
class EpochState:
    """Common to all states: the epoch, and the vote this replica cast in it (kept so it is never cast twice)."""
    epoch: int
    voted_for: int | None = None
    name = "epoch"

    def leader(self) -> int | None:
        return None


@dataclass
class UnattachedState(EpochState):
    """No known leader in this epoch; a voter starts a pre-vote when ``election_deadline`` passes."""
    election_deadline: int = 0
    name = "Unattached"


@dataclass
class ProspectiveState(EpochState):
    """KIP-996: asking pre-votes for epoch + 1 without bumping the epoch, so a partitioned or lagging node cannot
    disturb a healthy leader. ``prior_leader`` is the leader it followed, to return to if the pre-vote is lost."""
    election_deadline: int = 0
    prior_leader: int | None = None
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    requests_sent_ms: int | None = None
    name = "Prospective"


@dataclass
class CandidateState(EpochState):
    """Has bumped the epoch and voted for itself; asks the other voters. ``backoff_until`` is set once the election
    is lost or timed out: the candidate waits out a random backoff, then goes prospective again."""
    election_deadline: int = 0
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    requests_sent_ms: int | None = None
    backoff_until: int | None = None
    name = "Candidate"


@dataclass
class ReplicaProgress:
    """What the leader knows of one replica (Kafka: LeaderState.ReplicaState)."""
    end_offset: int = 0
    last_fetch_ms: int | None = None
    last_hw_sent: int = -1


@dataclass
class LeaderState(EpochState):
    """Leader of ``epoch``. ``epoch_start_offset`` is the offset of its LeaderChange record: the high watermark may
    only move past it (an entry of an older epoch is committed only together with one of this epoch)."""
    epoch_start_offset: int = 0
    high_watermark: int | None = None
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)  # the other voters
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    became_leader_ms: int = 0
    check_quorum_deadline: int = 0
    begin_unacked: set[int] = field(default_factory=set)
    begin_sent_ms: int | None = None
    parked_fetches: dict[int, tuple[int, int]] = field(default_factory=dict)  # replica -> (correlation, deadline)
    accumulator: list = field(default_factory=list)  # appends lingering in memory (Kafka's BatchAccumulator)
    linger_deadline: int | None = None
    name = "Leader"

    def leader(self) -> int | None:
        return self.leader_id

    leader_id: int = -1


@dataclass
class FollowerState(EpochState):
    """Following ``leader_id``: fetches it, and goes prospective (observer: unattached) when no fetch succeeds for
    controller.quorum.fetch.timeout.ms."""
    leader_id: int = -1
    fetch_deadline: int = 0
    last_fetch_ok_ms: int | None = None
    inflight: tuple[int, int] | None = None  # (correlation, sent at)
    backoff_until: int = 0
    name = "Follower"

    def leader(self) -> int | None:
        return self.leader_id


@dataclass
class ResignedState(EpochState):
    """A leader stepping down (graceful or check-quorum): sends EndQuorumEpoch until acknowledged, accepts no appends,
    and moves to the next epoch, unattached, if no successor appears within the election timeout."""
    election_deadline: int = 0
    preferred_successors: tuple[int, ...] = ()
    end_unacked: set[int] = field(default_factory=set)
    end_sent_ms: int | None = None
    name = "Resigned"


class QuorumState:
    """Kafka's QuorumState: the replica's current EpochState and the store behind it. Every transition writes the
    new ElectionState first and only then takes effect, and an epoch never goes down; *when* to transition is
    KafkaRaftClient's business."""

    def __init__(self, local_id: int, voters: tuple[int, ...], store: QuorumStateStore) -> None:
        self.local_id = local_id
        self.voters = voters
        self.store = store
        self.state: EpochState = UnattachedState(0)

    def read_election_state(self) -> ElectionState:
        return self.store.read() or ElectionState()

    def initialize(self, state: EpochState) -> None:
        """Resume in the state rebuilt from the store (nothing to write: it is what the store says)."""
        self.state = state

    @property
    def epoch(self) -> int:
        return self.state.epoch

    def is_voter(self) -> bool:
        return self.local_id in self.voters

    def leader_id(self) -> int | None:
        """The leader known for the current epoch (the local id when leading); None while resigned or electing."""
        return self.local_id if isinstance(self.state, LeaderState) else self.state.leader()

    def transition_to(self, new: EpochState, leader_id: int | None) -> None:
        if new.epoch < self.state.epoch:
            raise AssertionError(f"epoch would go down {self.state.epoch} -> {new.epoch}")
        self._write(ElectionState(new.epoch, new.voted_for, leader_id))
        self.state = new

    def record_vote(self, candidate_id: int) -> None:
        """Persist the vote BEFORE it is answered (KIP-595): a voter that restarts must not vote again this epoch."""
        self._write(ElectionState(self.epoch, candidate_id, None))
        self.state.voted_for = candidate_id

    def _write(self, es: ElectionState) -> None:
        if es != self.store.read():
            self.store.write(es)
