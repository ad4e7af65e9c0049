"""A check's background request must stop when cancelled, even if its answer has just arrived.

On Python 3.11 ``asyncio.wait_for`` returns the result instead of raising when the cancellation meets an answer
already in (gh-86296). A rebalance check's member loop then ran on after its session cancelled it, the session
waited for it forever, and a fault-switch row timed out after 280 s with its brokers left running.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from conformance.wire import Wire
from fixtures.reference import ReferenceTarget


async def test_a_request_cancelled_as_its_answer_arrives_is_cancelled(tmp_path: Path) -> None:
    outcomes = []
    with ReferenceTarget({"memory": "true"}, work_dir=tmp_path) as target:
        async with await Wire.connect(target.bootstrap) as w:
            for _ in range(20):
                task = asyncio.ensure_future(w.request("Metadata", MetadataRequest[1](topics=[])))
                while not w.conn.in_flight:       # sent
                    await asyncio.sleep(0)
                while w.conn.in_flight:           # answered: the response future is done, the task not yet resumed
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                    outcomes.append("ran on")
                except asyncio.CancelledError:
                    outcomes.append("cancelled")
    assert outcomes == ["cancelled"] * 20, outcomes
