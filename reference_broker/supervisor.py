"""The one process supervisor: a child process started and stopped by its PID, output to a log file, faults by
signal. Every process the project starts goes through it — reference cluster nodes (reference_broker/cluster.py),
and through fixtures/ the reference broker, Apache Kafka's JVMs, Tansu, the chaos proxy and a private dockerd — so
stopping is always by PID (never by name), a paused process is resumed before it is asked to stop, a pause returns
only once the kernel shows the process stopped, and an `atexit` hook stops what a crashed caller left behind.

It lives at the bottom of the layers (standard library only) so the reference cluster and the fixtures share it;
each caller names the exception its errors raise (`ManagedProcess.error`).
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO


class ProcessError(RuntimeError):
    """A supervised process could not be started, signalled or stopped; the message says which and why."""


_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()

# The watchdog: a small process reading "+ PID STARTTIME" / "- PID" lines on a pipe from this one. When the pipe
# closes — this process exited, crashed or was SIGKILLed (a CI timeout) — it sends SIGCONT and SIGKILL to every
# process still registered whose start time still matches: children started with start_new_session survive their
# parent otherwise (JVMs, Tansu, dockerd).
_WATCHDOG = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

def started(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None

pids = {}
for line in sys.stdin:
    op, _, rest = line.strip().partition(" ")
    if op == "+":
        pid, _, when = rest.partition(" ")
        pids[int(pid)] = when
    elif op == "-":
        pids.pop(int(rest), None)
for pid, when in pids.items():
    if when and started(pid) == when:       # the same process, not a later one that reuses the PID
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
"""


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the PID, an identity no
    later process shares."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


class _Watchdog:
    """This process's dead man's switch for its supervised children (started on first use, one per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._owner = 0

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None or self._owner != os.getpid():
                if line.startswith("- "):
                    return
                import sys

                self._proc = subprocess.Popen([sys.executable, "-c", _WATCHDOG], stdin=subprocess.PIPE,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                              start_new_session=True)
                self._owner = os.getpid()
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass

    def watch(self, pid: int) -> None:
        when = start_time(pid)
        if when is not None:
            self._send(f"+ {pid} {when}")

    def forget(self, pid: int) -> None:
        self._send(f"- {pid}")


_WATCH = _Watchdog()


class ManagedProcess:
    """One OS process: started with its output appended to `log_path`, stopped by PID.

    With `ready_pattern`, stdout is read line by line (and still copied to the log) so `start()` can return the
    first match, e.g. the reference broker's `READY 127.0.0.1:PORT` line.
    """

    error: type[Exception] = ProcessError    # what this supervisor's errors raise (callers name their own)

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ready_pattern: str | None = None,
        what: str = "process",
    ) -> None:
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.ready_pattern = re.compile(ready_pattern) if ready_pattern else None
        self.what = what
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._ready = threading.Event()
        self._ready_match: re.Match[str] | None = None
        self._paused = False

    @property
    def pid(self) -> int | None:
        """PID of the current (or last) incarnation."""
        return self._proc.pid if self._proc else None

    def start(self, ready_timeout: float = 30.0) -> re.Match[str] | None:
        """Start the process; with a ready pattern, block until stdout matches it (or fail with the log tail)."""
        if self.alive():
            raise self.error(f"{self.what} already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab", buffering=0)  # closed below, or by the pump thread
        log.write(f"--- start {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(self.argv)}\n".encode())
        self._ready.clear()
        self._ready_match = None
        self._paused = False
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.ready_pattern else log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                # Own session: a Ctrl-C in the terminal reaches pytest, which then stops brokers in order.
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise self.error(f"cannot start {self.what}: {self.argv[0]}: {exc.strerror or exc}") from exc
        _LIVE.add(self)
        _WATCH.watch(self._proc.pid)
        if not self.ready_pattern:
            log.close()
            return None
        self._pump = threading.Thread(target=self._pump_stdout, args=(self._proc, log), daemon=True)
        self._pump.start()
        deadline = time.monotonic() + ready_timeout
        while not self._ready.wait(0.05):
            code = self._proc.poll()
            if code is not None:
                self._pump.join(2.0)  # let the last lines reach the log before quoting it
                if self._ready.is_set():
                    break
                raise self.error(f"{self.what} exited with code {code} before printing its ready line"
                                  f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise self.error(f"{self.what} printed no ready line within {ready_timeout:g}s{self.log_tail()}")
        return self._ready_match

    def _pump_stdout(self, proc: subprocess.Popen[bytes], log: BinaryIO) -> None:
        assert proc.stdout is not None
        try:
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)
                if not self._ready.is_set() and self.ready_pattern is not None:
                    m = self.ready_pattern.search(raw.decode(errors="replace"))
                    if m:
                        self._ready_match = m
                        self._ready.set()
        finally:
            log.close()
            proc.stdout.close()

    def alive(self) -> bool:
        """True while the process has not exited (a paused process is alive)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended (negative: the signal that ended it), None while it runs."""
        return self._proc.poll() if self._proc is not None else None

    def exit_description(self) -> str | None:
        """None while alive, else how it ended — used to fail readiness waits fast."""
        if self._proc is None:
            return "never started"
        code = self._proc.poll()
        if code is None:
            return None
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def signal(self, sig: int) -> None:
        """Send a signal to this process's PID (only while alive)."""
        if not self.alive():
            raise self.error(f"{self.what} is not running; cannot send {signal.Signals(sig).name}")
        assert self._proc is not None
        os.kill(self._proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP, returning once the kernel shows the process stopped (signals are delivered asynchronously).

        The process keeps its sockets but stops answering.
        """
        self.signal(signal.SIGSTOP)
        self._paused = True
        self._wait_state(stopped=True)

    def resume(self) -> None:
        """SIGCONT after pause(), returning once the process runs again."""
        self.signal(signal.SIGCONT)
        self._paused = False
        self._wait_state(stopped=False)

    def _wait_state(self, stopped: bool, timeout: float = 5.0) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while (process_state(self._proc.pid) in ("T", "t")) != stopped:
            if time.monotonic() > deadline:
                raise self.error(f"{self.what} (pid {self._proc.pid}) did not {'stop' if stopped else 'continue'}"
                                  f" within {timeout:g}s")
            time.sleep(0.005)

    def kill(self) -> None:
        """SIGKILL and reap, no grace period: the crash fault."""
        if self.alive():
            self.signal(signal.SIGKILL)
        self._reap(10.0)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM (after SIGCONT if paused), wait `grace` seconds, then SIGKILL; always reaps. Idempotent."""
        if self._proc is None:
            return
        if self.alive():
            try:
                os.kill(self._proc.pid, signal.SIGCONT)  # a stopped process would not act on SIGTERM
                os.kill(self._proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self._proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self._proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._reap(10.0)
        _LIVE.discard(self)

    def _reap(self, timeout: float) -> None:
        if self._proc is None:
            return
        try:
            self._proc.wait(timeout)
            _WATCH.forget(self._proc.pid)
        except subprocess.TimeoutExpired as exc:
            raise self.error(f"{self.what} (pid {self._proc.pid}) did not exit after SIGKILL") from exc
        if self._pump is not None:
            self._pump.join(5.0)
        self._paused = False

    def log_tail(self, lines: int = 20) -> str:
        """The end of the log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return f"\n--- last lines of {self.log_path} ---\n" + "\n".join(text)


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc/PID/stat (R, S, T, Z, ...), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return None


def pid_running(pid: int) -> bool:
    """True if pid exists and is not a zombie.

    Daemonised helpers (e.g. containerd shims) are re-parented to PID 1, which on some machines never reaps them:
    an exited one lingers as a zombie holding no resources, so it counts as gone.
    """
    return process_state(pid) not in (None, "Z", "X")


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """Poll until pid is gone (or a zombie); True if it went within timeout."""
    deadline = time.monotonic() + timeout
    while pid_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@atexit.register
def _stop_leftovers() -> None:
    """Last resort when a caller forgot stop(): stop each still-running child by its PID."""
    for proc in list(_LIVE):
        try:
            proc.stop(grace=3.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
