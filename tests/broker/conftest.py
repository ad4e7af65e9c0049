"""Reference broker processes for the broker's own tests: the same ReferenceTarget users get from fixtures/."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.reference import ReferenceTarget


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ReferenceTarget]:
    """A memory-mode broker process for one test (stopped by PID at teardown)."""
    with ReferenceTarget({"memory": "true"}, work_dir=tmp_path) as t:
        yield t


@pytest.fixture
def durable_broker(tmp_path: Path) -> Iterator[ReferenceTarget]:
    """A broker with a durable log in a temporary data dir; ``restart()`` keeps port and data."""
    with ReferenceTarget({}, work_dir=tmp_path) as t:
        yield t
