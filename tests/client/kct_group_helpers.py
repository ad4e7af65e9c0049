"""Helpers for the consumer-group tests: a member that polls, processes and commits in its own task."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from reference_broker.client.admin import Admin, NewTopic
from reference_broker.client.group import GroupConsumer
from reference_broker.client.producer import Producer
from reference_broker.client.types import TopicPartition

# Group tests need fast group timers: a short initial rebalance delay and a low minimum session timeout, so members
# can use a 1-3 s session and a kill is noticed quickly. Tansu is started with its defaults (it has no such knobs).
GROUP_BROKER_SETTINGS = {
    "kafka.group.initial.rebalance.delay.ms": "100",
    "kafka.group.min.session.timeout.ms": "500",
}
SESSION_MS = 2000
HEARTBEAT_MS = 300


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def create_topic(bootstrap: str, partitions: int, prefix: str = "gt") -> str:
    """A fresh topic with leaders for every partition."""
    name = unique(prefix)
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, partitions)])
    return name


async def produce(bootstrap: str, topic: str, partitions: int, n: int, tag: str) -> set[bytes]:
    """n records spread round-robin over the partitions; returns their (unique) values."""
    values = [f"{tag}-{i}".encode() for i in range(n)]
    async with Producer(bootstrap, linger_ms=5) as p:
        futs = [await p.send(topic, v, partition=i % partitions) for i, v in enumerate(values)]
        await asyncio.gather(*futs)
    return set(values)


async def until(pred: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait (polling every 10 ms) until ``pred()``; returns the seconds waited, AssertionError on timeout."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)
    return time.monotonic() - t0


class Member:
    """One group member in its own task: poll, record what it got ("process"), commit synchronously.

    ``halt()`` stops the loop between polls (after the last commit); then ``close()`` leaves cleanly or
    ``kill()`` drops the member without LeaveGroup.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, *, commit: bool = True,
                 **options: Any) -> None:
        kw: dict[str, Any] = dict(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                                  auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
        kw.update(options)
        self.name = name
        self.topic = topic
        self.consumer = GroupConsumer(bootstrap, group, client_id=name, **kw)
        self.commit = commit
        self.records: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.assigned: set[TopicPartition] = set()
        self.assign_times: list[float] = []
        self.error: BaseException | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    def _on_assign(self, tps: set[TopicPartition]) -> None:
        self.assigned = set(tps)
        self.assign_times.append(time.monotonic())

    def _on_revoke(self, tps: set[TopicPartition]) -> None:
        self.assigned = set()

    async def _run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        try:
            while not self._stop.is_set():
                got = await self.consumer.poll(100)
                for tp, recs in got.items():
                    self.records.extend((tp.partition, r.offset, r.value) for r in recs)
                if got and self.commit:
                    await self.consumer.commit()
        except BaseException as exc:
            self.error = exc
            raise

    def start(self) -> Member:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def halt(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        await self.halt()
        await self.consumer.close()

    async def kill(self) -> None:
        await self.halt()
        await self.consumer.abort()

    def stable_with(self, tps: set[TopicPartition]) -> bool:
        return self.consumer.stable and self.assigned == tps


def covers(members: list[Member], partitions: int, topic: str) -> bool:
    """Every partition owned by exactly one member, every member Stable."""
    owned = [tp for m in members for tp in m.assigned]
    return (
        len(owned) == partitions
        and set(owned) == {TopicPartition(topic, p) for p in range(partitions)}
        and all(m.consumer.stable for m in members)
    )
