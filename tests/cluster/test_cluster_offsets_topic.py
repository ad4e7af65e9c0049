"""``__consumer_offsets`` on a reference cluster: how it is created, and when committed state becomes visible."""
from __future__ import annotations

import asyncio
import time

from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kct_cluster_helpers import wait_for

from reference_broker.client.protocol import Connection, ConnectionClosedError

OFFSETS = "__consumer_offsets"


async def _ask(addr: str, request, version: int):
    host, port = addr.rsplit(":", 1)
    async with await Connection.connect(host, int(port), timeout=5.0) as conn:
        return (await conn.request(request, version, timeout=15)).body


def find_coordinator(addr: str, group: str) -> tuple[int, int]:
    """(error, node id) from FindCoordinator v3 to one broker."""
    body = asyncio.run(_ask(addr, FindCoordinatorRequest(key=group, key_type=0), 3))
    return body.error_code, body.node_id


def offsets_topic(addr: str) -> tuple[list[int], list[list[int]]] | None:
    """(live broker ids, replicas of each __consumer_offsets partition), or None while the topic does not exist."""
    body = asyncio.run(_ask(addr, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS)],
                                                  allow_auto_topic_creation=False), 4))
    t = body.topics[0]
    if t.error_code:
        return None
    return sorted(b.node_id for b in body.brokers), [list(p.replica_nodes) for p in t.partitions]


def test_offsets_topic_gets_its_replication_factor_while_a_broker_is_down(make_cluster) -> None:
    """Kafka creates __consumer_offsets with offsets.topic.replication.factor (AutoTopicCreationManager.
    creatableTopic), placing replicas on fenced brokers too when the live ones are too few (StripedReplicaPlacer;
    leaders only on live ones): with broker 2 killed and fenced, the topic still gets 3 replicas and a
    coordinator. (Seen on Apache Kafka 4.4.0, 3 nodes, one killed: RF 3. Before the fix: RF 2, for good.)"""
    cluster = make_cluster(**{"offsets.topic.replication.factor": "3"})
    first = cluster.bootstrap.split(",")[0]
    cluster.kill(2)
    wait_for(lambda: asyncio.run(_ask(first, MetadataRequest(topics=[]), 1)),
             lambda b: len(b.brokers) == 2, 20, "broker 2 to be fenced")
    wait_for(lambda: find_coordinator(first, "early-group"), lambda r: r[0] == 0, 20, "a coordinator")
    brokers, replicas = offsets_topic(first)
    assert brokers == [0, 1] and replicas and all(sorted(r) == [0, 1, 2] for r in replicas), (brokers, replicas)


def test_offsets_topic_is_not_created_while_too_few_brokers_are_registered(make_cluster) -> None:
    """With fewer registered brokers than offsets.topic.replication.factor the controller refuses the topic
    (INVALID_REPLICATION_FACTOR) and FindCoordinator answers COORDINATOR_NOT_AVAILABLE: no under-replicated
    offsets topic. (Before the fix: created with RF 2.)"""
    cluster = make_cluster(2, **{"offsets.topic.replication.factor": "3"})
    first = cluster.bootstrap.split(",")[0]
    err, _node = find_coordinator(first, "g")
    assert err == 15 and offsets_topic(first) is None, (err, offsets_topic(first))


# -- committed state is visible at the offsets partition's HW --------------------------------------------------

# A paused follower keeps the offsets partition's HW still: it stays in the ISR (long lag time) and registered (long
# session), so nothing the coordinator appends can commit; commit waits end after offsets.commit.timeout.ms.
STALLED = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1",
           "replica.lag.time.max.ms": "30000", "broker.session.timeout.ms": "30000",
           "offsets.commit.timeout.ms": "1500"}




def test_offsets_are_served_once_committed_and_failed_writes_are_not(make_cluster) -> None:
    """Kafka's group coordinator serves committed state at the HW of the offsets partition (CoordinatorRuntime reads
    at the last committed offset) and answers a write once the HW passed it: with the HW held by a paused in-sync
    follower, a commit times out (COORDINATOR_NOT_AVAILABLE) and OffsetFetch keeps serving the previous offset;
    require_stable waits and answers NOT_COORDINATOR; DeleteGroups and the leader's SyncGroup (the generation
    record) time out too. Once the follower is back the HW passes the writes and they become visible.
    (Before the fix OffsetFetch served the timed-out offset at once, DeleteGroups and SyncGroup answered NONE.)"""
    from kafka.protocol.admin import DeleteGroupsRequest
    from kafka.protocol.consumer import (
        JoinGroupRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        SyncGroupRequest,
    )

    cluster = make_cluster(**STALLED)
    boot = cluster.bootstrap
    addrs = boot.split(",")
    from kct_cluster_helpers import create_topic
    create_topic(boot, "t", 1, 3)
    wait_for(lambda: find_coordinator(addrs[0], "g"), lambda r: r[0] == 0, 30, "a coordinator")
    coord = find_coordinator(addrs[0], "g")[1]
    _brokers, replicas = offsets_topic(addrs[0])
    follower = next(r for r in replicas[0] if r != coord)

    def commit_req(offset: int):
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        return OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                                   topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                                       partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                       committed_metadata="")])])

    def fetch_req(stable: bool = False):
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        return OffsetFetchRequest(group_id="g", topics=[T(name="t", partition_indexes=[0])], require_stable=stable)

    async def ask(request, version: int):
        return await _ask(addrs[coord], request, version)

    async def committed(stable: bool = False) -> tuple[int, int]:
        body = await ask(fetch_req(stable), 7)
        return body.error_code, (body.topics[0].partitions[0].committed_offset if body.topics else None)

    async def scenario() -> dict:
        seen = {}
        seen["first commit"] = (await ask(commit_req(5), 8)).topics[0].partitions[0].error_code
        seen["first fetch"] = await committed()
        cluster.pause(follower)
        try:
            try:
                seen["stalled commit"] = (await ask(commit_req(9), 8)).topics[0].partitions[0].error_code
            except ConnectionClosedError as e:     # (before the fix: a failed commit closed the connection)
                seen["stalled commit"] = f"connection closed: {e}"
            seen["fetch after it"] = await committed()
            seen["require_stable fetch"] = await committed(stable=True)
        finally:
            cluster.resume(follower)
        # The follower is back: the HW passes the timed-out commit, which was appended after all.
        seen["fetch once resumed"], _ = await eventually(committed, lambda r: r == (0, 9), 20)
        cluster.pause(follower)
        try:
            T = OffsetDeleteRequest.OffsetDeleteRequestTopic
            body = await ask(OffsetDeleteRequest(group_id="g", topics=[T(name="t", partitions=[
                T.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
            seen["offset delete"] = body.error_code
            seen["fetch after offset delete"] = await committed()
        finally:
            cluster.resume(follower)
        seen["fetch once resumed (offset deleted)"], _ = await eventually(committed, lambda r: r == (0, -1), 20)
        seen["commit again"] = (await ask(commit_req(9), 8)).topics[0].partitions[0].error_code
        cluster.pause(follower)
        try:
            seen["delete group"] = (await ask(DeleteGroupsRequest(groups_names=["g"]), 2)).results[0].error_code
            seen["fetch after delete"] = await committed()
            P = JoinGroupRequest.JoinGroupRequestProtocol
            joined = await ask(JoinGroupRequest(group_id="g2", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                                member_id="", group_instance_id=None, protocol_type="consumer",
                                                protocols=[P(name="range", metadata=b"")]), 3)
            synced = await ask(SyncGroupRequest(group_id="g2", generation_id=joined.generation_id,
                                                member_id=joined.member_id, group_instance_id=None,
                                                assignments=[]), 3)
            seen["join, sync while stalled"] = (joined.error_code, synced.error_code)
        finally:
            cluster.resume(follower)
        seen["fetch once resumed again"], _ = await eventually(committed, lambda r: r == (0, -1), 20)
        return seen

    seen = asyncio.run(scenario())
    # What Apache Kafka 4.4.0 answers to the same requests (3 nodes, the same settings, a follower SIGSTOPped).
    want = {"first commit": 0, "first fetch": (0, 5), "stalled commit": 15, "fetch after it": (0, 5),
            "require_stable fetch": (16, None), "fetch once resumed": (0, 9), "offset delete": 15,
            "fetch after offset delete": (0, 9), "fetch once resumed (offset deleted)": (0, -1), "commit again": 0,
            "delete group": 15,
            "fetch after delete": (0, 9), "join, sync while stalled": (0, 15), "fetch once resumed again": (0, -1)}
    assert seen == want, f"with the offsets partition's HW held (seen vs Kafka's): {seen} vs {want}"


async def eventually(probe, ok, timeout_s: float):
    """Call ``probe`` until ``ok`` holds or the time is up: (last value, seconds waited)."""
    t0 = time.monotonic()
    value = await probe()
    while not ok(value) and time.monotonic() - t0 < timeout_s:
        await asyncio.sleep(0.1)
        value = await probe()
    return value, time.monotonic() - t0
