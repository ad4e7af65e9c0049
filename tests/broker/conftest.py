"""Reference broker processes for the broker's own tests: real OS processes on loopback, stopped by PID."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


class BrokerProcess:
    """One ``python -m reference_broker serve`` process; ``restart`` keeps port and data dir."""

    def __init__(self, data_dir: Path | None, log_path: Path, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra = extra or []
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        store = ["--data-dir", str(self.data_dir)] if self.data_dir else ["--memory"]
        argv = [sys.executable, "-m", "reference_broker", "serve", "--listen", f"127.0.0.1:{self.port}",
                *store, *self.extra]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"broker did not start: {line!r}; log: {self.log_path.read_text()[-2000:]}")
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc.stdout.close()
        self.proc = None

    def restart(self, sig: int = signal.SIGTERM) -> None:
        self.stop(sig)
        self.start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A memory-mode broker for one test."""
    b = BrokerProcess(None, tmp_path / "broker.log").start()
    yield b
    b.stop()


@pytest.fixture
def durable_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker with a durable log in a temporary data dir."""
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    yield b
    b.stop()
