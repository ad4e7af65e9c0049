"""The log under test: the same contract cases run against MemoryLog and FileLog (large and tiny segments)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_broker.log.base import Log
from reference_broker.log.file import FileLog, FileLogConfig
from reference_broker.log.memory import MemoryLog

# Tiny segments and index interval so that segment rolls and sparse index lookups happen in every test.
TINY = FileLogConfig(segment_bytes=700, index_interval_bytes=100, max_open_segments=3)


@pytest.fixture(params=["memory", "file", "file-tiny-segments"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Log]:
    if request.param == "memory":
        lg: Log = MemoryLog()
    elif request.param == "file":
        lg = FileLog(tmp_path / "t-0", FileLogConfig(index_interval_bytes=100))
    else:
        lg = FileLog(tmp_path / "t-0", TINY)
    yield lg
    lg.close()
