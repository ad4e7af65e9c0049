"""Brokers for group tests: short initial rebalance delay and session bounds so expiry tests run in seconds."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.reference import ReferenceTarget

GROUP_SETTINGS = {
    "kafka.group.initial.rebalance.delay.ms": "0",
    "kafka.group.min.session.timeout.ms": "500",
    "kafka.offsets.topic.num.partitions": "5",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ReferenceTarget]:
    with ReferenceTarget({"memory": "true", **GROUP_SETTINGS}, work_dir=tmp_path) as t:
        yield t


@pytest.fixture
def durable_broker(tmp_path: Path) -> Iterator[ReferenceTarget]:
    with ReferenceTarget(dict(GROUP_SETTINGS), work_dir=tmp_path) as t:
        yield t
