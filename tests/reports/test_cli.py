"""``python -m reports``: exit codes, clear errors without tracebacks, and the small subcommands."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from history import read, write_jsonl
from reports import synth
from reports.__main__ import SUBCOMMANDS, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def clean(tmp_path):
    p = tmp_path / "clean.jsonl"
    write_jsonl(synth.generate("c", seed=1, n_ops=400), str(p))
    return p


def test_check_clean_and_anomalous(tmp_path, clean, capsys):
    assert main(["check", str(clean)]) == 0
    assert "VALID" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    write_jsonl(synth.with_anomaly(synth.generate("b", seed=1, n_ops=400), "G1a"), str(bad))
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "G1a: 1" in out and "linearizable partition-log: illegal" in out
    assert main(["check", "--json", str(bad)]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res[0]["anomalies"]["counts"] == {"G1a": 1}
    assert res[0]["linearizability"]["partition-log"]["illegal"][0]["key"] == synth.ANOMALY_KEY


def test_corrupt_file_and_bad_arguments_exit_2_without_traceback(tmp_path, clean):
    lines = clean.read_text().splitlines()
    lines[12] = lines[12][:20]
    bad = tmp_path / "trunc.jsonl"
    bad.write_text("\n".join(lines))
    r = subprocess.run([sys.executable, "-m", "reports", "check", str(bad)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:13: corrupt or truncated JSON" in r.stderr
    r = subprocess.run([sys.executable, "-m", "reports", "check", "--skip-corrupt", str(bad)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "skipped" in r.stderr
    for argv in (["nope"], ["check"], ["check", str(clean), "--budget", "0"], ["check", str(tmp_path / "missing")]):
        r = subprocess.run([sys.executable, "-m", "reports", *argv], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip(), argv


def test_export_import_and_generate(tmp_path, clean, capsys):
    edn = tmp_path / "h.edn"
    assert main(["export-edn", str(clean), "--out", str(edn)]) == 0
    assert edn.read_text().startswith(";; run c")
    back = tmp_path / "back.jsonl"
    assert main(["import-jepsen", str(edn), "--out", str(back), "--topic", "t"]) == 0
    orig = [o for o in read(str(clean))[0].ops if o["f"] in ("send", "poll")]
    assert [(o["type"], o["value"]) for o in read(str(back))[0].ops if o["f"] in ("send", "poll")] == [
        (o["type"], o["value"]) for o in orig]
    assert main(["generate", "--out", str(tmp_path / "gen"), "--runs", "3", "--ops", "200",
                 "--anomaly-every", "2"]) == 0
    assert sorted(os.listdir(tmp_path / "gen")) == ["run-00000.jsonl", "run-00001.jsonl", "run-00002.jsonl"]
    assert main(["check", str(tmp_path / "gen" / "run-00000.jsonl")]) == 1  # has a scenario
    assert main(["check", str(tmp_path / "gen" / "run-00001.jsonl")]) == 0


def test_subcommands_are_extensible():
    assert {"check", "spark", "export-edn", "import-jepsen", "generate"} <= set(SUBCOMMANDS)
