"""``__consumer_offsets`` on a reference cluster: how it is created, and when committed state becomes visible."""
from __future__ import annotations

import asyncio

from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kct_cluster_helpers import wait_for

from reference_broker.client.protocol import Connection

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


def test_offsets_topic_waits_for_its_replication_factor(make_cluster) -> None:
    """Kafka creates __consumer_offsets with offsets.topic.replication.factor or not at all
    (AutoTopicCreationManager.creatableTopic; the controller refuses a factor above the live brokers): a lookup
    while a broker is down is COORDINATOR_NOT_AVAILABLE, and once it is back the topic has the full factor. (Before
    the fix the early lookup created it with RF 2, for good.)"""
    cluster = make_cluster(**{"offsets.topic.replication.factor": "3"})
    first = cluster.bootstrap.split(",")[0]
    cluster.kill(2)
    wait_for(lambda: asyncio.run(_ask(first, MetadataRequest(topics=[]), 1)),
             lambda b: len(b.brokers) == 2, 20, "broker 2 to be fenced")
    err, _node = find_coordinator(first, "early-group")
    assert err == 15, f"FindCoordinator with 2 of 3 brokers live: error {err}, want COORDINATOR_NOT_AVAILABLE (15)"
    assert offsets_topic(first) is None, f"{OFFSETS} was created with fewer replicas: {offsets_topic(first)}"
    cluster.restart(2)
    wait_for(lambda: find_coordinator(first, "early-group"), lambda r: r[0] == 0, 30, "a coordinator")
    brokers, replicas = offsets_topic(first)
    assert brokers == [0, 1, 2] and replicas and all(len(r) == 3 for r in replicas), (brokers, replicas)
