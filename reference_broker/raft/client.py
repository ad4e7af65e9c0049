"""KafkaRaftClient: the KIP-595 / KIP-996 replica as a pure state machine.

``handle(message, now_ms)`` and ``poll(now_ms)`` return the messages to send; ``poll`` also returns the next deadline
at which it wants to be polled again. There is no socket, no asyncio, no ``time`` and no module-level ``random``
inside: time arrives as arguments and randomness (election jitter) from the injected ``random.Random``. The same
object therefore runs under a real event loop (the integration) and under ``simulation.RaftSimulation``, as Kafka's
KafkaRaftClient does under RaftEventSimulationTest.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import messages as M
from .log import LogEntry, RaftLog
from .quorum_state import (
    CandidateState,
    ElectionState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    QuorumState,
    QuorumStateStore,
    ReplicaProgress,
    ResignedState,
    UnattachedState,
)

RETRY_BACKOFF_BASE_MS = 50  # KafkaRaftClient.RETRY_BACKOFF_BASE_MS

# Test-only fault switches: each breaks one rule so the simulation's invariants are shown able to fail.
FAULTS: dict[str, str] = {
    "vote_twice": "a voter grants a second vote in an epoch it already voted in (KIP-595: one vote per epoch) — "
                  "breaks election safety (two leaders in one epoch)",
    "vote_not_persisted": "the vote is answered without writing quorum-state first; a restart forgets it — breaks "
                          "election safety after a crash",
    "no_log_check": "vote and pre-vote are granted whatever the candidate's log — a stale leader loses committed "
                    "entries",
    "hw_without_majority": "the leader's high watermark is its own log end offset, not the majority's — committed "
                           "entries are lost on failover",
    "no_truncation_on_diverging_epoch": "the leader never answers a DivergingEpoch, so a follower keeps a divergent "
                                        "suffix under the high watermark",
    "no_fetch_timeout": "a voter following a leader never gives up on it (no fetch timeout, so no election after "
                        "the leader dies or freezes) — breaks QUORUM-FAILOVER-KILL/PAUSE",
}


@dataclass(frozen=True)
class RaftConfig:
    """Kafka's controller.quorum.* settings (defaults as Kafka's QuorumConfig), the static voter set
    (controller.quorum.voters) and this node's id; ``faults`` holds FAULTS names, for tests only."""
    node_id: int
    voters: tuple[int, ...]
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 25  # controller.quorum.append.linger.ms: appends wait in memory, then append + flush
    fetch_max_wait_ms: int = 500  # how long the leader parks an empty fetch (Kafka's fetch purgatory)
    fetch_max_entries: int = 50
    faults: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown raft faults: {sorted(unknown)}")


class RaftListener(Protocol):
    """Kafka's RaftClient.Listener, reduced to what has no snapshot in it."""

    def handle_commit(self, entries: tuple[LogEntry, ...]) -> None: ...
    def handle_leader_change(self, epoch: int, leader_id: int | None) -> None: ...


@dataclass
class RecordingListener:
    """A listener that keeps what it was told (tests, the simulation's committed-entry check)."""
    committed: list[LogEntry] = field(default_factory=list)
    leader_changes: list[tuple[int, int | None]] = field(default_factory=list)

    def handle_commit(self, entries: tuple[LogEntry, ...]) -> None:
        self.committed.extend(entries)

    def handle_leader_change(self, epoch: int, leader_id: int | None) -> None:
        self.leader_changes.append((epoch, leader_id))


class NotLeaderError(Exception):
    """Kafka's NotLeaderException: appends go to the leader only."""


class RaftStateError(Exception):
    """A request to break what this replica already knows is committed (Kafka throws a KafkaException and the raft
    thread stops): e.g. a DivergingEpoch below the high watermark."""


class KafkaRaftClient:
    """One replica of the metadata quorum: a voter if its id is in ``config.voters``, otherwise an observer that
    fetches and follows but never votes nor counts toward the high watermark."""

    def __init__(self, config: RaftConfig, log: RaftLog, store: QuorumStateStore, rng: random.Random,
                 now_ms: int, listener: RaftListener | None = None) -> None:
        self.config = config
        self.id = config.node_id
        self.voters = tuple(sorted(config.voters))
        self.is_voter = self.id in self.voters
        self.log = log
        self.store = store
        self.rng = rng
        self.listener = listener
        self.high_watermark = 0  # in memory, as KafkaMetadataLog's: a restart starts again from 0
        self._delivered = 0
        self._corr = 0
        self._observer_target = 0
        self._last_leader_seen: tuple[int, int | None] | None = None
        self._election_retries = 0  # elections lost in a row: widens the backoff
        self._remembered_votes: dict[int, int] = {}  # "vote_not_persisted" fault only: votes kept in memory
        self._outbox: list[M.RaftMessage] = []
        self.quorum = QuorumState(self.id, self.voters, store)
        self.quorum.initialize(self._initial_state(self.quorum.read_election_state(), now_ms))
        self._notify_leader_change()

    # ---------------------------------------------------------------- state transitions (Kafka's QuorumState)
    def _initial_state(self, es: ElectionState, now: int) -> EpochState:
        """Resume from quorum-state: a leader that restarts resigns (its in-memory progress is gone), a follower
        follows again, anyone else is unattached with the vote it cast remembered."""
        if es.leader_id == self.id:
            st: EpochState = ResignedState(es.epoch, es.voted_for, election_deadline=now + self._election_timeout(),
                                           preferred_successors=tuple(v for v in self.voters if v != self.id),
                                           end_unacked=set(v for v in self.voters if v != self.id))
        elif es.leader_id is not None:
            st = FollowerState(es.epoch, es.voted_for, leader_id=es.leader_id,
                               fetch_deadline=now + self.config.fetch_timeout_ms)
        else:
            st = UnattachedState(es.epoch, es.voted_for, election_deadline=now + self._election_timeout())
        return st

    @property
    def state(self) -> EpochState:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    def leader_id(self) -> int | None:
        """The leader this replica knows for its epoch (itself when leader)."""
        return self.quorum.leader_id()

    def _transition(self, new: EpochState, leader_id: int | None) -> None:
        self.quorum.transition_to(new, leader_id)
        self._notify_leader_change()

    def _to_unattached(self, epoch: int, now: int, voted_for: int | None = None,
                       deadline: int | None = None) -> None:
        if epoch == self.epoch and voted_for is None:
            voted_for = self.state.voted_for
        if deadline is not None:
            d = deadline
        else:
            d = now + (self._election_timeout() if self.is_voter else self.config.retry_backoff_ms)
        self._transition(UnattachedState(epoch, voted_for, election_deadline=d), None)

    def _to_follower(self, epoch: int, leader: int, now: int) -> None:
        voted = self.state.voted_for if epoch == self.epoch else None
        self._transition(FollowerState(epoch, voted, leader_id=leader,
                                       fetch_deadline=now + self.config.fetch_timeout_ms), leader)

    def _to_prospective(self, now: int) -> None:
        prior = self.state.leader_id if isinstance(self.state, FollowerState) else None
        st = ProspectiveState(self.epoch, self.state.voted_for, election_deadline=now + self._election_timeout(),
                              prior_leader=prior, granted={self.id})
        self._transition(st, None)
        self._maybe_finish_prevote(now)

    def _to_candidate(self, now: int) -> None:
        self._election_retries += 1
        st = CandidateState(self.epoch + 1, self.id, election_deadline=now + self._election_timeout(),
                            granted={self.id})
        self._transition(st, None)
        self._maybe_finish_vote(now)

    def _to_leader(self, now: int) -> None:
        epoch = self.epoch
        start = self.log.end_offset()
        others = [v for v in self.voters if v != self.id]
        st = LeaderState(epoch, self.id, epoch_start_offset=start, leader_id=self.id, became_leader_ms=now,
                         check_quorum_deadline=now + self._check_quorum_timeout(), begin_unacked=set(others))
        for v in others:
            st.replicas[v] = ReplicaProgress()
        self._transition(st, self.id)
        # Kafka's LeaderChangeMessage: the record that lets the leader commit (entries of older epochs commit only
        # together with one of its own) and tells every replica who leads.
        self.log.append_as_leader(epoch, ("LeaderChange", self.id, self.voters), control=True)
        self.log.flush()
        self._update_leader_hw(now)

    def _to_resigned(self, now: int) -> None:
        assert isinstance(self.state, LeaderState)
        ldr = self.state
        succ = sorted((v for v in self.voters if v != self.id),
                      key=lambda v: (-ldr.replicas[v].end_offset, v))
        st = ResignedState(self.epoch, self.state.voted_for, election_deadline=now + self._election_timeout(),
                           preferred_successors=tuple(succ), end_unacked=set(succ))
        self._transition(st, self.id)

    def _notify_leader_change(self) -> None:
        cur = (self.epoch, self.leader_id())
        if cur[1] is not None:
            self._election_retries = 0
        if cur != self._last_leader_seen:
            self._last_leader_seen = cur
            if self.listener is not None:
                self.listener.handle_leader_change(*cur)

    # ---------------------------------------------------------------- timers
    def _election_timeout(self) -> int:
        """Kafka's randomElectionTimeoutMs: the timeout plus up to as much again, so voters rarely tie."""
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    def _election_backoff(self) -> int:
        """Kafka's binaryExponentialElectionBackoffMs: a random backoff after a lost election that doubles its range
        with each retry, bounded by controller.quorum.election.backoff.max.ms."""
        retries = max(1, self._election_retries)
        return min(RETRY_BACKOFF_BASE_MS * self.rng.randrange(2 << min(20, retries - 1)),
                   self.config.election_backoff_max_ms)

    def _end_epoch_backoff(self, preferred: tuple[int, ...]) -> int:
        """Kafka's strictExponentialElectionBackoffMs: the first preferred successor stands at once, the next ones
        after backoffs doubling with their rank, so the most caught-up voter usually wins."""
        pos = preferred.index(self.id) if self.id in preferred else len(preferred)
        if pos == 0:
            return 0
        if pos >= len(preferred):
            return self.config.election_backoff_max_ms
        base = self.config.election_backoff_max_ms >> (len(preferred) - 1)
        return min(self.config.election_backoff_max_ms, base << (pos - 1))

    def _check_quorum_timeout(self) -> int:
        return int(self.config.fetch_timeout_ms * 1.5)

    # ---------------------------------------------------------------- plumbing
    def _send(self, dst: int, body: M.Body, corr: int | None = None) -> int:
        if corr is None:
            self._corr += 1
            corr = self._corr
        self._outbox.append(M.RaftMessage(self.id, dst, corr, body))
        return corr

    def _drain(self) -> list[M.RaftMessage]:
        out, self._outbox = self._outbox, []
        return out

    def _log_is_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_fetched_epoch(), self.log.end_offset())

    def _others(self) -> list[int]:
        return [v for v in self.voters if v != self.id]

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _maybe_handle_common(self, epoch: int, leader: int | None, now: int) -> bool:
        """Kafka's maybeHandleCommonResponse: a newer epoch (or a leader we did not know for ours) moves us on.
        Returns True when the state changed."""
        if epoch > self.epoch:
            if leader is not None and leader != self.id:
                self._to_follower(epoch, leader, now)
            else:
                self._to_unattached(epoch, now)
            return True
        if (epoch == self.epoch and leader is not None and leader != self.id
                and not isinstance(self.state, (FollowerState, LeaderState, ResignedState))):
            if isinstance(self.state, ProspectiveState) and self.state.prior_leader == leader:
                return False  # KIP-996: the leader it timed out on; a lost pre-vote returns to it anyway
            self._to_follower(epoch, leader, now)
            return True
        return False

    # ---------------------------------------------------------------- public API
    def handle(self, msg: M.RaftMessage, now_ms: int) -> list[M.RaftMessage]:
        """Process one inbound request or response; returns what to send (responses and follow-up requests)."""
        body = msg.body
        handler = getattr(self, "_on_" + type(body).__name__)
        handler(msg, body, now_ms)
        self._deliver_commits()
        return self._drain()

    def poll(self, now_ms: int) -> tuple[list[M.RaftMessage], int]:
        """Fire expired timers and send what is due; returns (messages, next deadline in ms)."""
        deadline = self._poll_state(now_ms)
        self._deliver_commits()
        return self._drain(), deadline

    def append(self, data: Any, now_ms: int) -> tuple[int, list[M.RaftMessage]]:
        """Schedule one record as leader (Kafka: scheduleAppend) and return the offset it will have. Like Kafka's
        BatchAccumulator it waits in memory for controller.quorum.append.linger.ms, then is written and flushed
        together with its batch: a crash before that loses it (it was never committed). Committed once the high
        watermark passes the offset; NotLeaderError elsewhere."""
        st = self.state
        if not isinstance(st, LeaderState):
            raise NotLeaderError(f"node {self.id} is {st.name} in epoch {self.epoch}")
        off = self.log.end_offset() + len(st.accumulator)
        st.accumulator.append(data)
        if st.linger_deadline is None:
            st.linger_deadline = now_ms + self.config.append_linger_ms
        if now_ms >= st.linger_deadline:
            self._flush_accumulator(st, now_ms)
        self._deliver_commits()
        return off, self._drain()

    def _flush_accumulator(self, st: LeaderState, now: int) -> None:
        """Write the lingering batch, flush, and only then count the leader's own offset (Kafka flushes the
        leader's log before its end offset counts toward the high watermark)."""
        for data in st.accumulator:
            self.log.append_as_leader(st.epoch, data)
        st.accumulator = []
        st.linger_deadline = None
        self.log.flush()
        self._update_leader_hw(now)
        self._complete_parked(now, force=True)

    def resign(self, now_ms: int) -> list[M.RaftMessage]:
        """Graceful resignation (Kafka: RaftClient.resign on shutdown): EndQuorumEpoch to the voters."""
        if isinstance(self.state, LeaderState):
            self._to_resigned(now_ms)
            self._poll_state(now_ms)
        return self._drain()

    def describe(self) -> str:
        return (f"{self.id}:{self.state.name}(e={self.epoch},l={self.leader_id()},v={self.state.voted_for},"
                f"leo={self.log.end_offset()},hw={self.high_watermark})")

    # ---------------------------------------------------------------- poll
    def _poll_state(self, now: int) -> int:
        st = self.state
        far = now + 10 * self.config.fetch_timeout_ms
        if isinstance(st, UnattachedState):
            if self.is_voter:
                if now >= st.election_deadline:
                    self._to_prospective(now)
                    return self._poll_state(now)
                return st.election_deadline
            return self._poll_observer_discovery(now)
        if isinstance(st, ProspectiveState):
            retry = self._send_vote_requests(st, now, pre_vote=True)
            if now >= st.election_deadline:
                self._lose_prevote(now)
                return self._poll_state(now)
            return min(st.election_deadline, retry)
        if isinstance(st, CandidateState):
            if st.backoff_until is not None:
                if now >= st.backoff_until:
                    self._to_prospective(now)
                    return self._poll_state(now)
                return st.backoff_until
            retry = self._send_vote_requests(st, now, pre_vote=False)
            if now >= st.election_deadline:
                st.backoff_until = now + self._election_backoff()
                return st.backoff_until
            return min(st.election_deadline, retry)
        if isinstance(st, LeaderState):
            return self._poll_leader(st, now, far)
        if isinstance(st, FollowerState):
            if now >= st.fetch_deadline and not (self.is_voter and "no_fetch_timeout" in self.config.faults):
                if self.is_voter:
                    self._to_prospective(now)
                else:
                    self._to_unattached(self.epoch, now)
                return self._poll_state(now)
            if now >= st.backoff_until and (st.inflight is None
                                            or now - st.inflight[1] >= self.config.request_timeout_ms):
                self._send_fetch(st.leader_id, now)
            nxt = st.fetch_deadline
            if st.inflight is not None:
                nxt = min(nxt, st.inflight[1] + self.config.request_timeout_ms)
            elif st.backoff_until > now:
                nxt = min(nxt, st.backoff_until)
            return nxt
        if isinstance(st, ResignedState):
            if st.end_unacked and (st.end_sent_ms is None or now - st.end_sent_ms >= self.config.request_timeout_ms):
                st.end_sent_ms = now
                req = M.EndQuorumEpochRequest(self.epoch, self.id, st.preferred_successors)
                for v in sorted(st.end_unacked):
                    self._send(v, req)
            if now >= st.election_deadline:
                # As Kafka 4.x: leave the resigned epoch for the next one, unattached, so late answers to this
                # node's leadership cannot be mistaken for current ones; its election timer then runs as usual.
                self._to_unattached(self.epoch + 1, now)
                return self._poll_state(now)
            nxt = st.election_deadline
            if st.end_unacked and st.end_sent_ms is not None:
                nxt = min(nxt, st.end_sent_ms + self.config.request_timeout_ms)
            return nxt
        raise AssertionError(st)

    def _send_vote_requests(self, st: ProspectiveState | CandidateState, now: int, pre_vote: bool) -> int:
        """Ask every voter that has not answered yet, again after controller.quorum.request.timeout.ms (Kafka's
        RequestManager); returns when to retry."""
        if st.requests_sent_ms is None or now - st.requests_sent_ms >= self.config.request_timeout_ms:
            st.requests_sent_ms = now
            epoch = self.epoch + 1 if pre_vote else self.epoch
            req = M.VoteRequest(epoch, self.id, self.log.last_fetched_epoch(), self.log.end_offset(), pre_vote)
            for v in self._others():
                if v not in st.granted and v not in st.rejected:
                    self._send(v, req)
        return st.requests_sent_ms + self.config.request_timeout_ms

    def _poll_leader(self, st: LeaderState, now: int, far: int) -> int:
        # Check quorum (KIP-595): a leader no majority fetches from within 1.5 x fetch timeout may be partitioned
        # away while the others elect a successor; it resigns rather than keep answering as leader.
        window = self._check_quorum_timeout()
        recent = 1 + sum(1 for v in self._others()
                         if st.replicas[v].last_fetch_ms is not None and now - st.replicas[v].last_fetch_ms < window)
        if recent >= self._majority():
            st.check_quorum_deadline = now + window
        elif now >= st.check_quorum_deadline:
            self._to_resigned(now)
            return self._poll_state(now)
        if st.begin_unacked and (st.begin_sent_ms is None or now - st.begin_sent_ms >= self.config.request_timeout_ms):
            st.begin_sent_ms = now
            for v in sorted(st.begin_unacked):
                self._send(v, M.BeginQuorumEpochRequest(self.epoch, self.id))
        if st.linger_deadline is not None and now >= st.linger_deadline:
            self._flush_accumulator(st, now)
        self._complete_parked(now, force=False)
        nxt = min(far, st.check_quorum_deadline)
        if st.linger_deadline is not None:
            nxt = min(nxt, st.linger_deadline)
        if st.begin_unacked and st.begin_sent_ms is not None:
            nxt = min(nxt, st.begin_sent_ms + self.config.request_timeout_ms)
        for _corr, dl in st.parked_fetches.values():
            nxt = min(nxt, dl)
        return nxt

    def _poll_observer_discovery(self, now: int) -> int:
        """An unattached observer asks voters in turn (Kafka: fetch from a bootstrap server) to learn the leader."""
        st = self.state
        assert isinstance(st, UnattachedState)
        if now >= st.election_deadline:
            target = self.voters[self._observer_target % len(self.voters)]
            self._observer_target += 1
            self._send(target, M.FetchRequest(self.id, self.epoch, self.log.end_offset(),
                                              self.log.last_fetched_epoch()))
            st.election_deadline = now + self.config.request_timeout_ms // 4
        return st.election_deadline

    def _lose_prevote(self, now: int) -> None:
        """KIP-996: a lost (or timed out) pre-vote returns to the leader it followed, else waits a backoff."""
        st = self.state
        assert isinstance(st, ProspectiveState)
        if st.prior_leader is not None:
            self._to_follower(self.epoch, st.prior_leader, now)
        else:
            self._to_unattached(self.epoch, now, deadline=now + self._election_backoff())

    def _maybe_finish_prevote(self, now: int) -> None:
        st = self.state
        if not isinstance(st, ProspectiveState):
            return
        if len(st.granted) >= self._majority():
            self._to_candidate(now)
        elif len(st.rejected) >= len(self.voters) - self._majority() + 1:
            self._lose_prevote(now)

    def _maybe_finish_vote(self, now: int) -> None:
        st = self.state
        if not isinstance(st, CandidateState):
            return
        if len(st.granted) >= self._majority():
            self._to_leader(now)
        elif len(st.rejected) >= len(self.voters) - self._majority() + 1 and st.backoff_until is None:
            st.backoff_until = now + self._election_backoff()

    # ---------------------------------------------------------------- Vote
    def _on_VoteRequest(self, msg: M.RaftMessage, req: M.VoteRequest, now: int) -> None:
        def answer(error: int, granted: bool) -> None:
            self._send(msg.src, M.VoteResponse(error, self.epoch, self.leader_id(), granted, req.pre_vote),
                       msg.correlation_id)

        if not self.is_voter or req.candidate_id not in self.voters:
            return answer(M.INCONSISTENT_VOTER_SET, False)
        if req.candidate_epoch < self.epoch:
            return answer(M.FENCED_LEADER_EPOCH, False)
        if not req.pre_vote and req.candidate_epoch > self.epoch:
            self._to_unattached(req.candidate_epoch, now)
        log_ok = "no_log_check" in self.config.faults or self._log_is_up_to_date(req.last_offset_epoch,
                                                                                  req.last_offset)
        st = self.state
        if req.pre_vote:
            # KIP-996: no state change; refuse while a leader is alive as far as we can tell.
            if isinstance(st, (LeaderState, ResignedState)) and req.candidate_epoch <= self.epoch + 1:
                granted = isinstance(st, ResignedState) and log_ok
            elif isinstance(st, FollowerState):
                heard = st.last_fetch_ok_ms is not None and now - st.last_fetch_ok_ms < self.config.fetch_timeout_ms
                granted = log_ok and not heard
            else:
                granted = log_ok
            return answer(M.NONE, granted)
        voted = st.voted_for
        if "vote_not_persisted" in self.config.faults:
            voted = self._remembered_votes.get(self.epoch)
        if isinstance(st, (UnattachedState, ProspectiveState)):
            may_vote = voted is None or voted == req.candidate_id or "vote_twice" in self.config.faults
            if may_vote and log_ok:
                if "vote_not_persisted" in self.config.faults:
                    self._remembered_votes[self.epoch] = req.candidate_id
                    self.state.voted_for = None
                else:
                    self.quorum.record_vote(req.candidate_id)  # persisted BEFORE the answer below
                if isinstance(st, UnattachedState):
                    st.election_deadline = now + self._election_timeout()
                return answer(M.NONE, True)
            return answer(M.NONE, False)
        if isinstance(st, CandidateState) and "vote_twice" in self.config.faults and log_ok:
            return answer(M.NONE, True)
        return answer(M.NONE, False)

    def _on_VoteResponse(self, msg: M.RaftMessage, resp: M.VoteResponse, now: int) -> None:
        if self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now):
            return
        if resp.error != M.NONE or resp.leader_epoch != self.epoch:
            return
        st = self.state
        if resp.pre_vote and isinstance(st, ProspectiveState):
            (st.granted if resp.vote_granted else st.rejected).add(msg.src)
            self._maybe_finish_prevote(now)
        elif not resp.pre_vote and isinstance(st, CandidateState) and st.backoff_until is None:
            (st.granted if resp.vote_granted else st.rejected).add(msg.src)
            self._maybe_finish_vote(now)

    # ---------------------------------------------------------------- Begin / End QuorumEpoch
    def _on_BeginQuorumEpochRequest(self, msg: M.RaftMessage, req: M.BeginQuorumEpochRequest, now: int) -> None:
        if req.leader_epoch < self.epoch:
            self._send(msg.src, M.BeginQuorumEpochResponse(M.FENCED_LEADER_EPOCH, self.epoch, self.leader_id()),
                       msg.correlation_id)
            return
        if not (isinstance(self.state, FollowerState) and self.state.leader_id == req.leader_id
                and self.epoch == req.leader_epoch):
            self._to_follower(req.leader_epoch, req.leader_id, now)
        self._send(msg.src, M.BeginQuorumEpochResponse(M.NONE, self.epoch, self.leader_id()), msg.correlation_id)

    def _on_BeginQuorumEpochResponse(self, msg: M.RaftMessage, resp: M.BeginQuorumEpochResponse, now: int) -> None:
        if self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now):
            return
        if isinstance(self.state, LeaderState) and resp.error == M.NONE and resp.leader_epoch == self.epoch:
            self.state.begin_unacked.discard(msg.src)

    def _on_EndQuorumEpochRequest(self, msg: M.RaftMessage, req: M.EndQuorumEpochRequest, now: int) -> None:
        if req.leader_epoch < self.epoch:
            self._send(msg.src, M.EndQuorumEpochResponse(M.FENCED_LEADER_EPOCH, self.epoch, self.leader_id()),
                       msg.correlation_id)
            return
        if req.leader_epoch > self.epoch:
            self._to_unattached(req.leader_epoch, now)
        st = self.state
        if self.is_voter and (isinstance(st, UnattachedState)
                              or (isinstance(st, FollowerState) and st.leader_id == req.leader_id)):
            # Kafka overrides the follower's fetch timeout by rank (endEpochElectionBackoff). The voter also forgets
            # the leader (unattached), or, under KIP-996, it would refuse every pre-vote for a fetch timeout.
            self._to_unattached(self.epoch, now, deadline=now + self._end_epoch_backoff(req.preferred_successors))
        self._send(msg.src, M.EndQuorumEpochResponse(M.NONE, self.epoch, self.leader_id()), msg.correlation_id)

    def _on_EndQuorumEpochResponse(self, msg: M.RaftMessage, resp: M.EndQuorumEpochResponse, now: int) -> None:
        if self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now):
            return
        if isinstance(self.state, ResignedState) and resp.leader_epoch == self.epoch:
            self.state.end_unacked.discard(msg.src)

    # ---------------------------------------------------------------- Fetch
    def _send_fetch(self, leader: int, now: int) -> None:
        st = self.state
        assert isinstance(st, FollowerState)
        corr = self._send(leader, M.FetchRequest(self.id, self.epoch, self.log.end_offset(),
                                                 self.log.last_fetched_epoch()))
        st.inflight = (corr, now)

    def _on_FetchRequest(self, msg: M.RaftMessage, req: M.FetchRequest, now: int) -> None:
        def answer(error: int, **kw: Any) -> None:
            self._send(msg.src, M.FetchResponse(error, self.epoch, self.leader_id(), **kw), msg.correlation_id)

        # Kafka's validateLeaderOnlyRequest.
        if req.current_leader_epoch < self.epoch:
            return answer(M.FENCED_LEADER_EPOCH)
        if req.current_leader_epoch > self.epoch:
            return answer(M.UNKNOWN_LEADER_EPOCH)
        st = self.state
        if not isinstance(st, LeaderState):
            return answer(M.NOT_LEADER_OR_FOLLOWER)
        if req.fetch_offset > 0 and "no_truncation_on_diverging_epoch" not in self.config.faults:
            epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                return answer(M.NONE, high_watermark=self._hw_or_unknown(), diverging_epoch=(epoch, end))
        fetch_offset = min(req.fetch_offset, self.log.end_offset())
        prog = self._progress_for(st, req.replica_id)
        prog.end_offset = fetch_offset
        prog.last_fetch_ms = now
        if req.replica_id in st.replicas:  # a voter: its offset counts toward the HW and check-quorum
            st.begin_unacked.discard(req.replica_id)
            if self._update_leader_hw(now):
                self._complete_parked(now, force=True)
        records = self.log.read(fetch_offset, self.config.fetch_max_entries)
        hw = self._hw_or_unknown()
        if not records and prog.last_hw_sent == hw:
            st.parked_fetches[msg.src] = (msg.correlation_id, now + self.config.fetch_max_wait_ms)
            return None
        prog.last_hw_sent = hw
        st.parked_fetches.pop(msg.src, None)
        return answer(M.NONE, high_watermark=hw, records=records)

    def _progress_for(self, st: LeaderState, replica: int) -> ReplicaProgress:
        if replica in st.replicas:
            return st.replicas[replica]
        return st.observers.setdefault(replica, ReplicaProgress())

    def _complete_parked(self, now: int, force: bool) -> None:
        """Answer parked fetches: all of them on an append or HW change, the expired ones otherwise."""
        st = self.state
        if not isinstance(st, LeaderState):
            return
        for replica in sorted(st.parked_fetches):
            corr, dl = st.parked_fetches[replica]
            if not force and now < dl:
                continue
            del st.parked_fetches[replica]
            prog = self._progress_for(st, replica)
            hw = self._hw_or_unknown()
            prog.last_hw_sent = hw
            records = self.log.read(prog.end_offset, self.config.fetch_max_entries)
            self._send(replica, M.FetchResponse(M.NONE, self.epoch, self.id, high_watermark=hw, records=records),
                       corr)

    def _hw_or_unknown(self) -> int:
        st = self.state
        return st.high_watermark if isinstance(st, LeaderState) and st.high_watermark is not None else -1

    def _update_leader_hw(self, now: int) -> bool:
        """The majority-th largest voter end offset, once it covers this epoch's LeaderChange record (KIP-595,
        Raft's rule that a leader commits only entries of its own epoch by counting). Returns True if it moved."""
        st = self.state
        assert isinstance(st, LeaderState)
        ends = sorted([self.log.end_offset()] + [st.replicas[v].end_offset for v in self._others()], reverse=True)
        candidate = ends[self._majority() - 1]
        if "hw_without_majority" in self.config.faults:
            candidate = self.log.end_offset()
        if candidate > st.epoch_start_offset and (st.high_watermark is None or candidate > st.high_watermark):
            st.high_watermark = candidate
            self.high_watermark = max(self.high_watermark, candidate)
            return True
        return False

    def _on_FetchResponse(self, msg: M.RaftMessage, resp: M.FetchResponse, now: int) -> None:
        st = self.state
        if isinstance(st, UnattachedState) and not self.is_voter:
            self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now)
            return
        if not isinstance(st, FollowerState) or st.inflight is None or st.inflight[0] != msg.correlation_id:
            self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now)
            return
        st.inflight = None
        if self._maybe_handle_common(resp.leader_epoch, resp.leader_id, now):
            return
        if resp.error != M.NONE or resp.leader_id != st.leader_id:
            st.backoff_until = now + self.config.retry_backoff_ms
            return
        st.last_fetch_ok_ms = now
        st.fetch_deadline = now + self.config.fetch_timeout_ms
        if resp.diverging_epoch is not None:
            epoch, end = resp.diverging_epoch
            if end < self.high_watermark:
                raise RaftStateError(f"node {self.id}: leader {resp.leader_id} asked to truncate to {end}, below the "
                                     f"high watermark {self.high_watermark}")
            # Kafka's truncateToEndOffset: never past what this log itself holds for that epoch.
            _local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
            self.log.truncate_to(min(end, local_end))
        else:
            if resp.records and resp.records[0].offset == self.log.end_offset():
                self.log.append_as_follower(resp.records)
                self.log.flush()  # a voter's next fetch offset acknowledges these: they must be durable first
            # Only a validated fetch proves our log matches the leader's up to our end offset: after a truncation
            # the prefix may still diverge further back, so the HW waits for the next answer (as Kafka's
            # handleFetchResponse does).
            if resp.high_watermark >= 0:
                self.high_watermark = max(self.high_watermark, min(resp.high_watermark, self.log.end_offset()))
        self._send_fetch(st.leader_id, now)

    # ---------------------------------------------------------------- listener
    def _deliver_commits(self) -> None:
        """handleCommit: everything below the high watermark, once, in order."""
        if self._delivered < self.high_watermark:
            entries = self.log.read(self._delivered, self.high_watermark - self._delivered)
            self._delivered += len(entries)
            if self.listener is not None and entries:
                self.listener.handle_commit(entries)


# The name the design notes use for one replica of the quorum.
RaftNode = KafkaRaftClient
