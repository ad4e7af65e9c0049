"""`python -m reference_broker cluster` and `ctl` as a user runs them: READY, control by node id, clean stop,
clear errors for a taken port and bad arguments."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from fixtures.process import pid_running

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reference_broker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_cluster_cli_serves_is_controlled_by_node_id_and_stops_everything(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "reference_broker", "cluster", "--brokers", "3", "--data-dir",
                             str(tmp_path / "kc"), "--config", "broker.session.timeout.ms=3000"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = {}
        deadline = time.monotonic() + 60
        while "CONTROLLER" not in lines and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"cluster exited: {proc.stderr.read()}"
            key, _, rest = line.strip().partition(" ")
            lines[key] = rest
        assert len(lines["READY"].split(",")) == 3, lines
        control = lines["CONTROL"]
        status = json.loads(_run("ctl", "--control", control, "status").stdout)
        pids = status["pids"]
        assert len(pids) == 4 and all(pid_running(p) for p in pids.values()), status
        assert _run("ctl", "--control", control, "kill", "1").returncode == 0
        assert not pid_running(pids["broker-1"])
        r = _run("ctl", "--control", control, "restart", "1")
        assert r.returncode == 0 and r.stdout.strip() == "ok", r
        new = json.loads(_run("ctl", "--control", control, "status").stdout)["pids"]
        assert pid_running(new["broker-1"]) and new["broker-1"] != pids["broker-1"]
        bad = _run("ctl", "--control", control, "pause", "7")
        assert bad.returncode == 2 and "no broker 7" in bad.stdout, bad
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert not any(pid_running(p) for p in new.values()), new
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_cluster_cli_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = _run("cluster", "--brokers", "2", "--memory", "--base-port", str(port - 1), timeout=90)
        assert r.returncode == 2 and "cannot listen" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = _run("cluster", "--brokers", "0", "--memory")
    assert r.returncode == 2 and "--brokers" in r.stderr
    r = _run("cluster", "--brokers", "3", "--memory", "--controllers", "0")
    assert r.returncode == 2 and "--controllers" in r.stderr
    r = _run("cluster", "--brokers", "3", "--memory", "--config", "no.such=1")
    assert r.returncode == 2 and "unknown broker config" in r.stderr
    f = tmp_path / "file"
    f.write_text("x")
    r = _run("cluster", "--brokers", "3", "--data-dir", str(f / "sub"))
    assert r.returncode == 2 and str(f) in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _run("ctl", "--control", str(tmp_path / "nope.sock"), "status")
    assert r.returncode == 2 and "cannot reach" in r.stderr
