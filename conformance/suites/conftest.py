"""Setup shared by the suites (fixtures only; no checks live here)."""
from __future__ import annotations

import asyncio

import pytest

from conformance.wire import Wire, unique_name


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
