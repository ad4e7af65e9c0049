"""Eligible leader replicas (KIP-966) and DescribeTopicPartitions, checked over the Kafka protocol.

Kafka 4.4.0 formats a cluster with ``eligible.leader.replicas.version`` finalized at 1 (ApiVersions v3+). With it the
controller (PartitionChangeBuilder) keeps the replicas that leave the ISR while the ISR is below the effective
min.insync.replicas as eligible leader replicas (ELR): they held every record acknowledged with acks=all, so one of
them may lead cleanly once the ISR is empty. DescribeTopicPartitions (key 75) shows ELR and LastKnownElr per
partition, a bounded number of partitions per answer with a cursor to the next.

The replication rules need three brokers that can be killed and restarted. On Kafka's 3-node target every broker
is also a controller voter, so a check keeps a majority of them running while the controller must act: it never
has two nodes down at once while it waits for a metadata change (the second one is restarted gracefully, a
controlled shutdown that the controller handles while that node still runs). The checks are skipped on a target
that does not finalize eligible.leader.replicas.version ≥ 1.
"""
from __future__ import annotations

from typing import Any

import pytest
from kafka import errors as E
from kafka.protocol.admin import DescribeTopicPartitionsRequest, UpdateFeaturesRequest
from kafka.protocol.metadata import ApiVersionsRequest

from conformance.cluster import Cluster, eventually
from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import NONE
from conformance.rules import rule
from conformance.wire import Wire, unique_name

SUITE = "elr"
ELR_FEATURE = "eligible.leader.replicas.version"

rule("ELR-SHRINK-BELOW-MIN-ISR", "a replica whose broker is fenced while the ISR is below min.insync.replicas leaves "
     "the ISR for the ELR (DescribeTopicPartitions eligible_leader_replicas); the leader keeps leading and "
     "LastKnownElr stays empty; once the replica is back in the ISR at min ISR the ELR is empty again",
     "KIP-966; org.apache.kafka.controller.PartitionChangeBuilder.maybePopulateTargetElr (ISR < min ISR: ELR = "
     "the old ISR and ELR less the target ISR; ISR >= min ISR: ELR and LastKnownElr cleared); "
     "ReplicationControlManager.handleBrokerFenced", SUITE)
rule("ELR-CLEAN-ELECTION", "when the ISR empties (its last member shut down cleanly), that member joins the ELR "
     "with the replicas fenced before it; once it restarts cleanly it keeps its ELR membership and is elected from "
     "the ELR: leader again with ISR = [it], the other ELR members still eligible, LastKnownElr empty, and every "
     "record acknowledged with acks=all readable",
     "KIP-966; PartitionChangeBuilder.isValidNewLeader (ISR empty: an ELR member may lead) and tryElection (ISR = "
     "the elected ELR member, removed from the ELR); ClusterControlManager.registerBroker (a matching "
     "previousBrokerEpoch is a clean shutdown: ELR kept); ReplicationControlManager.handleBrokerUnfenced", SUITE)
rule("DTP-PAGINATION", "DescribeTopicPartitions answers at most response_partition_limit partitions, topics in "
     "name order, and a next_cursor naming the first partition left out; following the cursors lists every "
     "partition once, in order; no next_cursor on the last page; a cursor whose topic is not in the request's "
     "list is INVALID_REQUEST; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION",
     "KIP-966; kafka.server.handlers.DescribeTopicPartitionsRequestHandler; "
     "KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse", SUITE)

rule("FEATURES-UPDATE", "eligible.leader.replicas.version is finalized at 1 or more and supported up to it "
     "(ApiVersions v4); UpdateFeatures lowering a finalized level with upgrade type UPGRADE fails the whole request "
     "with INVALID_UPDATE_VERSION, a safe downgrade with validate_only succeeds and changes nothing (v1 lists each "
     "feature with NONE, v2 answers without per-feature results)",
     "KIP-584, KIP-1022; org.apache.kafka.controller.FeatureControlManager.updateFeature (\"Can't downgrade the "
     "version of this feature without setting the upgrade type to either safe or unsafe downgrade.\"); "
     "QuorumController.updateFeatures (results only for v0-1)", SUITE)

pytestmark = pytest.mark.timeout(600)
REPL_KILL = pytest.mark.requires_capability("replication", "kill_broker", "restart")

Req = DescribeTopicPartitionsRequest


async def describe(w: Wire, topics: list[str], limit: int = 2000,
                   cursor: tuple[str, int] | None = None) -> Any:
    """One DescribeTopicPartitions answer (the body)."""
    req = Req(topics=[Req.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
              cursor=None if cursor is None else Req.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    return (await w.request("DescribeTopicPartitions", req)).body


async def partition(w: Wire, topic: str, index: int = 0) -> Any:
    body = await describe(w, [topic])
    t = body.topics[0]
    assert t.error_code == NONE, f"DescribeTopicPartitions {topic}: error {t.error_code}"
    return next(p for p in t.partitions if p.partition_index == index)


def view(p: Any) -> dict[str, Any]:
    return {"leader": p.leader_id, "epoch": p.leader_epoch, "isr": sorted(p.isr_nodes),
            "elr": sorted(p.eligible_leader_replicas or []), "last_known_elr": sorted(p.last_known_elr or [])}


def require_dtp(w: Wire) -> None:
    if not w.serves("DescribeTopicPartitions"):
        pytest.skip("the target does not serve DescribeTopicPartitions (KIP-966)")


def require_elr(w: Wire) -> None:
    require_dtp(w)
    level = w.conn.finalized_features.get(ELR_FEATURE, 0)
    if level < 1:
        pytest.skip(f"the target finalizes {ELR_FEATURE} {level} (ApiVersions): no eligible leader replicas")


async def dtp_state(c: Cluster, topic: str, avoid: set[int] | None = None) -> dict[str, Any]:
    return view(await partition(await c.observer(avoid), topic))


@REPL_KILL
@pytest.mark.rule("ELR-SHRINK-BELOW-MIN-ISR")
async def test_replica_leaving_below_min_isr_joins_the_elr(cluster: Cluster, evidence: Evidence) -> None:
    require_elr(cluster.wire)
    topic, st = await cluster.topic(3, {"min.insync.replicas": "3"})
    followers = [r for r in st.replicas if r != st.leader]
    ctl = cluster.target.active_controller()
    gone = next((r for r in followers if r != ctl), followers[0])   # a voter majority stays up (Kafka combined)
    bound = await cluster.election_bound_s()
    await cluster.kill(gone)
    seen, waited = await eventually(lambda: dtp_state(cluster, topic, {gone}), lambda s: gone not in s["isr"], bound)
    evidence.note("after the kill", {"killed": gone, "state": seen, "waited_s": round(waited, 1)})
    assert gone not in seen["isr"], f"broker {gone} killed: never left the ISR within {bound:.0f} s: {seen}"
    assert seen["elr"] == [gone] and seen["last_known_elr"] == [] and seen["leader"] == st.leader, (
        f"ISR {seen['isr']} is below min.insync.replicas 3: the replica {gone} that left it must be in the ELR, the "
        f"leader {st.leader} kept, LastKnownElr empty; DescribeTopicPartitions answered {seen}")
    cluster.restart(gone)
    back, waited = await eventually(lambda: dtp_state(cluster, topic), lambda s: len(s["isr"]) == 3, bound)
    evidence.note("after the restart", {"state": back, "waited_s": round(waited, 1)})
    assert len(back["isr"]) == 3 and back["elr"] == [] and back["last_known_elr"] == [], (
        f"broker {gone} restarted: back in the ISR at min ISR the ELR must be empty: {back}")


@REPL_KILL
@pytest.mark.rule("ELR-CLEAN-ELECTION")
async def test_clean_election_from_the_elr(cluster: Cluster, evidence: Evidence) -> None:
    require_elr(cluster.wire)
    topic, st = await cluster.topic(2, {"min.insync.replicas": "2"})
    leader_w = await cluster.to(st.leader)
    acked = []
    for i in range(5):
        err, base, _ = await ops.produce(leader_w, topic, 0, [f"acked-{i}".encode()], acks=-1)
        assert err == NONE, f"acks=all with the full ISR {st.isr}: {err}"
        acked.append((base, f"acked-{i}".encode()))
    (follower,) = [r for r in st.replicas if r != st.leader]
    bound = await cluster.election_bound_s()
    await cluster.kill(follower)
    seen, _ = await eventually(lambda: dtp_state(cluster, topic, {follower}), lambda s: s["elr"] == [follower],
                               bound)
    assert seen["elr"] == [follower] and seen["isr"] == [st.leader], (
        f"follower {follower} fenced with ISR below min ISR 2: ELR must be [{follower}]: {seen}")
    # The last ISR member shuts down cleanly and comes back: the ELR keeps it, and it is elected from there.
    cluster.restart(st.leader)
    await cluster.drop(st.leader)
    after, waited = await eventually(lambda: dtp_state(cluster, topic, {follower}),
                                     lambda s: s["leader"] == st.leader and s["epoch"] > seen["epoch"], bound)
    evidence.note("after the clean restart", {"leader": st.leader, "state": after, "waited_s": round(waited, 1)})
    assert after["leader"] == st.leader and after["isr"] == [st.leader], (
        f"broker {st.leader} (last ISR member, restarted cleanly) must lead again from the ELR with ISR "
        f"[{st.leader}] within {bound:.0f} s: {after}")
    assert after["elr"] == [follower] and after["last_known_elr"] == [], (
        f"after the election from the ELR the other member {follower} stays eligible and LastKnownElr is empty: "
        f"{after}")
    answers: list[tuple[int, int]] = []

    async def read() -> dict[int, bytes | None]:
        w = await cluster.to(st.leader)
        f = await ops.fetch(w, topic, 0, 0, max_wait_ms=10, min_bytes=0, current_leader_epoch=after["epoch"])
        answers.append((f.error, f.high_watermark))
        if f.error:
            await cluster.drop(st.leader)      # a connection from before the restart may be stale
        return dict(f.records)
    got, _ = await eventually(read, lambda g: all(g.get(o) == v for o, v in acked), bound)
    lost = [(o, v) for o, v in acked if got.get(o) != v]
    assert not lost, (f"acks=all records lost after the clean election from the ELR: {lost} (log: {got}; Fetch "
                      f"(error, HW) answers, first and last: {answers[:3]} ... {answers[-3:]})")


@pytest.mark.rule("DTP-PAGINATION")
async def test_describe_topic_partitions_pages(wire: Wire, evidence: Evidence) -> None:
    require_dtp(wire)
    base = unique_name("dtp")
    names = [f"{base}-a", f"{base}-b"]
    await wire.create_topic(names[1], partitions=3)
    await wire.create_topic(names[0], partitions=5)
    want = [(n, i) for n in names for i in range(5 if n == names[0] else 3)]
    got: list[tuple[str, int]] = []
    pages: list[tuple[int, Any]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(10):
        body = await describe(wire, list(reversed(names)), limit=2, cursor=cursor)
        page = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        assert all(t.error_code == NONE for t in body.topics), [(t.name, t.error_code) for t in body.topics]
        nc = body.next_cursor
        cursor = None if nc is None else (nc.topic_name, nc.partition_index)
        pages.append((len(page), cursor))
        got += page
        assert len(page) <= 2, f"response_partition_limit 2: a page of {len(page)} partitions: {page}"
        if cursor is None:
            break
        assert cursor not in got and cursor in want, f"next_cursor {cursor} after {got}"
    evidence.note("pages", pages)
    assert got == want, f"following the cursors must list every partition once, in name order: {got}"
    assert [n for n, _ in pages] == [2, 2, 2, 2], f"pages of 2 then none left: {pages}"
    bad = await describe(wire, [names[0]], cursor=(names[1], 0))
    assert [t.error_code for t in bad.topics] == [E.InvalidRequestError.errno], (
        f"a cursor topic outside the request's list is INVALID_REQUEST: {[(t.name, t.error_code) for t in bad.topics]}")
    unknown = await describe(wire, [f"{base}-none"])
    assert [(t.error_code, len(t.partitions)) for t in unknown.topics] == [(E.UnknownTopicOrPartitionError.errno, 0)]
    negative = await describe(wire, [names[0]], cursor=(names[0], -1))
    assert [t.error_code for t in negative.topics] == [E.InvalidRequestError.errno], "a cursor partition below 0"
    one = await describe(wire, [names[0]], limit=0)
    assert ([[p.partition_index for p in t.partitions] for t in one.topics] == [[0]]
            and (one.next_cursor.topic_name, one.next_cursor.partition_index) == (names[0], 1)), (
        "response_partition_limit 0 counts as 1 (Kafka: max(min(limit, broker limit), 1))")


async def update_features(w: Wire, version: int, feature: str, level: int, upgrade_type: int,
                          validate_only: bool) -> Any:
    F = UpdateFeaturesRequest.FeatureUpdateKey
    kw: dict[str, Any] = {"feature": feature, "max_version_level": level}
    if version == 0:
        kw["allow_downgrade"] = upgrade_type != 1
    else:
        kw["upgrade_type"] = upgrade_type
    req = UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=[F(**kw)],
                                **({"validate_only": validate_only} if version >= 1 else {}))
    return (await w.request("UpdateFeatures", req, version=version)).body


@pytest.mark.rule("FEATURES-UPDATE")
async def test_update_features_checks_the_downgrade(wire: Wire, evidence: Evidence) -> None:
    if not wire.serves("UpdateFeatures"):
        pytest.skip("the target does not serve UpdateFeatures (KIP-584)")
    level = wire.conn.finalized_features.get(ELR_FEATURE, 0)
    av = await wire.conn.submit(ApiVersionsRequest(client_software_name="kct", client_software_version="0"), 4)
    supported = {f.name: (f.min_version, f.max_version) for f in av.body.supported_features or []}
    evidence.note("features", {"finalized": dict(wire.conn.finalized_features), "supported": supported})
    assert level >= 1 and supported.get(ELR_FEATURE, (0, 0))[1] >= level, (
        f"{ELR_FEATURE}: finalized {level}, supported {supported.get(ELR_FEATURE)}; Kafka 4.4.0 finalizes 1")
    refused = await update_features(wire, 1, ELR_FEATURE, 0, 1, True)
    assert refused.error_code == E.InvalidUpdateVersionError.errno, (
        f"lowering {ELR_FEATURE} with upgrade type UPGRADE: {refused}")
    for version in (1, 2):
        ok = await update_features(wire, version, ELR_FEATURE, 0, 2, True)
        results = [(r.feature, r.error_code, r.error_message) for r in getattr(ok, "results", None) or []]
        assert ok.error_code == 0 and results == ([(ELR_FEATURE, 0, "NONE")] if version == 1 else []), (
            f"a validate-only safe downgrade (v{version}): {ok}")
    await wire.conn.api_versions()
    assert wire.conn.finalized_features.get(ELR_FEATURE, 0) == level, "validate_only must change nothing"
