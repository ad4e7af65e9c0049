"""A live cluster of one broker: the run's topic gets replication factor 1 (before: every run failed "could not
create topic ... replication factor 3"), and a run in which nothing was acknowledged gets no verdict (before:
exit 0, VALID — a check that could not fail: with message.max.bytes below one record's batch every send is
refused MESSAGE_TOO_LARGE, as Kafka refuses it)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cli import main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_run import _stop  # noqa: E402


def _serve(tmp_path: Path, *config: str) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "reference_broker", "serve", "--listen", "127.0.0.1:0",
                             "--data-dir", str(tmp_path / "data"), *(a for c in config for a in ("--config", c))],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and not line.startswith("READY"):
            line = proc.stdout.readline()
        assert line.startswith("READY"), "broker did not start"
        yield line.split()[1]
    finally:
        _stop(proc, 20)


@pytest.mark.timeout(120)
def test_a_run_on_one_live_broker_creates_its_topic_and_judges(tmp_path: Path) -> None:
    for bootstrap in _serve(tmp_path):
        rc = main(["run", "--bootstrap", bootstrap, "--nemesis", "none", "--duration", "4s", "--rate", "40",
                   "--quiet", "--out", str(tmp_path / "out")])
        assert rc == 0
        res = json.loads(next((tmp_path / "out").glob("*.result.json")).read_text())
        assert res["stats"]["ok"] > 50 and res["verdict"]["valid"], res["stats"]


@pytest.mark.timeout(120)
def test_nothing_acknowledged_is_no_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bootstrap in _serve(tmp_path, "message.max.bytes=30"):
        rc = main(["run", "--bootstrap", bootstrap, "--nemesis", "none", "--duration", "3s", "--rate", "20",
                   "--quiet", "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        res = json.loads(next((tmp_path / "out").glob("*.result.json")).read_text())
        assert res["stats"]["ok"] == 0 and res["stats"]["fail"] > 0, res["stats"]
        assert rc == 2 and res["exit_code"] == 2, (rc, err)
        assert "no send acknowledged" in res["message"], res["message"]
