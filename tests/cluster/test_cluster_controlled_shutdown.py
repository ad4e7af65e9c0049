"""Controlled shutdown on a reference cluster, as Kafka's controller runs it (BrokerHeartbeatManager,
ReplicationControlManager.handleBrokerInControlledShutdown): a broker that asks to shut down while it leads
partitions stays registered and unfenced, in controlled shutdown (no longer eligible as leader or ISR member); its
leaderships move at once; the shutdown is granted only once every active broker has applied the metadata past that
point, and only then is it fenced and does the process exit."""
from __future__ import annotations

import asyncio
import signal
import time

from kafka.protocol.metadata import MetadataRequest
from kct_cluster_helpers import create_topic, wait_for

from reference_broker.client.protocol import Connection


async def _metadata(addr: str, topic: str):
    host, port = addr.rsplit(":", 1)
    async with await Connection.connect(host, int(port), timeout=5.0) as conn:
        return (await conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                   allow_auto_topic_creation=False), 4, timeout=10)).body


def view(addr: str, topic: str) -> tuple[list[int], int, list[int]]:
    """(listed brokers, leader, ISR) of partition 0 as one broker's Metadata answers it."""
    body = asyncio.run(_metadata(addr, topic))
    p = body.topics[0].partitions[0]
    return sorted(b.node_id for b in body.brokers), p.leader_id, sorted(p.isr_nodes)


def test_controlled_shutdown_waits_until_brokers_applied_it(make_cluster) -> None:
    """With a follower paused (it applies no metadata), SIGTERM the leader: it stays listed and running but leads
    nothing and leaves the ISR; once the follower is back the shutdown is granted, it is fenced and exits.
    (Before the fix it was fenced at once and exited, whatever the other brokers had applied.)"""
    cluster = make_cluster(**{"broker.session.timeout.ms": "8000"})
    addrs = dict(enumerate(cluster.bootstrap.split(",")))
    create_topic(cluster.bootstrap, "cs", 1, 3)
    (_brokers, leader, isr), _ = wait_for(lambda: view(addrs[0], "cs"), lambda v: len(v[2]) == 3, 20, "a full ISR")
    paused, observer = (b for b in sorted(addrs) if b != leader)
    cluster.pause(paused)
    try:
        cluster.nodes[leader].signal(signal.SIGTERM)
        during, _ = wait_for(lambda: view(addrs[observer], "cs"), lambda v: v[1] != leader, 5, "the leadership to move")
        time.sleep(1.0)                        # the shutdown must not be granted while the paused broker lags
        during_later = view(addrs[observer], "cs")
        still_running = cluster.nodes[leader].alive()
    finally:
        cluster.resume(paused)
    assert leader in during[0] and leader in during_later[0] and leader not in during_later[2] and still_running, (
        f"broker {leader} in controlled shutdown while broker {paused} is paused: Metadata (brokers, leader, ISR) "
        f"{during} then {during_later}, process running: {still_running}; Kafka keeps it registered and unfenced, "
        f"out of leadership and ISR, until every active broker applied the change")
    wait_for(lambda: cluster.nodes[leader].returncode, lambda rc: rc is not None, 15, f"broker {leader} to exit")
    after, _ = wait_for(lambda: view(addrs[observer], "cs"), lambda v: leader not in v[0], 10,
                        f"broker {leader} to be fenced")
    assert cluster.nodes[leader].returncode == 0, cluster.nodes[leader].log_tail()
