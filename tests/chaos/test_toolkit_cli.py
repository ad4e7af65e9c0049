"""The one console script (`kct`) and the per-nemesis attribution the Spark job reports."""

from __future__ import annotations

import pytest

from kct.__main__ import main
from reports.fault_attribution import attribute, fault_intervals, kinds


def test_kct_help_lists_every_tool_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("broker", "cluster", "ctl", "suites", "diff", "chaos", "proxy", "check", "reports", "main"):
        assert f"\n  {cmd} " in out
    from fixtures.factory import TARGET_NAMES

    assert all(name in out for name in TARGET_NAMES)  # every target the suites take is named (kafka was missing)
    assert "kct chaos run --nemesis kill,pause" in out
    assert main(["nope"]) == 2


def test_kct_dispatches_to_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "run", "--dry-run", "--seed", "7", "--nemesis", "kill", "--duration", "30s"]) == 0
    assert "kill" in capsys.readouterr().out
    assert main(["chaos", "run", "--nemesis", "bogus", "--dry-run"]) == 2
    assert main(["diff", "--a", "reference"]) == 2     # the differential mode's own usage error (no --b)
    assert "--b" in capsys.readouterr().err


def _nem(i: int, t: int, typ: str, phase: str, kind: str, **extra: object) -> dict:
    return {"index": i, "time_ns": t, "process": -1, "type": typ, "f": "nemesis",
            "value": {"fault": kind, "phase": phase, "id": extra.pop("id", 0), **extra}}


def test_attribution_blames_faults_in_the_evidence_window() -> None:
    s = 1_000_000_000
    ops = [_nem(0, 1 * s, "invoke", "start", "kill", id=0), _nem(1, 1 * s, "info", "start", "kill", id=0, ok=True),
           _nem(2, 3 * s, "invoke", "stop", "kill", id=0), _nem(3, 3 * s, "info", "stop", "kill", id=0, ok=True),
           _nem(4, 40 * s, "invoke", "start", "pause", id=1),
           _nem(5, 40 * s, "info", "start", "pause", id=1, error="boom")]
    faults = fault_intervals(ops)
    assert [(f["kind"], f["ok"]) for f in faults] == [("kill", True), ("pause", False)]
    assert kinds(faults) == {"kill": 1}
    case = {"writer": {"index": 9, "time_ns": 2 * s, "type": "ok", "process": 0},
            "max_read": {"index": 20, "time_ns": 5 * s, "type": "ok", "process": 3}}
    late = {"writer": {"index": 30, "time_ns": 50 * s, "type": "ok", "process": 0}}
    assert attribute(faults, {"lost-write": [case, late]}) == {"kill": {"lost-write": 1}}


def test_run_page_draws_faults_over_throughput(tmp_path) -> None:  # noqa: ANN001
    from history import Recorder
    from reports.run_page import render

    t = iter(range(0, 10**12, 10**8))
    rec = Recorder("r1", target="reference", nemesis="kill", clock=lambda: next(t))
    rec.invoke(-1, "nemesis", {"fault": "kill", "phase": "start", "id": 0, "broker": 1})
    rec.info(-1, "nemesis", {"fault": "kill", "phase": "start", "id": 0, "broker": 1, "ok": True})
    for v in range(30):
        rec.invoke(0, "send", {"topic": "t", "partition": 0, "key": "0", "value": v})
        rec.ok(0, "send", {"topic": "t", "partition": 0, "key": "0", "value": v, "offset": v})
    rec.invoke(-1, "nemesis", {"fault": "kill", "phase": "stop", "id": 0, "broker": 1})
    rec.info(-1, "nemesis", {"fault": "kill", "phase": "stop", "id": 0, "broker": 1, "ok": True})
    path = str(tmp_path / "r1.jsonl")
    rec.write(path)
    page = render(path, {"valid": True, "anomalies": {"counts": {}}, "linearizability": {}})
    assert "VALID" in page and "<polyline" in page and "kill" in page and "<rect" in page
