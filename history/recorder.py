"""A small, thread-safe recorder that workloads and suites use to append operations to a history.

It enforces the contract at the source (an invoke before its completion on the same process, one operation in
flight per process, non-decreasing time, increasing index) so that bad histories are caught where they are made,
and hands out unique values for sends.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from .io import History, write_jsonl, write_parquet
from .schema import NEMESIS_PROCESS, HistoryError, dumps, validate_value


class Recorder:
    """Append operations for one run; ``clock`` is injectable (monotonic nanoseconds) for deterministic runs."""

    def __init__(
        self,
        run_id: str,
        target: str = "unknown",
        *,
        nemesis: str | None = None,
        settings: dict | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        sink: str | None = None,
    ) -> None:
        self.history = History(run_id, target=target, nemesis=nemesis, settings=dict(settings or {}))
        self._clock = clock
        self._lock = threading.Lock()
        self._last_time = -(1 << 62)
        self._in_flight: dict[int, str] = {}
        self._values = itertools.count()
        self._sink_path = sink
        self._sink = None
        if sink is not None:
            self._sink = open(sink, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._sink.write(dumps(self.history.header_line()) + "\n")

    # -- values
    def unique_value(self) -> int:
        """A value never handed out before in this run (sends must write unique values)."""
        return next(self._values)

    # -- operations
    def _append(self, process: int, typ: str, f: str, value: Any) -> dict:
        validate_value(f, typ, value)
        with self._lock:
            if process != NEMESIS_PROCESS:
                if typ == "invoke":
                    if process in self._in_flight:
                        raise HistoryError(f"process {process} already has {self._in_flight[process]} in flight")
                    self._in_flight[process] = f
                else:
                    pending = self._in_flight.get(process)
                    if pending != f:
                        raise HistoryError(f"{typ} {f} on process {process} without a matching invoke")
                    del self._in_flight[process]
            t = max(self._clock(), self._last_time)
            self._last_time = t
            op = {
                "run_id": self.history.run_id,
                "index": len(self.history.ops),
                "time_ns": t,
                "process": process,
                "type": typ,
                "f": f,
                "value": value,
            }
            self.history.ops.append(op)
            if self._sink is not None:
                self._sink.write(dumps(op) + "\n")
            return op

    def invoke(self, process: int, f: str, value: Any = None) -> dict:
        """Record the start of an operation."""
        return self._append(process, "invoke", f, {} if value is None and f == "poll" else value)

    def ok(self, process: int, f: str, value: Any = None) -> dict:
        """Record that the operation happened, with its result."""
        return self._append(process, "ok", f, value)

    def fail(self, process: int, f: str, value: Any = None) -> dict:
        """Record that the operation certainly did not happen."""
        return self._append(process, "fail", f, value)

    def info(self, process: int, f: str, value: Any = None) -> dict:
        """Record an unknown outcome (timeout, crash): it may or may not have happened."""
        return self._append(process, "info", f, value)

    def event(self, f: str, value: Any = None, *, process: int = NEMESIS_PROCESS) -> dict:
        """A nemesis (or other bookkeeping) event outside the invoke/complete protocol."""
        return self._append(process, "info", f, value)

    @property
    def in_flight(self) -> dict[int, str]:
        with self._lock:
            return dict(self._in_flight)

    # -- output
    def close(self) -> History:
        """Flush and close the streaming sink, if any; returns the history."""
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        return self.history

    def write(self, path: str) -> None:
        """Write the history to ``path`` (Parquet if it ends in .parquet, else JSONL)."""
        (write_parquet if path.endswith(".parquet") else write_jsonl)(self.history, path)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
