"""An event simulation of a Raft quorum in one process, in the style of Kafka's RaftEventSimulationTest.

N replicas (voters and observers) run the unchanged KafkaRaftClient under a virtual clock. A seeded router delivers
messages with a random per-link delay (so they reorder), drops some, and honours partitions; nodes crash (losing
everything in memory) and restart from what they persisted (quorum-state store and log). After every event the
invariants are checked; the first violation stops the run with an InvariantViolation that names the seed and event.
Everything random flows from one ``random.Random(seed)``, so a seed replays byte for byte (``trace``).

Invariants (Kafka's simulation checks several under similar names):
- election safety: at most one leader per epoch, and (seen on the wire) no voter grants two candidates one epoch;
- committed entries (below a high watermark any node reported) are never lost or changed on a node that later
  reports them under its high watermark, nor in what it handed to handleCommit;
- leader completeness: a leader of epoch E holds every entry seen committed in an epoch < E;
- each node's high watermark is monotonic (per incarnation: it lives in memory) and never above its log end;
- each node's epoch never goes down, across restarts too;
- liveness (``check_liveness``): once the network heals and every node is up, a leader is elected and a new append
  commits on every node within a bound; and (``check_failover``) with the leader cut off from everyone, the others
  elect a successor of a higher epoch and commit within a bound.
Broken log order (an append whose epoch or offset does not fit) is reported as a violation too.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from .client import KafkaRaftClient, NotLeaderError, RaftConfig, RaftStateError, RecordingListener
from .log import LogEntry, MemoryRaftLog
from .messages import RaftMessage, VoteResponse
from .quorum_state import LeaderState, MemoryQuorumStateStore


class InvariantViolation(AssertionError):
    """A safety or liveness property of the quorum failed; the message carries the evidence."""


@dataclass
class NetworkConfig:
    """Each ordered link gets its own latency ceiling, drawn once in [min, max] ms; each message then takes a delay
    uniform in [min, that ceiling] (so messages reorder), and is dropped with ``drop_rate``."""
    min_delay_ms: int = 1
    max_delay_ms: int = 40
    drop_rate: float = 0.02


@dataclass
class ChaosConfig:
    """How often the schedule acts (mean gap between actions, ms) and the weights of each action."""
    mean_gap_ms: int = 150
    weights: dict[str, int] = field(default_factory=lambda: {
        "append": 10, "crash": 2, "restart": 3, "bounce": 1, "partition": 2, "heal": 2, "resign": 1})


@dataclass
class _Disk:
    """What survives a crash: the quorum-state store and the log."""
    store: MemoryQuorumStateStore
    log: MemoryRaftLog


@dataclass
class _Observed:
    """What the checker knows of one node incarnation."""
    hw: int = 0
    checked_upto: int = 0
    truncations_seen: int = 0
    delivered_checked: int = 0


class RaftSimulation:
    """A cluster of ``voters`` voters and ``observers`` observers under one seed."""

    def __init__(self, seed: int, voters: int = 3, observers: int = 1, faults: frozenset[str] = frozenset(),
                 network: NetworkConfig | None = None, chaos: ChaosConfig | None = None,
                 config_overrides: dict[str, Any] | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.net = network or NetworkConfig()
        self.chaos = chaos or ChaosConfig()
        self.voter_ids = tuple(range(1, voters + 1))
        self.node_ids = tuple(range(1, voters + observers + 1))
        self.configs = {n: RaftConfig(node_id=n, voters=self.voter_ids, faults=frozenset(faults),
                                      **(config_overrides or {})) for n in self.node_ids}
        self.now = 0
        self._seq = itertools.count()
        self.events: list[tuple[int, int, str, Any]] = []
        self.disks = {n: _Disk(MemoryQuorumStateStore(), MemoryRaftLog()) for n in self.node_ids}
        self.nodes: dict[int, KafkaRaftClient | None] = {}
        self.listeners: dict[int, RecordingListener] = {}
        self.incarnation = dict.fromkeys(self.node_ids, 0)
        self.pending_wakes: dict[int, list[int]] = {n: [] for n in self.node_ids}
        self.blocked: set[tuple[int, int]] = set()
        self.link_max_delay = {(a, b): self.rng.randint(self.net.min_delay_ms, self.net.max_delay_ms)
                               for a in self.node_ids for b in self.node_ids if a != b}
        self.trace_hash = hashlib.sha256()
        self.trace_lines: list[str] | None = None
        self.events_handled = 0
        # checker state
        self.leaders_by_epoch: dict[int, int] = {}
        self.votes_cast: dict[tuple[int, int], int] = {}  # (voter, epoch) -> candidate granted
        self.committed: dict[int, LogEntry] = {}
        self.committed_epoch: dict[int, int] = {}
        self.max_epoch = dict.fromkeys(self.node_ids, 0)
        self.observed: dict[int, _Observed] = {}
        self.appended = 0
        for n in self.node_ids:
            self._start(n)

    # ---------------------------------------------------------------- trace
    def _trace(self, line: str) -> None:
        text = f"{self.now} {line}\n"
        self.trace_hash.update(text.encode())
        if self.trace_lines is not None:
            self.trace_lines.append(text)

    def trace_digest(self) -> str:
        return self.trace_hash.hexdigest()

    # ---------------------------------------------------------------- nodes
    def _start(self, n: int) -> None:
        disk = self.disks[n]
        self.incarnation[n] += 1
        self.listeners[n] = RecordingListener()
        node = KafkaRaftClient(self.configs[n], disk.log, disk.store, random.Random(self.rng.getrandbits(32)),
                               self.now, self.listeners[n])
        self.nodes[n] = node
        self.observed[n] = _Observed(truncations_seen=disk.log.truncations)
        self.pending_wakes[n] = []
        self._trace(f"start {node.describe()}")
        self._poll(n)

    def _poll(self, n: int) -> None:
        node = self.nodes[n]
        if node is None:
            return
        out, deadline = node.poll(self.now)
        self._route(out)
        deadline = max(deadline, self.now + 1)
        if not self.pending_wakes[n] or min(self.pending_wakes[n]) > deadline:
            self.pending_wakes[n].append(deadline)
            self._push(deadline, "wake", (n, self.incarnation[n], deadline))

    def _push(self, when: int, kind: str, payload: Any) -> None:
        heapq.heappush(self.events, (when, next(self._seq), kind, payload))

    def _route(self, msgs: list[RaftMessage]) -> None:
        for m in msgs:
            body = m.body
            if isinstance(body, VoteResponse) and body.vote_granted and not body.pre_vote:
                prev = self.votes_cast.setdefault((m.src, body.leader_epoch), m.dst)
                if prev != m.dst:
                    self._fail(f"voter {m.src} granted votes to {prev} and {m.dst} in epoch {body.leader_epoch}")
            if (m.src, m.dst) in self.blocked or self.rng.random() < self.net.drop_rate:
                self._trace(f"drop {m.describe()}")
                continue
            delay = self.rng.randint(self.net.min_delay_ms, self.link_max_delay[(m.src, m.dst)])
            self._push(self.now + delay, "deliver", (m, self.incarnation[m.dst]))

    # ---------------------------------------------------------------- the event loop
    def step(self) -> bool:
        """Handle the next event; False when none is left."""
        if not self.events:
            return False
        when, _, kind, payload = heapq.heappop(self.events)
        self.now = max(self.now, when)
        self.events_handled += 1
        if kind == "wake":
            n, inc, at = payload
            if inc == self.incarnation[n] and at in self.pending_wakes[n]:
                self.pending_wakes[n].remove(at)
            if inc == self.incarnation[n] and self.nodes[n] is not None:
                self._poll(n)
                self._trace(f"wake {self.nodes[n].describe()}")
        elif kind == "deliver":
            m: RaftMessage = payload[0]
            node = self.nodes.get(m.dst)
            # A restart closes the node's connections: what was sent to its previous incarnation never arrives
            # (correlation ids start again at 1, so a stale answer would otherwise pass for a new one).
            if node is None or (m.src, m.dst) in self.blocked or payload[1] != self.incarnation[m.dst]:
                self._trace(f"lost {m.describe()}")
            else:
                self._trace(f"deliver {m.describe()}")
                try:
                    out = node.handle(m, self.now)
                except (ValueError, RaftStateError) as e:  # a log append out of order, a truncation below HW
                    self._fail(f"node {m.dst} log: {e}")
                self._route(out)
                self._poll(m.dst)
        elif kind == "chaos":
            self._chaos(payload)
        else:
            raise AssertionError(kind)
        self.check_invariants()
        return True

    def run_until(self, t_ms: int, max_events: int | None = None) -> None:
        """Run events up to virtual time ``t_ms`` (or until ``max_events`` were handled)."""
        while self.events and self.events[0][0] <= t_ms:
            if max_events is not None and self.events_handled >= max_events:
                return
            self.step()
        self.now = max(self.now, t_ms)

    # ---------------------------------------------------------------- chaos actions
    def schedule_chaos(self, until_ms: int) -> None:
        """Lay out random actions from now to ``until_ms`` (drawn up front from the seed)."""
        t = self.now
        kinds = sorted(self.chaos.weights)
        weights = [self.chaos.weights[k] for k in kinds]
        while True:
            t += 1 + int(self.rng.expovariate(1.0 / self.chaos.mean_gap_ms))
            if t >= until_ms:
                return
            self._push(t, "chaos", self.rng.choices(kinds, weights)[0])

    def _chaos(self, kind: str) -> None:
        alive = [n for n in self.node_ids if self.nodes[n] is not None]
        dead = [n for n in self.node_ids if self.nodes[n] is None]
        if kind == "append":
            self.client_append()
        elif kind == "crash" and len(dead) < len(self.voter_ids) // 2 + 1 and alive:
            self.crash(self.rng.choice(alive))
        elif kind == "restart" and dead:
            self.restart(self.rng.choice(dead))
        elif kind == "bounce" and alive:  # kill -9 and start again at once: only what was persisted survives
            n = self.rng.choice(alive)
            self.crash(n)
            self.restart(n)
        elif kind == "partition":
            shuffled = list(self.node_ids)
            self.rng.shuffle(shuffled)
            cut = self.rng.randint(1, len(shuffled) - 1)
            self.partition(set(shuffled[:cut]), set(shuffled[cut:]))
        elif kind == "heal":
            self.heal()
        elif kind == "resign":
            leader = self.current_leader()
            if leader is not None:
                node = self.nodes[leader]
                assert node is not None
                self._trace(f"resign {leader}")
                self._route(node.resign(self.now))
                self._poll(leader)

    def client_append(self, on: int | None = None) -> int | None:
        """Append one record on node ``on``, or on whichever node believes it leads (a stale leader's append may be
        lost: that is allowed, it was never committed)."""
        for n in (self.node_ids if on is None else (on,)):
            node = self.nodes[n]
            if node is not None and isinstance(node.state, LeaderState):
                self.appended += 1
                try:
                    off, out = node.append(f"r{self.appended}@{n}", self.now)
                except NotLeaderError:
                    continue
                self._trace(f"append {n} offset={off}")
                self._route(out)
                self._poll(n)
                return off
        return None

    def crash(self, n: int) -> None:
        self._trace(f"crash {n}")
        self.nodes[n] = None
        self.incarnation[n] += 1

    def restart(self, n: int) -> None:
        if self.nodes[n] is None:
            self._start(n)

    def partition(self, side_a: set[int], side_b: set[int]) -> None:
        self._trace(f"partition {sorted(side_a)} | {sorted(side_b)}")
        self.blocked = {(a, b) for a in side_a for b in side_b} | {(b, a) for a in side_a for b in side_b}

    def heal(self) -> None:
        self._trace("heal")
        self.blocked = set()

    def current_leader(self) -> int | None:
        """The leader of the highest epoch among live nodes that believe they lead."""
        best = None
        for n in self.node_ids:
            node = self.nodes[n]
            if node is not None and isinstance(node.state, LeaderState):
                if best is None or node.epoch > self.nodes[best].epoch:  # type: ignore[union-attr]
                    best = n
        return best

    # ---------------------------------------------------------------- invariants
    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"seed={self.seed} t={self.now} event={self.events_handled}: {what}")

    def check_invariants(self) -> None:
        for n in self.node_ids:
            node = self.nodes[n]
            if node is None:
                continue
            if node.epoch < self.max_epoch[n]:
                self._fail(f"node {n} epoch went down {self.max_epoch[n]} -> {node.epoch}")
            self.max_epoch[n] = node.epoch
            if isinstance(node.state, LeaderState):
                prev = self.leaders_by_epoch.get(node.epoch)
                if prev is None:
                    self.leaders_by_epoch[node.epoch] = n
                    self._check_leader_completeness(n, node)
                elif prev != n:
                    self._fail(f"two leaders in epoch {node.epoch}: {prev} and {n}")
            self._check_committed(n, node)

    def _check_leader_completeness(self, n: int, node: KafkaRaftClient) -> None:
        for off, entry in self.committed.items():
            if self.committed_epoch[off] < node.epoch and node.log.entry(off) != entry:
                self._fail(f"leader {n} of epoch {node.epoch} lacks committed {entry}: has {node.log.entry(off)}")

    def _check_committed(self, n: int, node: KafkaRaftClient) -> None:
        obs = self.observed[n]
        hw = node.high_watermark
        if hw < obs.hw:
            self._fail(f"node {n} high watermark went down {obs.hw} -> {hw}")
        if hw > node.log.end_offset():
            self._fail(f"node {n} high watermark {hw} above its log end {node.log.end_offset()}")
        obs.hw = hw
        log = node.log
        assert isinstance(log, MemoryRaftLog)
        if log.truncations != obs.truncations_seen:
            obs.truncations_seen = log.truncations
            obs.checked_upto = 0
        for off in range(obs.checked_upto, hw):
            entry = log.entries[off]
            known = self.committed.get(off)
            if known is None:
                self.committed[off] = entry
                self.committed_epoch[off] = node.epoch
            elif known != entry:
                self._fail(f"node {n} has {entry} under its high watermark {hw}; committed was {known}")
        obs.checked_upto = max(obs.checked_upto, hw)
        got = self.listeners[n].committed
        for i in range(obs.delivered_checked, len(got)):
            if got[i].offset != i or self.committed.get(i) != got[i]:
                self._fail(f"node {n} handleCommit gave {got[i]}; committed was {self.committed.get(i)}")
        obs.delivered_checked = len(got)

    # ---------------------------------------------------------------- liveness
    def commit_probe(self, nodes: set[int], leader_ok: Any, bound_ms: int) -> int:
        """Append a probe record on the current leader (again whenever leadership moves or the probe is lost) until
        every node in ``nodes`` has it under its high watermark. Returns the time taken, -1 past ``bound_ms``."""
        start = self.now
        target: tuple[int, int, int, str] | None = None  # (leader, epoch, offset, data)
        while self.now - start <= bound_ms:
            leader = self.current_leader()
            node = self.nodes[leader] if leader is not None else None
            if leader is not None and node is not None and leader_ok(leader, node):
                have = node.log.entry(target[2]) if target is not None else None
                if target is None or target[:2] != (leader, node.epoch) or (have is not None
                                                                             and have.data != target[3]):
                    off = self.client_append(on=leader)
                    target = (leader, node.epoch, off, f"r{self.appended}@{leader}") if off is not None else None
                elif have is not None and all(self.nodes[n] is not None
                                              and self.nodes[n].high_watermark > target[2]  # type: ignore
                                              for n in nodes):
                    return self.now - start
            if not self.step():
                break
        return -1

    def check_liveness(self, bound_ms: int = 30_000) -> int:
        """Heal everything, restart every node, then require a leader and a newly appended record committed on every
        node within ``bound_ms``. Returns the time it took."""
        self.events = [e for e in self.events if e[2] != "chaos"]
        heapq.heapify(self.events)
        self.heal()
        self.net = NetworkConfig(self.net.min_delay_ms, self.net.max_delay_ms, 0.0)
        for n in self.node_ids:
            self.restart(n)
        took = self.commit_probe(set(self.node_ids), lambda leader, node: True, bound_ms)
        if took >= 0:
            return took
        self._fail(f"liveness: no commit on all nodes within {bound_ms} ms after healing "
                   f"({', '.join(x.describe() for x in self.nodes.values() if x is not None)})")
        return -1


# Two schedules: "default" uses Kafka's default timeouts and a mild network; "aggressive" shortens the timeouts to
# a few network delays and bounces nodes often, so elections overlap (split votes, votes racing restarts).
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "aggressive": {
        "network": NetworkConfig(5, 150, 0.05),
        "chaos": ChaosConfig(mean_gap_ms=40, weights={"append": 6, "bounce": 4, "crash": 2, "restart": 3,
                                                      "partition": 3, "heal": 3, "resign": 1}),
        "config_overrides": {"election_timeout_ms": 200, "fetch_timeout_ms": 400, "election_backoff_max_ms": 200},
    },
}


def check_failover(sim: RaftSimulation, bound_ms: int = 30_000) -> int:
    """Liveness under a standing partition: cut the leader off from everyone; the other side (a majority of voters
    plus the observers) must elect a leader of a higher epoch and commit a new append on all its nodes within
    ``bound_ms``. Returns the time it took."""
    old = sim.current_leader()
    if old is None:
        sim._fail("failover: no leader to isolate")
    old_node = sim.nodes[old]
    assert old_node is not None
    old_epoch = old_node.epoch
    rest = set(sim.node_ids) - {old}
    sim.partition({old}, rest)
    took = sim.commit_probe(rest, lambda leader, node: leader != old and node.epoch > old_epoch, bound_ms)
    if took >= 0:
        return took
    sim._fail(f"failover: the majority side committed nothing within {bound_ms} ms of isolating leader {old} "
              f"({', '.join(x.describe() for x in sim.nodes.values() if x is not None)})")
    return -1


def run_seed(seed: int, voters: int = 3, observers: int = 1, faults: frozenset[str] = frozenset(),
             profile: str = "default", chaos_ms: int = 10_000, max_events: int = 8_000,
             liveness_bound_ms: int = 30_000, trace: bool = False, failover: bool = False) -> RaftSimulation:
    """One simulation: a chaos phase of ``chaos_ms`` virtual ms (at most ``max_events`` events), then the liveness
    check (and with ``failover`` the isolated-leader check after it). Raises InvariantViolation on the first broken
    invariant."""
    sim = RaftSimulation(seed, voters=voters, observers=observers, faults=faults, **PROFILES[profile])
    if trace:
        sim.trace_lines = []
    sim.schedule_chaos(chaos_ms)
    sim.run_until(chaos_ms, max_events=max_events)
    sim.check_liveness(liveness_bound_ms)
    if failover:
        check_failover(sim, liveness_bound_ms)
    return sim
