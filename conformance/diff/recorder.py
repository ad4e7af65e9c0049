"""pytest plugin: record every check's conversation (``--kct-conversations PATH``, JSON Lines, one per check).

Loaded by the differential mode's child pytest (``-p conformance.diff.recorder``); passive without the option. Each
check gets a :class:`~conformance.diff.conversation.Recorder` as the default ``ExchangeTap`` of the Wires it
connects, so every request it sends through ``conformance.wire`` (also through ``conformance.properties.ops``) is
kept with its connection, order and timing. Requests sent by client libraries (kafka-python, confluent-kafka in the
``clients`` suite) do not pass through a Wire and are not recorded; such a conversation says so in its notes.

Checks that need process faults or a cluster of their own are written as excluded (with the reason): a replay
cannot kill, pause or restart a node of a target it did not start.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import wire

from .conversation import Recorder, write_conversations

OPTION = "--kct-conversations"
_OUTCOME = pytest.StashKey[str]()
# fixtures that give a check a process-fault target or a cluster of its own: its conversation is not replayable
FAULT_FIXTURES = {"fresh_target": "restarts a node (fresh_target)",
                  "replicated_target": "needs a 3-node cluster with node faults (replicated_target)",
                  "cluster": "kills/pauses nodes of a 3-node cluster (cluster)"}
CLIENT_FIXTURES = ("client",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("kct-diff", "differential mode (conformance.diff)").addoption(
        OPTION, default=None, metavar="PATH", help="write each check's conversation to PATH (JSON Lines)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("kct_conversations", default=None)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed or report.skipped or report.when == "call":
        prev = item.stash.get(_OUTCOME, "passed")
        if prev == "passed":
            item.stash[_OUTCOME] = "skipped" if report.skipped else ("failed" if report.failed else "passed")


@pytest.fixture(autouse=True)
def _kct_conversation(request: pytest.FixtureRequest) -> Iterator[None]:
    path = request.config.getoption("kct_conversations", default=None)
    if not path:
        yield
        return
    item: Any = request.node
    excluded = next((why for name, why in FAULT_FIXTURES.items() if name in item.fixturenames), None)
    if excluded:
        rec = Recorder(item.nodeid, "")
        yield
        conv = rec.finish(item.stash.get(_OUTCOME, None))
        conv.excluded = f"needs process faults: {excluded}"
        write_conversations(Path(path), [conv], append=True)
        return
    bootstrap = request.getfixturevalue("bootstrap")
    rec = Recorder(item.nodeid, bootstrap)
    if any(name in item.fixturenames for name in CLIENT_FIXTURES):
        rec.conv.notes.append("client library requests (kafka-python / confluent-kafka) are not recorded; only the "
                              "check's own Wire requests are replayed")
    previous = wire.set_default_tap(rec)
    try:
        yield
    finally:
        wire.set_default_tap(previous)
        write_conversations(Path(path), [rec.finish(item.stash.get(_OUTCOME, None))], append=True)
