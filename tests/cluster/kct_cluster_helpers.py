"""Small synchronous helpers over real clients: partition state from Metadata, waiting with a deadline."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

from conformance.cluster import await_new_leader, election_bound_s, state
from conformance.properties.ops import PartitionMeta
from conformance.wire import Wire

# Short failure detection so kill/pause scenarios finish in seconds; everything else is Kafka's default.
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}

T = TypeVar("T")


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    a = admin(bootstrap)          # kept alive until the future resolves (a dropped handle cancels it)
    a.create_topics([NewTopic(name, partitions, rf, config=dict(configs))])[name].result(30)


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) as Metadata reports them now."""
    a = admin(bootstrap)
    md = a.list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[partition]
    return p.leader, list(p.replicas), sorted(p.isrs)


def wait_for(probe: Callable[[], T], ok: Callable[[T], bool], timeout: float, what: str,
             interval: float = 0.1) -> tuple[T, float]:
    """Poll ``probe`` until ``ok``; returns (value, seconds waited) or fails with the last value seen."""
    t0 = time.monotonic()
    last: T | None = None
    while time.monotonic() - t0 < timeout:
        try:
            last = probe()
            if ok(last):
                return last, time.monotonic() - t0
        except Exception as e:  # noqa: BLE001 - a broker being killed answers with errors for a while
            last = e  # type: ignore[assignment]
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}")


def move_leadership(cluster, topic: str, how: str) -> tuple[int, int]:
    """End the current leader's epoch: ``pause`` it until the controller fenced it and elected another leader, then
    resume it; or ``kill`` it and restart it. Returns (old leader, new leader); the old one runs again, not
    necessarily back in the ISR yet. The new leader serves the partition when this returns (new_leader)."""
    old, _, _ = partition_state(cluster.bootstrap, topic)
    before = leader_state(cluster, topic, old)
    (getattr(cluster, how))(old)
    try:
        new = new_leader(cluster, topic, before, down={old}).leader
    finally:
        if how == "pause":
            cluster.resume(old)
        else:
            cluster.restart(old)
    return old, new


class Wires:
    """One Wire per broker of a reference cluster, opened on demand and reopened after a failure."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.wires: dict[int, Wire] = {}

    async def to(self, node: int) -> Wire:
        w = self.wires.get(node)
        if w is None or w.conn.closed:
            w = self.wires[node] = await Wire.connect(f"127.0.0.1:{self.cluster.ports[node]}")
        return w

    async def drop(self, node: int) -> None:
        w = self.wires.pop(node, None)
        if w is not None:
            with contextlib.suppress(Exception):   # the broker was killed
                await w.close()

    async def close(self) -> None:
        for node in list(self.wires):
            await self.drop(node)


async def await_leader(cluster, nodes, topic: str, before: PartitionMeta, *, among: list[int] | None = None,
                       down: set[int] = frozenset()) -> tuple[PartitionMeta, Wire]:
    """The one wait the suites use (conformance.cluster.await_new_leader) on a reference cluster: the election
    that ended ``before``'s epoch is visible on the new leader itself (its Metadata and a Fetch pinned to its epoch),
    bounded from the cluster's settings. ``down``: brokers paused or killed (never asked)."""
    others = [b for b in cluster.broker_ids if b not in down and (b != before.leader or b in (among or []))]
    st, w, _ = await await_new_leader(nodes.to, nodes.drop, lambda: others, topic, before, among=among,
                                      avoid=lambda: set(down), bound_s=election_bound_s(cluster.config))
    return st, w


def leader_state(cluster, topic: str, via: int) -> PartitionMeta:
    """Partition 0's Metadata (with its leader epoch) as broker ``via`` answers it."""
    async def ask() -> PartitionMeta:
        nodes = Wires(cluster)
        try:
            return await state(await nodes.to(via), topic)
        finally:
            await nodes.close()
    return asyncio.run(ask())


def new_leader(cluster, topic: str, before: PartitionMeta, *, among: list[int] | None = None,
               down: set[int] = frozenset()) -> PartitionMeta:
    """:func:`await_leader` for the synchronous tests: the new leader's own view, once it serves the partition."""
    async def wait() -> PartitionMeta:
        nodes = Wires(cluster)
        try:
            return (await await_leader(cluster, nodes, topic, before, among=among, down=down))[0]
        finally:
            await nodes.close()
    return asyncio.run(wait())
