"""Cluster facts a fault needs at the moment it starts (who leads a partition), read with a Metadata request.

Why here and not in the nemesis: the answer depends on the running cluster, not on the seed, so a schedule plans
"isolate the leader of topic/partition" and this resolves it when the fault starts. Requests go through the
target's bootstrap (on a proxied cluster: the client proxies), over the reference client stack.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, also when the calling thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    out: list[Any] = []

    def worker() -> None:
        try:
            out.append((True, asyncio.run(make())))  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            out.append((False, e))

    t = threading.Thread(target=worker, name="kafka-meta", daemon=True)
    t.start()
    t.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value


async def _describe(bootstrap: str, timeout: float) -> tuple[dict[str, Any], dict[int, str]]:
    """(topic metadata, broker id -> "host:port") of one Metadata answer."""
    from reference_broker.client import Admin

    async with Admin(bootstrap, request_timeout=timeout) as admin:
        topics = await asyncio.wait_for(admin.describe_topics(None), timeout)
        return topics, {b.node_id: f"{b.host}:{b.port}" for b in admin.cluster.brokers.values()}


def target_node(target: Any, reported: int, brokers: Mapping[int, str]) -> int:
    """The target's node id for a broker id a Metadata answer reported. The same id when the target has such a node
    (Kafka, the reference cluster); else the node that advertises the address Metadata gave for that id: Tansu
    0.6.0 calls every broker node 111 and names only itself, so "the leader" is the broker that answered, found by
    its advertised address. Unchanged when neither matches (the fault then fails, naming the id)."""
    if target is None or reported in getattr(target, "broker_ids", ()):
        return reported
    addr = brokers.get(reported)
    for nid, st in (target.status() if addr and hasattr(target, "status") else {}).items():
        if st.get("client") == addr:
            return nid
    return reported


def partition_replicas(bootstrap: str, topic: str, partition: int = 0, timeout: float = 5.0, target: Any = None
                       ) -> tuple[int, list[int]]:
    """(leader id, replica ids) of one partition from Metadata, as `target`'s node ids when given (target_node);
    LookupError when there is no such partition."""
    leader, replicas, _raw, _addr = partition_view(bootstrap, topic, partition, timeout, target)
    return leader, replicas


def partition_view(bootstrap: str, topic: str, partition: int = 0, timeout: float = 5.0, target: Any = None
                   ) -> tuple[int, list[int], int, str]:
    """partition_replicas plus the leader's id as Metadata names it and its address (for await_isr_alone)."""
    topics, brokers = run_sync(lambda: _describe(bootstrap, timeout))
    meta = topics.get(topic)
    if meta is None or meta.error_code or partition not in meta.partitions:
        raise LookupError(f"no partition {topic}-{partition} in Metadata")
    p = meta.partitions[partition]
    return (target_node(target, p.leader, brokers), [target_node(target, r, brokers) for r in p.replicas],
            p.leader, brokers.get(p.leader, ""))


# The leader each partition had when a leader-aware fault last looked: while its followers are stopped, a Metadata
# request may hang on a stopped broker, so kill-leader uses what stall-followers saw (the lossy schedule).
LAST_LEADER: dict[tuple[str, int], int] = {}


# The leader's own address as stall-followers saw it: while the followers are stopped, only it answers for sure.
LAST_LEADER_ADDR: dict[tuple[str, int], str] = {}


def await_isr_alone(address: str, topic: str, partition: int, leader_raw: int, timeout_s: float) -> bool:
    """Poll the leader itself until its Metadata shows the ISR shrunk to the leader alone; False at the timeout.
    Why: the lossy schedule must kill the leader only once it acknowledges writes by itself — a kill at a fixed
    time came before the shrink under load (seen: a Kafka lossy run with the Java client lost nothing, twice)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            topics, _ = run_sync(lambda: _describe(address, 2.0))
            p = topics[topic].partitions[partition]
            if tuple(p.isr) == (leader_raw,):
                return True
        except Exception:  # noqa: BLE001 - not answering yet: ask again
            pass
        time.sleep(0.2)
    return False


def partition_leader(bootstrap: str, topic: str | None, partition: int = 0, timeout: float = 5.0,
                     target: Any = None) -> tuple[str, int, int]:
    """(topic, partition, leader id) from Metadata, as `target`'s node id when given (target_node); `topic=None`
    picks the first non-internal topic by name.

    Raises LookupError when there is no such topic/partition or it has no leader (-1)."""
    topics, brokers = run_sync(lambda: _describe(bootstrap, timeout))
    if topic is None:
        names = sorted(n for n, t in topics.items() if not t.is_internal)
        if not names:
            raise LookupError("no topic to find a leader of")
        topic = names[0]
    meta = topics.get(topic)
    if meta is None or meta.error_code or partition not in meta.partitions:
        raise LookupError(f"no partition {topic}-{partition} in Metadata")
    leader = meta.partitions[partition].leader
    if leader < 0:
        raise LookupError(f"{topic}-{partition} has no leader")
    return topic, partition, target_node(target, leader, brokers)


async def _quorum_leader(bootstrap: str, timeout: float) -> int | None:
    from kafka.protocol.admin import DescribeQuorumRequest

    from reference_broker.client.protocol import Connection

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    conn = await Connection.connect(host, int(port), client_id="kct-chaos")
    try:
        await conn.api_versions()
        if 55 not in conn.broker_versions:
            return None
        T = DescribeQuorumRequest.TopicData
        req = DescribeQuorumRequest(topics=[T(topic_name="__cluster_metadata",
                                              partitions=[T.PartitionData(partition_index=0)])])
        r = await conn.request(req, version=min(conn.broker_versions[55][1], 2), timeout=timeout)
        part = r.body.topics[0].partitions[0] if r.body.topics and r.body.topics[0].partitions else None
        if r.body.error_code or part is None or part.error_code or part.leader_id < 0:
            return None
        return int(part.leader_id)
    finally:
        await conn.close()


def active_controller(bootstrap: str, timeout: float = 5.0) -> int | None:
    """The node id of the active controller, asked with DescribeQuorum (KIP-595; a KRaft broker forwards it to the
    quorum), or None where DescribeQuorum is not served (the reference cluster's single controller, Tansu)."""
    return run_sync(lambda: _quorum_leader(bootstrap, timeout))


def committed_floor(bootstrap: str, topic: str, partition: int) -> int | None:
    """The smallest offset of ``topic/partition`` committed by any consumer group (None: no group has one)."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=5000)
    try:
        tp = TopicPartition(topic, partition)
        found = []
        for group in sorted({g["group_id"] for g in admin.list_groups()}):
            meta = admin.list_group_offsets({group: [tp]}).get(group, {}).get(tp)
            if meta is not None and meta.offset >= 0:
                found.append(meta.offset)
        return min(found) if found else None
    finally:
        admin.close()
