"""Run a fault schedule against a target and proxies, recording each fault's start and end in the history.

History: every transition is Jepsen-style, an `invoke` then an `info` on NEMESIS_PROCESS with f="nemesis":
value {"fault": kind, "phase": "start"|"stop", "id": step id, ...params}; the info adds "ok": true, or
"error": "...". A fault is in effect from its start's info to its stop's invoke.

Undo is guaranteed: faults still active when the run ends — normally, on an error, on Ctrl-C (SIGINT) or SIGTERM
— are stopped in reverse order in a `finally`, each attempt recorded with "reason": "cleanup".
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from history.schema import NEMESIS_PROCESS

from .base import Context, Fault
from .schedule import NEMESES, Step

log = logging.getLogger("chaos.nemesis")


class Terminated(KeyboardInterrupt):
    """SIGTERM during a run: raised like Ctrl-C so the same cleanup runs."""


class NemesisRunner:
    """Runs steps in time order. `clock`/`sleep` are injectable so tests and simulations need no wall time."""

    def __init__(
        self,
        ctx: Context,
        recorder: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        nemeses: dict[str, Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.clock = clock
        self.sleep = sleep
        self.nemeses = nemeses or NEMESES
        self.active: list[tuple[Step, Fault]] = []
        self.stop_requested = threading.Event()

    # -- recording
    def _record(self, typ: str, value: dict[str, Any]) -> None:
        if self.recorder is not None:
            getattr(self.recorder, typ)(NEMESIS_PROCESS, "nemesis", value)

    def _transition(self, step: Step, fault: Fault, phase: str, action: Callable[[], Any],
                    **extra: Any) -> bool:
        value = {"fault": fault.kind, "phase": phase, "id": step.id, **fault.params, **extra}
        self._record("invoke", value)
        try:
            action()
        except Exception as e:  # noqa: BLE001 - recorded; the run (or the cleanup) goes on
            log.warning("nemesis %s #%s %s failed: %s", fault.kind, step.id, phase, e)
            self._record("info", {**value, "error": f"{type(e).__name__}: {e}"})
            return False
        self._record("info", {**value, "ok": True})
        return True

    # -- running
    def _wait_until(self, t0: float, at: float) -> bool:
        """Sleep until t0+at in short slices; False if a stop was requested."""
        while not self.stop_requested.is_set():
            left = t0 + at - self.clock()
            if left <= 0:
                return True
            self.sleep(min(left, 0.1))
        return False

    def run(self, steps: Sequence[Step]) -> None:
        """Apply the schedule; returns when it is over with every fault undone (also when it raises)."""
        events: list[tuple[float, int, int, Step]] = []  # (time, stop-before-start, id, step)
        for s in steps:
            events.append((s.at, 1, s.id, s))
            events.append((s.at + s.duration, 0, s.id, s))
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        restore = self._install_signals()
        t0 = self.clock()
        try:
            for at, is_start, _, step in events:
                if not self._wait_until(t0, at):
                    break
                if is_start:
                    fault = self._bind(step)
                    self.active.append((step, fault))
                    if not self._transition(step, fault, "start", fault.start):
                        # a half-applied fault is undone at once rather than left for the cleanup
                        self.active.remove((step, fault))
                        self._transition(step, fault, "stop", fault.stop, reason="start failed")
                else:
                    entry = next(((s, f) for s, f in self.active if s.id == step.id), None)
                    if entry is not None:
                        self.active.remove(entry)
                        self._transition(step, entry[1], "stop", entry[1].stop)
        finally:
            self.undo_all()
            restore()

    def _bind(self, step: Step) -> Fault:
        """The step's fault; if binding fails (e.g. no leader to look up), a fault whose start reports that
        error, so it is recorded like any failed start and the schedule goes on."""
        try:
            return self.nemeses[step.kind].bind(step.params, self.ctx)
        except Exception as e:  # noqa: BLE001 - recorded as the start's error
            error = e

            def fail() -> None:
                raise error

            return Fault(step.kind, dict(step.params), fail, lambda: None)

    def undo_all(self) -> None:
        """Stop every active fault, newest first (idempotent)."""
        while self.active:
            step, fault = self.active.pop()
            self._transition(step, fault, "stop", fault.stop, reason="cleanup")

    def request_stop(self) -> None:
        """Ask a running schedule to end early (thread-safe); its faults are undone."""
        self.stop_requested.set()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # signals are delivered to the main thread; its KeyboardInterrupt ends us there

        def on_term(signum: int, frame: Any) -> None:
            raise Terminated()

        old_term = signal.signal(signal.SIGTERM, on_term)
        old_int = signal.getsignal(signal.SIGINT)
        if old_int in (signal.SIG_IGN, signal.SIG_DFL, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)

        def restore() -> None:
            signal.signal(signal.SIGTERM, old_term)
            if old_int in (signal.SIG_IGN, signal.SIG_DFL):
                signal.signal(signal.SIGINT, old_int)

        return restore
