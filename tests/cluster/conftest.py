"""Fixtures for the reference cluster tests: real processes (a controller and three brokers), real clients."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_broker.cluster import Cluster

# Short failure detection so kill/pause scenarios finish in seconds; everything else is Kafka's default.
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator:
    """``make_cluster(**settings)`` starts a durable 3-broker cluster; every process is stopped after the test."""
    started: list[Cluster] = []

    def make(brokers: int = 3, **settings: str) -> Cluster:
        c = Cluster(brokers, data_dir=tmp_path / "data", work_dir=tmp_path, config={**FAST, **settings})
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.stop()
