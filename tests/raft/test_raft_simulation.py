"""The Raft core under the event simulation (Kafka's RaftEventSimulationTest): seed sweeps with the invariants
checked after every event, byte-identical replay of a seed, and proof that each fault switch is caught."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reference_broker.raft import FAULTS
from reference_broker.raft.quorum_state import FollowerState, LeaderState
from reference_broker.raft.simulation import InvariantViolation, RaftSimulation, run_seed

SLOW = bool(os.environ.get("KCT_SLOW"))
CHUNK = 100
CHUNKS = range(10 if SLOW else 2)  # 200 seeds per shape by default, 1000 under KCT_SLOW=1
CHAOS_MS = 30_000 if SLOW else 10_000


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("voters,observers,profile", [(3, 1, "default"), (5, 1, "aggressive")])
def test_seed_sweep_keeps_every_invariant(voters: int, observers: int, profile: str, chunk: int) -> None:
    """Seeds chunk*100 .. chunk*100+99: no invariant breaks, every run ends live (a leader and a fresh append
    committed on every node within 30 s of healing), and then, with the leader cut off from everyone, the rest elect
    a successor and commit within 30 s."""
    committed = elections = 0
    seeds = range(chunk * CHUNK, (chunk + 1) * CHUNK)
    for seed in seeds:
        sim = run_seed(seed, voters=voters, observers=observers, profile=profile, chaos_ms=CHAOS_MS, failover=True)
        committed += len(sim.committed)
        elections += len(sim.leaders_by_epoch)
    # The runs did something: records committed and leaders changed under the chaos.
    assert committed > 5 * len(seeds)
    assert elections > 2 * len(seeds)


def test_same_seed_same_trace_byte_for_byte() -> None:
    a = run_seed(42, voters=5, observers=2, profile="aggressive", trace=True)
    b = run_seed(42, voters=5, observers=2, profile="aggressive", trace=True)
    assert a.trace_lines is not None and b.trace_lines is not None
    assert "".join(a.trace_lines).encode() == "".join(b.trace_lines).encode()
    assert a.trace_digest() == b.trace_digest()
    assert len(a.trace_lines) > 500
    assert run_seed(43, voters=5, observers=2, profile="aggressive").trace_digest() != a.trace_digest()


def test_trace_does_not_depend_on_the_process_hash_seed() -> None:
    """Replay must hold across processes too: nothing that drives behaviour iterates in hash order."""
    code = ("from reference_broker.raft.simulation import run_seed; "
            "print(run_seed(5, voters=5, observers=1, profile='aggressive', failover=True).trace_digest())")
    digests = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        digests.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   check=True, timeout=120).stdout.strip())
    assert digests == {run_seed(5, voters=5, observers=1, profile="aggressive", failover=True).trace_digest()}


def test_answers_to_a_crashed_incarnation_are_not_delivered_to_the_next_one() -> None:
    """Found by the KCT_SLOW sweep (seed 72, 5 voters, aggressive, 30 s): a node restarted and its correlation ids
    began again at 1, so the DivergingEpoch answering its previous incarnation's fetch #3 was taken for the answer to
    its new fetch #3, and it truncated under its high watermark ("high watermark 32 above its log end 26"). A
    restart closes connections: such messages are now lost, and the core refuses a truncation below its HW."""
    sim = run_seed(72, voters=5, observers=1, profile="aggressive", chaos_ms=30_000, failover=True)
    assert len(sim.committed) > 30


def test_partitioned_leader_is_replaced_and_the_healed_cluster_commits() -> None:
    """A leader cut off from every voter: the others elect a successor in a higher epoch; the old leader resigns on
    check-quorum (1.5 x fetch timeout); after healing it follows, truncates its uncommitted append, and a new append
    commits everywhere."""
    sim = RaftSimulation(7, voters=3, observers=1)
    sim.run_until(10_000)
    old = sim.current_leader()
    assert old is not None
    old_epoch = sim.nodes[old].epoch
    sim.partition({old}, set(sim.node_ids) - {old})
    stale_offset = sim.client_append(on=old)
    assert stale_offset is not None
    stale = sim.nodes[old].log.entry(stale_offset)
    sim.run_until(20_000)
    new = sim.current_leader()
    assert new is not None and new != old and sim.nodes[new].epoch > old_epoch
    assert not isinstance(sim.nodes[old].state, LeaderState)  # check-quorum made it resign
    took = sim.check_liveness(30_000)
    assert took < 30_000
    assert isinstance(sim.nodes[old].state, FollowerState)
    replaced = sim.nodes[old].log.entry(stale_offset)
    assert replaced is not None and replaced != stale and replaced.epoch > old_epoch  # truncated, then refetched


def test_an_isolated_follower_does_not_disturb_the_leader_when_it_returns() -> None:
    """KIP-996's point: cut off, a follower goes prospective again and again but never bumps its epoch (no pre-vote
    majority), so when it comes back the leader and epoch are unchanged and it simply follows again."""
    sim = RaftSimulation(21, voters=3, observers=0)
    sim.run_until(8_000)
    leader = sim.current_leader()
    assert leader is not None
    epoch = sim.nodes[leader].epoch
    lone = next(v for v in sim.voter_ids if v != leader)
    sim.partition({lone}, set(sim.node_ids) - {lone})
    sim.run_until(30_000)
    assert sim.nodes[lone].epoch == epoch
    sim.heal()
    sim.run_until(40_000)
    assert sim.current_leader() == leader and sim.nodes[leader].epoch == epoch
    assert isinstance(sim.nodes[lone].state, FollowerState) and sim.nodes[lone].state.leader_id == leader
    assert sim.nodes[lone].high_watermark == sim.nodes[leader].high_watermark


def test_observer_follows_but_never_votes_nor_counts() -> None:
    """With 2 of 3 voters down, the remaining voter plus an observer are no majority: no leader is elected, no
    vote request ever reaches the observer, and the observer holds nothing uncommitted."""
    sim = RaftSimulation(3, voters=3, observers=2)
    sim.run_until(8_000)
    assert sim.current_leader() is not None
    hw_before = {n: sim.nodes[n].high_watermark for n in sim.node_ids}
    assert all(sim.nodes[n].high_watermark > 0 for n in (4, 5))  # observers replicate and learn the HW
    leader = sim.current_leader()
    for n in [v for v in sim.voter_ids if v != leader][:1] + [leader]:
        sim.crash(n)
    sim.run_until(30_000)
    assert sim.current_leader() is None
    assert all(sim.nodes[n].high_watermark == hw_before[n] for n in (4, 5))
    assert not any(v == 4 or v == 5 for (v, _epoch) in sim.votes_cast)


def test_graceful_resign_hands_over_to_a_voter() -> None:
    sim = RaftSimulation(11, voters=5, observers=0)
    sim.run_until(8_000)
    old = sim.current_leader()
    assert old is not None
    epoch = sim.nodes[old].epoch
    sim._chaos("resign")
    sim.run_until(sim.now + 3_000)
    new = sim.current_leader()
    assert new is not None and sim.nodes[new].epoch > epoch


EXPECTED = {
    "vote_twice": ("granted votes to", "two leaders"),
    "vote_not_persisted": ("granted votes to", "two leaders"),
    "no_log_check": ("lacks committed", "under its high watermark", "handleCommit"),
    "hw_without_majority": ("lacks committed", "under its high watermark", "handleCommit"),
    "no_truncation_on_diverging_epoch": ("under its high watermark", "lacks committed", "handleCommit", " log: "),
}
# Switches the sweep does not judge: the simulation's liveness is checked after the faults heal, and a voter that
# never times out on its leader still follows the next candidate's higher epoch then; what it breaks (a new leader
# while the old one is down) is shown by the quorum suite's switch rows on real processes.
NOT_SWEPT = {"no_fetch_timeout": "tests/conformance/test_conformance_suites.py rows raft.no_fetch_timeout"}
# vote_not_persisted needs a voter restarted between two candidates' requests and asked again after it; with 3
# voters two candidates rarely overlap (0 of seeds 0-399 since a restart drops what was in flight to the node).
SIZES = {"vote_not_persisted": (5,)}


@pytest.mark.parametrize("fault,voters", [(f, v) for f in sorted(EXPECTED) for v in SIZES.get(f, (3, 5))])
def test_each_fault_switch_is_caught_by_the_sweep(fault: str, voters: int) -> None:
    """Each switch breaks one rule; some seed of the sweep must show the matching invariant violation. Measured over
    seeds 0-99 (aggressive profile, 3 / 5 voters): hw_without_majority 90 / 78, no_truncation_on_diverging_epoch
    84 / 77, no_log_check 72 / 66, vote_twice 25 / 64, vote_not_persisted 0 / 2 (it needs a voter restarted between
    two candidates' requests: about 1 seed in 100 with 3 voters, so the sweep goes to 400)."""
    assert set(EXPECTED) | set(NOT_SWEPT) == set(FAULTS)
    for seed in range(400):
        try:
            run_seed(seed, voters=voters, faults=frozenset([fault]), profile="aggressive")
        except InvariantViolation as e:
            assert any(s in str(e) for s in EXPECTED[fault]), str(e)
            return
    pytest.fail(f"no seed in 0..399 caught {fault}")
