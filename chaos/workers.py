"""The worker threads of a workload (queue, txn): each process is a thread that runs until the run asks it to stop.

Why one place: a worker that dies must not hang the run (its error is reported, not raised), and stopping is
bounded (a worker stuck in a client call is named, never waited for forever)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Workers:
    """Threads sharing one stop event; `errors` collects what killed a worker and who did not stop in time."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []

    def spawn(self, name: str, fn: Callable[[int], None], process: int) -> None:
        def guarded() -> None:
            try:
                fn(process)
            except Exception as e:  # noqa: BLE001 - a worker dying must not hang the run; reported
                self.errors.append(f"{name}: {type(e).__name__}: {e}"[:500])

        t = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, timeout_s: float) -> None:
        """Ask every worker to finish its current operation and wait at most `timeout_s` in all."""
        self.stopping.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.errors.append(f"workers still running after {timeout_s:.0f}s: {alive}")
