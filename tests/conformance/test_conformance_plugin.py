"""The results plugin classifies outcomes the way the report relies on, writes a history, and feeds allure.

A small suite written to a temp dir runs in a child pytest against the reference broker: one check per outcome.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from history import read as read_history

ROOT = Path(__file__).resolve().parents[2]

SUITE = textwrap.dedent('''
    import pytest
    from conformance.rules import rule
    from conformance.wire import TargetDiverged

    rule("DEMO-A", "demo rule A", "nowhere", suite="demo")
    rule("DEMO-B", "demo rule B", "nowhere", suite="demo")

    @pytest.mark.rule("DEMO-A")
    async def test_pass(wire, evidence):
        topic = await wire.create_topic()
        await wire.produce(topic, count=2, size=5)
        res = await wire.fetch([(topic, 0, 0)], max_wait_ms=50, min_bytes=1)
        evidence.timing("fetch", res.rtt_ms, expect_max_ms=5000)
        assert res.part(topic).offsets == [0, 1]

    @pytest.mark.rule("DEMO-A", "DEMO-B")
    def test_divergence(evidence):
        evidence.note("seen", 41)
        assert 41 == 42, "the target said 41"

    @pytest.mark.rule("DEMO-B")
    def test_target_broke_protocol():
        raise TargetDiverged("broker closed the connection")

    @pytest.mark.rule("DEMO-B")
    def test_harness_error():
        raise RuntimeError("bug in the check")

    @pytest.mark.rule("DEMO-B")
    def test_skipped():
        pytest.skip("not applicable: no replication")

    @pytest.mark.rule("NO-SUCH-RULE")
    def test_unknown_rule():
        pass

    def test_unmarked_is_ignored():
        pass
''')


def test_outcomes_history_and_allure(tmp_path: Path) -> None:
    (tmp_path / "test_demo_suite.py").write_text(SUITE)
    results = tmp_path / "r.json"
    allure = tmp_path / "allure"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_demo_suite.py"), "-q",
                           "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", "--rootdir", str(tmp_path),
                           "--target", "reference", "--target-config", "memory=true",
                           "--kct-results-file", str(results), "--alluredir", str(allure)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=200)
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(results.read_text())
    got = {c["name"]: c["outcome"] for c in doc["checks"]}
    assert got == {"test_pass": "pass", "test_divergence": "divergence", "test_target_broke_protocol": "divergence",
                   "test_harness_error": "error", "test_skipped": "skipped", "test_unknown_rule": "error"}, got
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["test_divergence"]["message"].startswith("the target said 41")
    assert checks["test_divergence"]["evidence"]["notes"] == {"seen": 41}
    assert checks["test_divergence"]["rules"] == ["DEMO-A", "DEMO-B"]
    assert checks["test_skipped"]["message"] == "not applicable: no replication"
    assert "NO-SUCH-RULE" in checks["test_unknown_rule"]["message"]
    assert checks["test_pass"]["evidence"]["timings"][0]["label"] == "fetch"
    assert [x["api"] for x in checks["test_pass"]["evidence"]["exchanges"]][-2:] == ["Produce", "Fetch"]
    assert doc["summary"] == {"pass": 1, "divergence": 2, "skipped": 1, "error": 2}
    assert doc["target"]["name"] == "reference" and doc["target"]["bootstrap"]

    (hist,) = read_history(doc["history"])
    assert hist.run_id == doc["run_id"]
    sends = [op for op in hist.ops if op["f"] == "send" and op["type"] == "ok"]
    fetches = [op for op in hist.ops if op["f"] == "fetch" and op["type"] == "ok"]
    assert [r["offset"] for r in sends[0]["value"]["records"]] == [0, 1]
    assert [r["value"] for r in fetches[0]["value"]["records"]] == [r["value"] for r in sends[0]["value"]["records"]]

    labelled = {}
    for f in allure.glob("*-result.json"):
        r = json.loads(f.read_text())
        labelled[r["name"]] = ({lab["value"] for lab in r["labels"] if lab["name"] == "rule"},
                               [a["name"] for a in r.get("attachments", [])], r["status"],
                               {p["name"]: p["value"] for p in r.get("parameters", [])})
    rules, attachments, status, params = labelled["test_divergence"]
    assert rules == {"DEMO-A", "DEMO-B"} and "evidence" in attachments and status == "failed"
    assert "reference" in params["target"]
    assert labelled["test_harness_error"][2] == "broken"


def test_plugin_is_passive_without_rule_marks(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_x():\n    assert True\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_plain.py"), "-q", "-p",
                           "no:cacheprovider", "--rootdir", str(tmp_path), "--kct-results", str(tmp_path / "res")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert not (tmp_path / "res").exists(), "no results file for a session without conformance checks"
