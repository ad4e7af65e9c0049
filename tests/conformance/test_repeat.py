"""conformance.repeat: N runs of the suites against one target, outcomes compared per check."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conformance.repeat import compare

ROOT = Path(__file__).resolve().parents[2]


def _doc(*checks: tuple[str, str, str]) -> dict:
    return {"checks": [{"nodeid": n, "outcome": o, "message": m, "duration_s": 0.1, "rules": ["R"]}
                       for n, o, m in checks]}


def test_compare_separates_stable_from_changing_outcomes() -> None:
    a = _doc(("t::a", "pass", ""), ("t::b", "divergence", "late by 900 ms"), ("t::c", "divergence", "x"))
    b = _doc(("t::a", "pass", ""), ("t::b", "pass", ""), ("t::c", "divergence", "x"))
    c = _doc(("t::a", "pass", ""), ("t::c", "divergence", "x"))            # t::b missing in run 3: unstable too
    got = compare([a, b, c])
    assert got["stable"] == {"t::a": "pass", "t::c": "divergence"}
    assert [r["outcome"] for r in got["unstable"]["t::b"]] == ["divergence", "pass"]
    assert got["unstable"]["t::b"][0]["message"] == "late by 900 ms"


def test_repeat_on_the_reference_is_stable(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-m", "conformance.repeat", "--target", "reference", "--runs", "2",
                           "--out", str(out), "--", "-k", "max_wait_zero or at_leo"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "repeat.json").read_text())
    assert rep["runs"] == 2 and not rep["unstable"] and rep["stable_counts"].get("pass", 0) >= 2, rep
    assert "no check changed its outcome" in proc.stdout


def test_repeat_refuses_a_single_run() -> None:
    proc = subprocess.run([sys.executable, "-m", "conformance.repeat", "--target", "reference", "--runs", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--runs must be at least 2" in proc.stderr
