"""Rebalance time after a member leaves or dies, for any target (reference client GroupConsumer).

For n members (range assignor, 2 partitions per member) in one group: one non-leader member leaves (close():
LeaveGroup) or, in a fresh group, is killed (abort(): sockets closed, no LeaveGroup, so only the session timeout
tells the coordinator). Measured from that moment:
- ``rebalance_ms``: the coordinator has started the rebalance (DescribeGroups shows a state other than Stable);
- ``stable_ms``: the group is Stable again with one member fewer, seen by DescribeGroups polled every 5 ms;
- ``assigned_ms``: every remaining member has its new assignment (on_assign) and together they own every partition.
Also ``formed_ms``: time for the whole group to form in the first place.

Member settings: session.timeout.ms 3000, heartbeat.interval.ms 500, max.poll.interval.ms 30000 (the rebalance
timeout). Brokers that take settings run with BROKER_SETTINGS (group.min.session.timeout.ms=1000,
group.initial.rebalance.delay.ms=100: Kafka's names, so the reference broker and Apache Kafka get the same).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import kafka.errors as Errors
from kafka.protocol.admin import DescribeGroupsRequest

from reference_broker.client.admin import Admin, NewTopic
from reference_broker.client.group import GroupConsumer
from reference_broker.client.protocol import Connection
from reference_broker.client.types import TopicPartition

SESSION_MS = 3000
HEARTBEAT_MS = 500
MAX_POLL_MS = 30000
# As --target-config entries: the same for the reference broker and Apache Kafka (Tansu has no such settings).
BROKER_SETTINGS = {"kafka.group.min.session.timeout.ms": "1000", "kafka.group.initial.rebalance.delay.ms": "100"}
SCENARIO_TIMEOUT = 40.0


class BenchMember:
    """A member polling in its own task; records when it last got an assignment."""

    def __init__(self, bootstrap: str, group: str, topic: str, i: int) -> None:
        self.consumer = GroupConsumer(
            bootstrap, group, client_id=f"m{i:02d}", session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=MAX_POLL_MS, enable_auto_commit=False,
            auto_offset_reset="latest", fetch_max_wait_ms=500)
        self.topic = topic
        self.assigned: set[TopicPartition] = set()
        self.assigned_at = 0
        self.stop = asyncio.Event()
        self.task: asyncio.Task | None = None

    def on_assign(self, tps: set[TopicPartition]) -> None:
        self.assigned, self.assigned_at = set(tps), time.monotonic_ns()

    def on_revoke(self, tps: set[TopicPartition]) -> None:
        self.assigned = set()

    async def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        while not self.stop.is_set():
            await self.consumer.poll(100)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def halt(self) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task


def covered(members: list[BenchMember], partitions: int) -> bool:
    owned = [tp for m in members for tp in m.assigned]
    return len(owned) == partitions == len(set(owned)) and all(m.consumer.stable for m in members)


async def wait_for(pred: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise TimeoutError(what)
        await asyncio.sleep(0.005)


async def describe_stable(conn: Connection, group: str, members: int, since: int, out: dict) -> None:
    """Poll DescribeGroups every 5 ms: when the group first leaves Stable, then when it is Stable again with
    ``members`` members (a Stable group seen before any rebalance state is the old generation, not the new)."""
    v = conn.versions[15]
    while True:
        resp = await conn.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), v)
        g = resp.body.groups[0]
        if g.group_state != "Stable" and "rebalance_ms" not in out:
            out["rebalance_ms"] = (resp.received_ns - since) / 1e6
        if g.group_state == "Stable" and len(g.members) == members and "rebalance_ms" in out:
            out["stable_ms"] = (resp.received_ns - since) / 1e6
            return
        await asyncio.sleep(0.005)


async def _until_leaders_serve(admin: Admin, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until ListOffsets answers for every partition. Metadata may name a leader before that leader serves the
    partition (Kafka's KRaft broker updates its metadata cache before ReplicaManager becomes leader), and the
    reference client's offset reset does not retry NOT_LEADER_OR_FOLLOWER as the Java consumer does: a member
    would die before the group formed (seen on Kafka with 20 partitions)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    end = time.monotonic() + timeout
    while True:
        try:
            await admin.latest_offsets(tps)
            return
        except Errors.KafkaError as exc:
            if not getattr(exc, "retriable", False) or time.monotonic() > end:
                raise
        await asyncio.sleep(0.05)


async def scenario(bootstrap: str, n: int, event: str) -> dict[str, Any]:
    """n members form a group, one non-leader leaves or is killed (`event`); the figures in ms, or `error`."""
    partitions = 2 * n
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    group = f"bg-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions)])
        await _until_leaders_serve(admin, topic, partitions)
    members = [BenchMember(bootstrap, group, topic, i) for i in range(n)]
    t_start = time.monotonic()
    for m in members:
        m.start()
    result: dict[str, Any] = {"members": n, "event": event, "partitions": partitions}
    conn: Connection | None = None
    try:
        await wait_for(lambda: covered(members, partitions), SCENARIO_TIMEOUT, f"{n} members forming")
        result["formed_ms"] = (time.monotonic() - t_start) * 1000
        leader = members[0].consumer.leader_id
        victim = next(m for m in reversed(members) if m.consumer.member_id != leader)
        rest = [m for m in members if m is not victim]
        _, host, port = members[0].consumer.coordinator or (0, "", 0)
        conn = await Connection.connect(host, port)
        await conn.api_versions()
        gen = members[0].consumer.generation_id
        await victim.halt()
        t0 = time.monotonic_ns()
        if event == "leave":
            await victim.consumer.close()
        else:
            await victim.consumer.abort()
        described: dict[str, float] = {}
        watcher = asyncio.get_running_loop().create_task(describe_stable(conn, group, n - 1, t0, described))
        await wait_for(lambda: covered(rest, partitions) and all(m.consumer.generation_id > gen for m in rest),
                       SCENARIO_TIMEOUT, f"{n - 1} members taking over after {event}")
        result["assigned_ms"] = (max(m.assigned_at for m in rest) - t0) / 1e6
        try:
            await asyncio.wait_for(watcher, 5)
            result["stable_ms"] = described.get("stable_ms")
            result["rebalance_ms"] = described.get("rebalance_ms")
        except TimeoutError:
            result["stable_ms"] = None  # DescribeGroups never showed Stable with n-1 members
    except TimeoutError as exc:
        states: dict[str, int] = {}
        for m in members:
            key = f"gen={m.consumer.generation_id} stable={m.consumer.stable} parts={len(m.assigned)}"
            states[key] = states.get(key, 0) + 1
        result["error"] = f"timeout: {exc}; member states {states}"
    finally:
        for m in members:
            m.stop.set()
        await asyncio.gather(*(m.task for m in members if m.task), return_exceptions=True)
        await asyncio.gather(*(m.consumer.abort() for m in members), return_exceptions=True)
        if conn is not None:
            await conn.close()
    return result


def rebalances(bootstrap: str, sizes: list[int], events: tuple[str, ...] = ("leave", "kill"),
               log: Any = None) -> list[dict[str, Any]]:
    """One scenario per (size, event), each on a fresh topic and group; the rows in that order."""
    rows = []
    for n in sizes:
        for event in events:
            r = asyncio.run(scenario(bootstrap, n, event))
            rows.append(r)
            if log is not None:
                log(r)
    return rows
