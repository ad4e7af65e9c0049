"""Command-template control (chaos/remote.py): process faults on a cluster the toolkit did not start, Jepsen's way.

Real processes on loopback: a reference cluster started by its own CLI, and templates that run its `ctl` command
(in a real deployment they would be `ssh {host} sudo systemctl ...`). The dry run renders every command and runs
none; a run applies and undoes kill and pause through the templates; a cluster that advertises a non-loopback
broker is refused without --allow-remote (its metadata is read, nothing is sent there).
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from test_run import _start_cluster, _status  # noqa: E402  (tests/chaos on sys.path)

from chaos.cli import main
from chaos.remote import CommandTarget, ControlCommandError, parse_templates
from fixtures import make_target


def _templates(control: str) -> list[str]:
    ctl = f"{shlex.quote(sys.executable)} -m reference_broker ctl --control {shlex.quote(control)}"
    return [f"{verb}={ctl} {verb} {{node}}" for verb in ("kill", "pause", "resume", "restart")]


@pytest.mark.parametrize("items, message", [
    (["kill"], "expected VERB=COMMAND"),
    (["explode=rm -rf {host}"], "unknown verb 'explode'"),
    (["kill=ssh {hostname} kill"], "unknown placeholder(s) ['hostname']"),
    (["kill=a", "kill=b"], "given twice"),
    (["kill=ssh {host"], "--control-cmd"),
])
def test_bad_templates_are_usage_errors(items: list[str], message: str) -> None:
    with pytest.raises(ControlCommandError) as info:
        parse_templates(items)
    assert message in str(info.value)


def test_a_cluster_advertising_a_remote_broker_needs_allow_remote(tmp_path: Path) -> None:
    """The bootstrap is loopback but the broker says it lives at 10.255.255.1: refused unless --allow-remote."""
    with make_target("reference", work_dir=tmp_path, config=["memory=true",
                                                            "kafka.advertised.listeners=10.255.255.1:9"]) as t:
        with pytest.raises(ControlCommandError, match="not on loopback"):
            CommandTarget.discover(t.bootstrap, parse_templates(["kill=true"]), allow_remote=False)
        allowed = CommandTarget.discover(t.bootstrap, parse_templates(["kill=echo {host} {port}"]),
                                         allow_remote=True)
        assert allowed.render("kill", 0) == "echo 10.255.255.1 9"


@pytest.mark.timeout(200)
def test_templates_drive_kill_and_pause_on_a_live_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc, bootstrap, control = _start_cluster(tmp_path)
    try:
        before = _status(control)["pids"]
        base = ["run", "--bootstrap", bootstrap, "--nemesis", "kill,pause", "--seed", "4", "--out",
                str(tmp_path / "out")]
        args = [*base, *(a for t in _templates(control) for a in ("--control-cmd", t))]
        # dry run: every verb rendered for every node, nothing touched
        assert main([*args, "--dry-run"]) == 0
        printed = capsys.readouterr().out
        for node in (0, 1, 2):
            assert f"kill     node {node}: " in printed and f" kill {node}" in printed
        assert _status(control)["pids"] == before
        # a missing verb is refused before anything runs
        assert main([*base, "--control-cmd", _templates(control)[0], "--duration", "5s"]) == 2
        assert "needs --control-cmd for" in capsys.readouterr().err
        # a short run: faults applied and undone through the templates
        rc = main([*args, "--duration", "24s", "--interval", "6s", "--fault-duration", "3s", "--rate", "60",
                   "--quiet"])
        assert rc == 0, capsys.readouterr()
        hist = next((tmp_path / "out").glob("*.jsonl"))
        ops = [json.loads(line) for line in hist.read_text().splitlines()[1:]]
        done = [(o["value"]["fault"], o["value"]["phase"]) for o in ops
                if o["f"] == "nemesis" and o["type"] == "info" and o["value"].get("ok")]
        assert {("kill", "start"), ("kill", "stop"), ("pause", "start"), ("pause", "stop")} <= set(done), done
        status = _status(control)
        assert status["paused"] == [] and all(status["pids"].values()), status   # all back, none paused
        assert status["pids"] != before                                          # the kill really happened
    finally:
        import signal as _signal
        proc.send_signal(_signal.SIGTERM)
        proc.wait(30)
