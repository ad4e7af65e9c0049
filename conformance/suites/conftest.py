"""Setup shared by the suites (fixtures only; no checks live here)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conformance.cluster import Cluster
from conformance.evidence import Evidence
from conformance.wire import Wire, unique_name
from fixtures.target import Target


@pytest.fixture
async def cluster(replicated_target: Target, evidence: Evidence) -> Any:
    """The replicated target (one per module, reused while healthy) as the suites' replication checks see it: a
    Cluster with a Wire recording into the check's evidence; every fault the check made is undone after (paused
    nodes resumed, killed ones restarted), so the next check gets a whole cluster."""
    c = Cluster(replicated_target, await Wire.connect(replicated_target.bootstrap, evidence=evidence))
    try:
        await c.start()
        yield c
    finally:
        c.heal()
        await c.close()


@pytest.fixture(scope="module")
def group_coordinator_ready(bootstrap: str) -> None:
    """Setup, not a check, for modules whose rules are not about coordinator start-up: wait until a group
    coordinator answers OffsetFetch without a coordinator error. A fresh Kafka creates `__consumer_offsets` on the
    first FindCoordinator and answers NOT_COORDINATOR until its partition is loaded; real clients retry that (and
    librdkafka does not, for an assign()ed partition: librdkafka#5586)."""
    async def ready() -> None:
        w = await Wire.connect(bootstrap)
        try:
            await w.coordinator_ready(unique_name("g-ready"))
        finally:
            await w.close()

    asyncio.run(ready())
