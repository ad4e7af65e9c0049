"""The KRaft controller quorum: one active controller elected by Raft among the voters, and the cluster's metadata
changes continuing after it dies or freezes — checked from outside, through DescribeQuorum (KIP-595) and what a
client sees (CreateTopics, Metadata).

Needs a target with at least 3 controller voters and process faults on them (``kill_broker`` / ``pause_broker``
address controller node ids too): Kafka's default 3-node cluster (combined roles) or ``controllers=3``
(dedicated), the reference cluster once it runs a quorum; elsewhere the checks skip naming what is missing.
Every wait is bounded by :func:`conformance.quorum.failover_bound_s` (the quorum's settings) or
:meth:`conformance.cluster.Cluster.election_bound_s` (the brokers' settings), never a fixed sleep.
"""
from __future__ import annotations

from typing import Any

import pytest

from conformance import quorum as Q
from conformance.cluster import Cluster, eventually, state
from conformance.evidence import Evidence
from conformance.properties.ops import NONE
from conformance.rules import rule
from conformance.wire import unique_name
from fixtures.target import Target

SUITE = "quorum"

rule("QUORUM-DESCRIBE", "DescribeQuorum asked of any broker answers for __cluster_metadata-0: one leader that is "
     "one of the controller voters, at a leader epoch >= 1; the voter set is the configured one; the leader's log "
     "end offset is at least the high watermark; every broker agrees on leader and epoch at rest; every broker that "
     "is not a voter fetches as an observer; v2 names each voter's listeners",
     "KIP-595 (DescribeQuorum); org.apache.kafka.raft.LeaderState.describeQuorum (voters, observers, log end "
     "offsets); KafkaApis.handleDescribeQuorumRequest (forwarded to the active controller); KIP-853 (v2 nodes)",
     SUITE)
rule("QUORUM-FAILOVER-KILL", "after the active controller is killed (SIGKILL) the remaining voters elect a new one "
     "at a higher epoch within the quorum's timeouts (fetch timeout, then an election)",
     "KIP-595: a follower that does not hear from the leader within controller.quorum.fetch.timeout.ms becomes a "
     "candidate (FollowerState.hasFetchTimeoutExpired → KafkaRaftClient.transitionToCandidate / prospective, "
     "KIP-996); QuorumState epochs only grow", SUITE)
rule("QUORUM-FAILOVER-PAUSE", "after the active controller freezes (SIGSTOP) a new one is elected at a higher "
     "epoch; once the old one runs again it follows the new leader (it is a voter that catches up to the high "
     "watermark) and the epoch DescribeQuorum reports never goes back",
     "KIP-595: a leader learns of a higher epoch from any Raft response and becomes a follower "
     "(KafkaRaftClient.maybeTransition); KIP-996 check-quorum: a leader that hears from no majority resigns",
     SUITE)
rule("QUORUM-METADATA-AFTER-FAILOVER", "after a controller failover the cluster's metadata keeps changing: a topic "
     "created through any broker gets live leaders for its partitions (within the brokers' fencing bound: a dead "
     "node not fenced yet may be placed and lead first), and a partition whose leader then dies gets a "
     "new leader from its ISR",
     "KIP-631: the new active controller replays the committed metadata log (QuorumController.renounce / claim: "
     "ReplicationControlManager, ClusterControlManager sessions) and resumes fencing and elections", SUITE)

QUORUM = pytest.mark.requires_capability("replication", "kill_broker", "pause_broker", "restart")


def _settings(target: Target) -> dict[str, Any]:
    return dict(target.config().get("settings", {}))


@pytest.fixture(autouse=True)
def three_voters(replicated_target: Target) -> None:
    """The quorum rules need 3 controller voters; the replicated target (conftest ``cluster``) may have fewer."""
    voters = replicated_target.controller_ids
    if len(voters) < 3:
        pytest.skip(f"target {replicated_target.name!r} has {len(voters)} controller voter(s) {voters}: the quorum "
                    "rules need 3 (kafka: brokers=3 or controllers=3; reference: controllers=3)")


async def _describe(c: Cluster) -> Q.QuorumView:
    """DescribeQuorum through a live broker; a broker that just lost its connection is dropped and another asked."""
    last: Exception | None = None
    for _ in range(3):
        w = await c.observer()
        try:
            return await Q.describe(w)
        except AssertionError as exc:       # TargetDiverged: connection closed (a node just died); ask another
            last = exc
            node = next((n for n, x in c.wires.items() if x is w), None)
            if node is not None:
                await c.drop(node)
    raise AssertionError(f"no live broker answered DescribeQuorum: {last}")


async def _at_rest(c: Cluster, voters: list[int]) -> Q.QuorumView:
    """Wait (bounded) for a quorum with a leader among the voters whose voters have all caught up."""
    q, _ = await eventually(lambda: _describe(c), lambda q: q.error == NONE and q.leader_id in voters and all(
        r.log_end_offset >= q.high_watermark >= 0 for r in q.voters.values()), Q.failover_bound_s(_settings(c.target)))
    return q


async def _new_leader(c: Cluster, before: Q.QuorumView, evidence: Evidence, what: str) -> Q.QuorumView:
    bound = Q.failover_bound_s(_settings(c.target))
    q, waited = await eventually(lambda: _describe(c), lambda q: q.error == NONE and q.leader_id not in
                                 (before.leader_id, -1) and q.leader_epoch > before.leader_epoch, bound)
    evidence.note(f"quorum after {what}", {"old": [before.leader_id, before.leader_epoch],
                                           "new": [q.leader_id, q.leader_epoch], "waited_s": round(waited, 1),
                                           "bound_s": round(bound, 1)})
    assert q.error == NONE and q.leader_id not in (before.leader_id, -1), (
        f"no new active controller {bound:.0f} s after the {what} of {before.leader_id} (epoch "
        f"{before.leader_epoch}): DescribeQuorum says leader {q.leader_id} at epoch {q.leader_epoch}, error {q.error}")
    assert q.leader_epoch > before.leader_epoch, (
        f"the new leader {q.leader_id} was elected at epoch {q.leader_epoch}, not above the old {before.leader_epoch}")
    return q


@QUORUM
@pytest.mark.rule("QUORUM-DESCRIBE")
async def test_describe_quorum_names_one_leader_among_the_voters(cluster: Cluster, evidence: Evidence) -> None:
    voters = sorted(cluster.target.controller_ids)
    q = await _at_rest(cluster, voters)
    evidence.note("quorum", {"leader": q.leader_id, "epoch": q.leader_epoch, "hw": q.high_watermark,
                             "voters": sorted(q.voters), "observers": sorted(q.observers), "v": q.version})
    assert q.error == NONE, f"DescribeQuorum answered error {q.error}"
    assert sorted(q.voters) == voters, f"voters {sorted(q.voters)}, configured {voters}"
    assert q.leader_id in voters and q.leader_epoch >= 1, f"leader {q.leader_id} at epoch {q.leader_epoch}"
    assert q.leader is not None and q.leader.log_end_offset >= q.high_watermark >= 0, (
        f"the leader's log end {q.leader and q.leader.log_end_offset} is below the high watermark {q.high_watermark}")
    for b in sorted(cluster.brokers):          # a broker forwards to the active controller: all agree
        other = await Q.describe(await cluster.to(b))
        agrees = (other.leader_id, other.leader_epoch) == (q.leader_id, q.leader_epoch)
        assert agrees or other.leader_epoch > q.leader_epoch, (
            f"broker {b} says leader {other.leader_id} at epoch {other.leader_epoch}; asked a moment before, "
            f"another broker said {q.leader_id} at epoch {q.leader_epoch}")
    non_voters = sorted(set(cluster.brokers) - set(voters))
    if non_voters:                               # dedicated controllers: brokers fetch the log as observers
        q2, _ = await eventually(lambda: _describe(cluster), lambda q: set(non_voters) <= set(q.observers),
                                 Q.failover_bound_s(_settings(cluster.target)))
        assert set(non_voters) <= set(q2.observers), f"brokers {non_voters} are not observers: {sorted(q2.observers)}"
    if q.version >= 2:
        missing = [v for v in voters if not any(port > 0 for _, _, port in q.nodes.get(v, []))]
        assert not missing, f"DescribeQuorum v2 names no listener for voters {missing}: {q.nodes}"


@QUORUM
@pytest.mark.rule("QUORUM-FAILOVER-KILL")
async def test_new_active_controller_after_kill(cluster: Cluster, evidence: Evidence) -> None:
    voters = sorted(cluster.target.controller_ids)
    before = await _at_rest(cluster, voters)
    await cluster.kill(before.leader_id)         # a combined node takes its broker down with it
    await _new_leader(cluster, before, evidence, "kill -9")


@QUORUM
@pytest.mark.rule("QUORUM-METADATA-AFTER-FAILOVER")
async def test_metadata_goes_on_after_controller_failover(cluster: Cluster, evidence: Evidence) -> None:
    voters = sorted(cluster.target.controller_ids)
    before = await _at_rest(cluster, voters)
    old = before.leader_id
    await cluster.kill(old)                      # a combined node takes its broker down with it
    await _new_leader(cluster, before, evidence, "kill -9")
    # Metadata goes on: a topic created now gets a leader for each partition (the new controller placed them).
    live = sorted(set(cluster.brokers) - cluster.killed)
    w = await cluster.observer()
    name = unique_name("quorum")
    rf = min(2, len(live))
    parts = 4                      # spread over the live brokers, so some partition is led by a non-controller
    code, message = await w.create_topic_code(name, parts, rf)
    assert code == NONE, f"CreateTopics after the controller failover answered {code}: {message}"
    # Kafka 4.4.0 places replicas on the killed node too until its session expires (the new controller gives every
    # registered broker a fresh session), so a partition may first be led by the dead node; a client retries until
    # the controller fences it and elects another: within the brokers' fencing bound.
    bound = await cluster.election_bound_s()

    async def leaders() -> list[int]:
        return [(await state(w, name, p)).leader for p in range(parts)]

    led, waited = await eventually(leaders, lambda ls: all(x in live for x in ls), bound)
    evidence.note("topic created after failover", {"leaders": led, "live": live, "waited_s": round(waited, 1)})
    assert all(x in live for x in led), (
        f"{bound:.0f} s after CreateTopics (answered NONE) the partitions of {name} are led by {led}; live brokers "
        f"{live}")
    # A partition whose leader then dies gets a new leader. The old controller comes back first: in combined mode
    # a second dead voter would leave no majority (2 of 3), which is the quorum's rule, not the one checked here.
    cluster.restart(old)
    active = (await _at_rest(cluster, voters)).leader_id
    sts = {}
    for p in range(parts):
        st, _ = await eventually(lambda p=p: state(w, name, p), lambda s: len(s.isr) == rf, bound)
        assert len(st.isr) == rf, f"{name}-{p} never had a full ISR after the failover: {st}"
        sts[p] = st
    candidates = [p for p, st in sts.items() if st.leader != active]
    if not candidates:
        pytest.skip(f"every partition of {name} is led by the active controller {active}: killing it would test a "
                    "second controller failover, not the partition election")
    p = candidates[0]
    st = sts[p]
    victim = st.leader
    await cluster.kill(victim)
    st2, _, waited = await cluster.new_leader(name, st, partition=p)
    evidence.note("partition election after failover", {"controller": active, "partition": p, "dead leader": victim,
                                                        "new leader": st2.leader, "waited_s": round(waited, 1)})
    assert st2.leader not in (victim, -1) and st2.leader_epoch > st.leader_epoch, (
        f"partition {name}-{p} got no new leader after its leader {victim} died (controller {active}): {st2}")


@QUORUM
@pytest.mark.rule("QUORUM-FAILOVER-PAUSE")
async def test_new_active_controller_after_pause_and_old_one_follows(cluster: Cluster, evidence: Evidence) -> None:
    voters = sorted(cluster.target.controller_ids)
    before = await _at_rest(cluster, voters)
    old = before.leader_id
    cluster.pause(old)
    after = await _new_leader(cluster, before, evidence, "SIGSTOP")
    cluster.resume(old)
    await cluster.drop(old)
    seen = [after.leader_epoch]

    async def probe() -> Q.QuorumView:
        q = await _describe(cluster)
        seen.append(q.leader_epoch)
        return q

    # The old leader runs again: it learns of the higher epoch and follows; it catches up to the high watermark.
    bound = Q.failover_bound_s(_settings(cluster.target))
    q, waited = await eventually(probe, lambda q: q.error == NONE and q.leader_id not in (old, -1) and old in
                                 q.voters and q.voters[old].log_end_offset >= q.high_watermark > 0, bound)
    evidence.note("old leader follows", {"old": old, "leader": [q.leader_id, q.leader_epoch],
                                         "old_leo": q.voters.get(old) and q.voters[old].log_end_offset,
                                         "hw": q.high_watermark, "epochs seen": seen, "waited_s": round(waited, 1)})
    assert seen == sorted(seen), f"DescribeQuorum's leader epoch went back: {seen}"
    assert q.leader_epoch >= after.leader_epoch
    assert old in q.voters and q.voters[old].log_end_offset >= q.high_watermark, (
        f"the resumed old leader {old} never caught up as a follower within {bound:.0f} s: its log end "
        f"{q.voters.get(old) and q.voters[old].log_end_offset}, high watermark {q.high_watermark}")
