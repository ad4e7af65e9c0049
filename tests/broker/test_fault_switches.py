"""The test-only fault switches really break the rule they name, and only when enabled."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from kafka import errors as E

from fixtures.reference import ReferenceTarget

from ._wire import batch, connect, create_topic, fetch_request, only_partition, produce

MS = 1_000_000


@pytest.fixture
def faulty(tmp_path, request):
    with ReferenceTarget({"memory": "true", "faults": request.param}, work_dir=tmp_path) as t:
        yield t


@pytest.mark.parametrize("faulty", ["fetch.min_bytes_exclusive"], indirect=True)
async def test_min_bytes_exclusive(faulty):
    c = await connect(faulty)
    await create_topic(c, "t")
    one = batch([b"x" * 50])
    await produce(c, "t", one)
    r = await c.request(fetch_request([("t", 0, 0)], max_wait_ms=300, min_bytes=len(one)))
    assert r.rtt_ns >= 300 * MS, "exactly min_bytes readable must not complete under the fault"
    await c.close()


@pytest.mark.parametrize("faulty", ["fetch.no_wake_on_append"], indirect=True)
async def test_no_wake(faulty):
    f, p = await connect(faulty), await connect(faulty)
    await create_topic(f, "t")
    fut = f.submit(fetch_request([("t", 0, 0)], max_wait_ms=600, min_bytes=1))
    await asyncio.sleep(0.1)
    await produce(p, "t", batch([b"x"]))
    r = await asyncio.wait_for(fut, 3)
    assert r.rtt_ns >= 600 * MS
    await f.close()
    await p.close()


@pytest.mark.parametrize("faulty", ["fetch.ignore_max_wait"], indirect=True)
async def test_ignore_max_wait(faulty):
    c = await connect(faulty)
    await create_topic(c, "t")
    r = await c.request(fetch_request([("t", 0, 0)], max_wait_ms=2000, min_bytes=1))
    assert r.rtt_ns < 500 * MS
    await c.close()


@pytest.mark.parametrize("faulty", ["fetch.oor_as_empty"], indirect=True)
async def test_oor_as_empty(faulty):
    c = await connect(faulty)
    await create_topic(c, "t")
    p = only_partition((await c.request(fetch_request([("t", 0, 5)], 0, 1))).body)
    assert p.error_code == 0 != E.OffsetOutOfRangeError.errno
    await c.close()


def test_unknown_fault_is_a_clear_error():
    r = subprocess.run([sys.executable, "-m", "reference_broker", "serve", "--memory", "--listen", "127.0.0.1:0",
                        "--fault", "no.such.fault"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown fault(s) no.such.fault" in r.stderr
