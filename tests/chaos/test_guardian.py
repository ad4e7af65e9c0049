"""A run that is SIGKILLed mid-fault leaves nothing applied on a live cluster: its guardian process undoes it.

Before: the run's `finally` was the only undo, so a SIGKILLed run left the paused broker SIGSTOPped and the cut
proxies disabled until someone noticed (Ctrl-C and SIGTERM were already covered: test_run.py, test_run_kafka.py)."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.faults import ToxiproxyClient
from chaos.guardian import serve

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_run import _start_cluster, _status, _stop  # noqa: E402


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(what)


def _guardian_log(tmp_path: Path) -> str:
    logs = list((tmp_path / "out").glob("*.guardian.log"))
    return logs[0].read_text() if logs else ""


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.timeout(150)
def test_a_sigkilled_run_leaves_no_broker_paused(tmp_path: Path) -> None:
    proc, bootstrap, control = _start_cluster(tmp_path)
    try:
        chaos = subprocess.Popen(
            [sys.executable, "-m", "chaos", "run", "--bootstrap", bootstrap, "--control", control, "--nemesis",
             "pause", "--interval", "40s", "--fault-duration", "30s", "--duration", "60s", "--rate", "50",
             "--seed", "1", "--quiet", "--out", str(tmp_path / "out")],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: _status(control)["paused"], 60, "the nemesis never paused a broker")
        (paused,) = _status(control)["paused"]
        pid = _status(control)["pids"][f"broker-{paused}"]
        assert _stopped(pid)
        chaos.send_signal(signal.SIGKILL)   # no finally, no signal handler
        chaos.wait(10)
        _wait(lambda: not _status(control)["paused"] and not _stopped(pid), 20,
              "the paused broker stayed stopped after the run was killed")
        # the guardian logs after it acted: wait for the line too
        _wait(lambda: f'undid ["resume", {paused}]' in _guardian_log(tmp_path), 10, _guardian_log(tmp_path))
    finally:
        _stop(proc)


@pytest.mark.timeout(150)
def test_a_sigkilled_run_leaves_no_proxy_disabled(tmp_path: Path) -> None:
    from fixtures.factory import make_target

    target = make_target("reference", config={"brokers": "3", "proxied": "true"}, work_dir=tmp_path / "c")
    target.start()
    try:
        proxies = ToxiproxyClient(target.proxy_api)
        topo = tmp_path / "topology.json"
        topo.write_text(json.dumps({f"{a}->{b}": name for (a, b), name in target.topology.links.items()}))
        chaos = subprocess.Popen(
            [sys.executable, "-m", "chaos", "run", "--bootstrap", target.bootstrap, "--proxy-api", target.proxy_api,
             "--topology", str(topo), "--nemesis", "partition", "--interval", "40s", "--fault-duration", "30s",
             "--duration", "60s", "--rate", "50", "--seed", "1", "--quiet", "--out", str(tmp_path / "out")],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def disabled() -> list[str]:
            return sorted(n for n, p in proxies.proxies().items() if not p["enabled"])

        _wait(disabled, 60, "the nemesis never cut a link")
        cut = disabled()
        chaos.send_signal(signal.SIGKILL)
        chaos.wait(10)
        _wait(lambda: not disabled(), 20, f"proxies {disabled()} stayed disabled after the run was killed")
        _wait(lambda: all(f'undid ["enable", "{n}"]' in _guardian_log(tmp_path) for n in cut), 10,
              f"{cut}: {_guardian_log(tmp_path)}")
    finally:
        target.stop()


def test_a_clean_journal_undoes_nothing_and_a_torn_line_is_skipped() -> None:
    """Entries added then removed are not undone; a broker paused twice and resumed once is resumed once more;
    the last line, cut by the run's death, is ignored (its verb had not been sent: write-ahead)."""
    done: list[list] = []
    import chaos.guardian as g

    saved = g.undo
    g.undo = lambda entry, spec: done.append(list(entry))  # type: ignore[assignment]
    try:
        stream = io.StringIO("\n".join([
            json.dumps({"control": "/nowhere"}),
            json.dumps({"add": ["resume", 1]}), json.dumps({"add": ["resume", 1]}), json.dumps({"del": ["resume", 1]}),
            json.dumps({"add": ["enable", "c->b0"]}), json.dumps({"del": ["enable", "c->b0"]}),
            json.dumps({"add": ["untoxic", "c->b2", "lat"]}), '{"add": ["restart", 2']))
        out = io.StringIO()
        assert serve(stream, out) == 0
    finally:
        g.undo = saved
    assert done == [["untoxic", "c->b2", "lat"], ["resume", 1]]


def test_nothing_outstanding_leaves_no_log(tmp_path: Path) -> None:
    from chaos.guardian import Guardian

    gd = Guardian({"control": None}, tmp_path / "g.log")
    gd.will_undo("resume", 1)
    gd.undone("resume", 1)
    assert gd.close() == 0 and not (tmp_path / "g.log").exists()
    assert os.path.isdir(tmp_path)
