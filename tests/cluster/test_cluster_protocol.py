"""What clients see of leadership on the wire: Metadata (leader, epoch, replicas, ISR, offline replicas),
NOT_LEADER_OR_FOLLOWER with the current-leader hint and its endpoint on a follower (Fetch v16+, KIP-951),
FENCED/UNKNOWN_LEADER_EPOCH by epoch, and OffsetForLeaderEpoch after a failover (KIP-101/KIP-279/KIP-320)."""
from __future__ import annotations

import asyncio

from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kct_cluster_helpers import create_topic, partition_state, wait_for

from reference_broker.client.protocol import Connection

NOT_LEADER, FENCED, UNKNOWN_EPOCH = 6, 74, 75


async def _call(cluster, node: int, req, version: int):
    async with await Connection.connect("127.0.0.1", cluster.ports[node], timeout=5) as c:
        return (await c.request(req, version, timeout=10)).body


def _fetch(topic: str, epoch: int, topic_id: object = None) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=topic_id, partitions=[
                            T.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                             last_fetched_epoch=-1, log_start_offset=-1,
                                             partition_max_bytes=1 << 20)])], forgotten_topics_data=[],
                        rack_id="")


def test_leadership_as_clients_see_it(make_cluster) -> None:
    cluster = make_cluster()
    create_topic(cluster.bootstrap, "w", 1, 3)
    leader, replicas, isr = partition_state(cluster.bootstrap, "w")
    follower = next(r for r in replicas if r != leader)

    async def scenario() -> None:
        md = await _call(cluster, follower, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name="w")], allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            12)
        p = md.topics[0].partitions[0]
        assert (p.leader_id, p.leader_epoch, sorted(p.isr_nodes), p.offline_replicas) == (leader, 0, [0, 1, 2], [])
        r = (await _call(cluster, follower, _fetch("w", -1), 12)).responses[0].partitions[0]
        assert (r.error_code, r.current_leader) == (NOT_LEADER, None), "v12-v15: no hint (KafkaApis: v16+ only)"
        a = await _call(cluster, follower, _fetch("w", -1, md.topics[0].topic_id), 16)
        r = a.responses[0].partitions[0]
        assert r.error_code == NOT_LEADER and (r.current_leader.leader_id, r.current_leader.leader_epoch) == (
            leader, 0), r
        assert [(e.node_id, e.port) for e in a.node_endpoints] == [(leader, cluster.ports[leader])], a
        r = (await _call(cluster, leader, _fetch("w", 5), 12)).responses[0].partitions[0]
        assert r.error_code == UNKNOWN_EPOCH, r
    asyncio.run(scenario())

    cluster.kill(leader)
    (new, _, _), _ = wait_for(lambda: partition_state(cluster.bootstrap, "w"),
                              lambda s: s[0] >= 0 and s[0] != leader, 30, "a new leader")

    async def after() -> None:
        md = await _call(cluster, new, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name="w")], allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            12)
        p = md.topics[0].partitions[0]
        assert p.leader_id == new and p.leader_epoch == 1 and leader not in p.isr_nodes, p
        assert p.offline_replicas == [leader], f"the killed broker is an offline replica: {p}"
        a = await _call(cluster, new, _fetch("w", 0, md.topics[0].topic_id), 16)
        r = a.responses[0].partitions[0]
        assert r.error_code == FENCED and (r.current_leader.leader_id, r.current_leader.leader_epoch) == (new, 1), r
        assert [(e.node_id, e.port) for e in a.node_endpoints] == [(new, cluster.ports[new])], a
        T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        o = await _call(cluster, new, OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic="w", partitions=[
            T.OffsetForLeaderPartition(partition=0, current_leader_epoch=1, leader_epoch=0)])]), 4)
        e = o.topics[0].partitions[0]
        assert (e.error_code, e.leader_epoch, e.end_offset) == (0, 0, 0), e
    asyncio.run(after())
