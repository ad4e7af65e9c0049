"""Fixtures for the property machines: the broker they drive, the settings profile, the replay directory.

Profiles and the ``--conformance-replay-dir`` option live in ``conformance.properties.plugin`` (imported here, so
``pytest conformance/properties ...`` has them; see that module for ``pytest conformance``).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from fixtures.target import Target

from .plugin import CI, REPLAY_OPTION, THOROUGH, add_replay_option

# Group timings for machines against a reference broker: joins complete at once, sessions may be short.
FAST_GROUPS = {"kafka.group.initial.rebalance.delay.ms": "0", "kafka.group.min.session.timeout.ms": "500"}


def pytest_addoption(parser: pytest.Parser) -> None:
    add_replay_option(parser)


@dataclass(frozen=True)
class MachineTarget:
    """Where the machines send requests, and how a replay script starts the same kind of broker."""

    bootstrap: str
    kind: str
    config: dict[str, str]


def reference_config(target: Target) -> dict[str, str]:
    """The ReferenceTarget constructor options that reproduce ``target`` (memory mode, settings, faults)."""
    cfg = target.config()
    out = {"memory": "true", **{f"kafka.{k}": str(v) for k, v in cfg.get("settings", {}).items()}}
    if cfg.get("faults"):
        out["faults"] = ",".join(cfg["faults"])
    return out


@pytest.fixture(scope="session")
def machine_target(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MachineTarget]:
    """The session target; for a reference target, a sibling reference broker with the same settings and faults
    plus fast group timings (a 3 s initial rebalance delay per group would dominate every example)."""
    from fixtures.reference import ReferenceTarget

    if not isinstance(target, ReferenceTarget):
        _coordinator_ready(target.bootstrap)
        yield MachineTarget(target.bootstrap, target.name, {})
        return
    config = {**reference_config(target), **FAST_GROUPS}
    with ReferenceTarget(config, work_dir=tmp_path_factory.mktemp("machine-broker")) as sibling:
        yield MachineTarget(sibling.bootstrap, "reference", config)


def _coordinator_ready(bootstrap: str) -> None:
    """Setup: the group machine's first JoinGroup must not meet a coordinator that is still loading (a fresh Kafka
    creates `__consumer_offsets` on first use and answers NOT_COORDINATOR meanwhile; the model knows no such
    state, and the rule it checks is not about coordinator start-up)."""
    import asyncio

    from conformance.wire import Wire, unique_name

    async def ready() -> None:
        w = await Wire.connect(bootstrap)
        try:
            await w.coordinator_ready(unique_name("g-ready"))
        finally:
            await w.close()

    asyncio.run(ready())


@pytest.fixture
def machine_settings(request: pytest.FixtureRequest) -> settings:
    """The ``thorough`` profile when asked for on the command line, else ``kct-ci``."""
    chosen = request.config.getoption("hypothesis_profile", default=None)
    return settings.get_profile(THOROUGH if chosen == THOROUGH else CI)


@pytest.fixture
def replay_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    chosen = request.config.getoption(REPLAY_OPTION, default=None)
    return Path(chosen) if chosen else tmp_path / "replays"
