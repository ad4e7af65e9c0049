"""Shared helpers for the client tests (a uniquely named module so it never collides with other suites)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from kafka.record.memory_records import MemoryRecords

from reference_broker.client.cluster import Cluster
from reference_broker.client.consumer import Consumer
from reference_broker.client.types import TopicPartition

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run one coroutine on a fresh event loop, bounded so a hang fails instead of blocking the suite."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def read_all(bootstrap: str, tp: TopicPartition, expect: int, timeout: float = 10.0) -> list:
    """Everything in ``tp`` from offset 0 until ``expect`` records were seen (or timeout)."""
    out: list = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([tp])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < expect and loop.time() < deadline:
            got = await c.poll(500)
            out.extend(got.get(tp, []))
        # one more short poll: anything beyond `expect` is a duplicate we must see
        got = await c.poll(300)
        out.extend(got.get(tp, []))
    return out


async def raw_batches(bootstrap: str, tp: TopicPartition) -> list:
    """The record batches the broker holds for ``tp`` (one Fetch from 0), as kafka.record batch objects."""
    async with Cluster(bootstrap) as cluster:
        await cluster.refresh_metadata([tp.topic])
        conn = await cluster.connection(cluster.leader_for(tp))
        c = Consumer(cluster)
        c.assign([tp])
        c.seek(tp, 0)
        v = conn.versions[1]
        resp = await conn.request(c.build_fetch_request(v, [tp]), v)
        data = resp.body.responses[0].partitions[0].records
        return list(MemoryRecords(bytes(data))) if data else []
