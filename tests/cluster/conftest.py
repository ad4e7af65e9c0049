"""Fixtures for the reference cluster tests: real processes (a controller and three brokers), real clients."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kct_cluster_helpers import FAST

from reference_broker.cluster import Cluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator:
    """``make_cluster(**settings)`` starts a durable 3-broker cluster (``memory=True``: memory logs); every process
    is stopped after the test.

    KCT_CLUSTER_FAULTS=a,b runs the clusters with test-only fault switches (reference_broker/faults.py), to show
    that these tests fail when the rule they rely on is broken."""
    started: list[Cluster] = []
    faults = [f for f in os.environ.get("KCT_CLUSTER_FAULTS", "").split(",") if f]

    def make(brokers: int = 3, memory: bool = False, **settings: str) -> Cluster:
        c = Cluster(brokers, data_dir=None if memory else tmp_path / "data", work_dir=tmp_path,
                    config={**FAST, **settings}, faults=faults)
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.stop()
