"""The Spark job gives the same verdicts as the checkers run directly: embedded local[2], the CLI, and a real
standalone cluster (Master + Worker started from the pyspark wheel) driven through spark-submit."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pyarrow.parquet as pq
import pytest

from history import HistoryError, expand_paths, read, write_jsonl, write_parquet
from reports import synth
from reports.analysis import check_history

pyspark = pytest.importorskip("pyspark")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPARK_HOME = os.path.dirname(pyspark.__file__)
N_RUNS = 1000


def _make_runs(d, n: int, ops: int = 60, every: int = 7) -> None:
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        h = synth.generate(f"run-{i:04d}", seed=i, n_ops=ops, processes=3, partitions=2,
                           target=("reference", "tansu")[i % 2], nemesis=("kill", "partition", None)[i % 3])
        if i % every == 0:
            h = synth.with_anomaly(h, synth.SCENARIOS[(i // every) % len(synth.SCENARIOS)])
        if i % 5 == 0:
            write_parquet(h, os.path.join(d, f"run-{i:04d}.parquet"))
        else:  # JSONL in subdirectories: the job searches directories recursively
            sub = os.path.join(d, f"sub{i % 3}")
            os.makedirs(sub, exist_ok=True)
            write_jsonl(h, os.path.join(sub, f"run-{i:04d}.jsonl"))


def _direct(d) -> dict:
    return {h.run_id: check_history(h, budget_s=10).key() for p in expand_paths(str(d)) for h in read(p)}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("histories")
    _make_runs(str(d), N_RUNS)
    return d


@pytest.fixture(scope="module")
def spark():
    from reports.spark_job import build_session

    s = build_session("local[2]")
    yield s
    s.stop()


def test_thousand_runs_same_verdicts_as_direct_checkers(spark, runs_dir, tmp_path):
    from reports.spark_job import run_job

    res = run_job(spark, str(runs_dir), str(tmp_path / "out"), budget_s=10, progress=False)
    got = {k: v.key() for k, v in res.verdicts().items()}
    want = _direct(runs_dir)
    assert len(want) == N_RUNS
    assert got == want
    failing = sum(1 for v in res.verdicts().values() if not v.valid)
    assert failing >= N_RUNS // 7 - 10  # the scenario runs (acceptable int-send-skip ones stay valid)
    # The tables are real Parquet with the expected shapes.
    runs = pq.read_table(str(tmp_path / "out" / "runs")).to_pylist()
    assert len(runs) == N_RUNS and sum(not r["valid"] for r in runs) == failing
    anomalies = pq.read_table(str(tmp_path / "out" / "anomalies")).to_pylist()
    names = {a["anomaly"] for a in anomalies}
    assert names == set(synth.SCENARIOS)
    assert all(a["acceptable"] == (a["anomaly"] == "int-send-skip") for a in anomalies)
    rules = pq.read_table(str(tmp_path / "out" / "rules")).to_pylist()
    assert {r["rule"] for r in rules} >= {"linearizable/partition-log", "anomaly/lost-write"}
    targets = {t["target"]: t for t in pq.read_table(str(tmp_path / "out" / "targets")).to_pylist()}
    assert targets["reference"]["runs"] + targets["tansu"]["runs"] == N_RUNS
    html = (tmp_path / "out" / "report.html").read_text()
    for section in ("Rules: failing runs per target", "Latency", "Timeline of failing run run-0000",
                    "Smallest failing window"):
        assert section in html
    assert html.count("<svg") >= 5
    assert ">no faults</text>" in html and ">None</text>" not in html      # fault-free runs named as such
    total = float(html.split(" s in all before this page")[0].rsplit(";", 1)[1])
    assert total >= res.timings["check_s"] > 0, total


def test_corrupt_file_fails_clearly_or_is_skipped(spark, tmp_path):
    from reports.spark_job import run_job

    d = tmp_path / "h"
    _make_runs(str(d), 6, every=100)
    victim = sorted(expand_paths(str(d)))[-1]
    lines = open(victim).read().splitlines()
    lines[7] = lines[7][:15]
    open(victim, "w").write("\n".join(lines) + "\n")
    with pytest.raises(HistoryError) as e:
        run_job(spark, str(d), str(tmp_path / "out"), progress=False, html=False)
    assert f"{os.path.basename(victim)}:8: corrupt or truncated JSON" in str(e.value)
    res = run_job(spark, str(d), str(tmp_path / "out2"), progress=False, html=False, skip_corrupt=True)
    assert len(res.runs) == 6
    assert sum(r["skipped_lines"] for r in res.runs) >= 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def test_cli_spark_subcommand_exit_codes(tmp_path):
    d = tmp_path / "h"
    _make_runs(str(d), 8, every=4)
    r = subprocess.run([sys.executable, "-m", "reports", "spark", "--histories", str(d / "**" / "*.jsonl"),
                        "--out", str(tmp_path / "out"), "--master", "local[2]"],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stderr[-2000:]  # failing runs present
    assert "runs checked" in r.stdout and "Traceback" not in r.stderr
    assert "[reports" in r.stderr  # progress lines
    assert (tmp_path / "out" / "report.html").exists()
    r = subprocess.run([sys.executable, "-m", "reports", "spark", "--histories", str(tmp_path / "none"),
                        "--out", str(tmp_path / "o2"), "--quiet"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 2 and "error: no history files" in r.stderr and "Traceback" not in r.stderr


def test_standalone_cluster_with_spark_submit(tmp_path):
    d = tmp_path / "h"
    _make_runs(str(d), 40, every=3)
    env = _env()
    port, ui, wui = _free_port(), _free_port(), _free_port()
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    procs: list[subprocess.Popen] = []
    logs = [open(tmp_path / "master.log", "w"), open(tmp_path / "worker.log", "w")]
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True))
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host",
             "127.0.0.1", "--webui-port", str(wui), "--cores", "2", "--memory", "2g"],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 90
        alive = 0
        while time.monotonic() < deadline and not alive:
            assert all(p.poll() is None for p in procs), (tmp_path / "master.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as resp:
                    alive = sum(1 for w in json.load(resp).get("workers", []) if w.get("state") == "ALIVE")
            except OSError:
                pass
            time.sleep(0.5)
        assert alive == 1, "worker never registered"
        out = tmp_path / "out"
        r = subprocess.run(
            [os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", f"spark://127.0.0.1:{port}",
             "--conf", "spark.executor.memory=1g", os.path.join(ROOT, "reports", "spark_job.py"),
             "--histories", str(d), "--out", str(out), "--quiet"],
            cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "40 runs checked" in r.stdout
        rows = pq.read_table(str(out / "runs")).to_pylist()
        # these runs skip no line: nothing indeterminate, so the runs table's seven columns carry the whole key
        direct = _direct(d)
        assert all(k[7:] == ((), ()) for k in direct.values())
        want = {run: k[:7] for run, k in direct.items()}
        got = {}
        for row in rows:
            got[row["run_id"]] = (
                row["run_id"], row["target"], row["nemesis"], row["ops"],
                tuple(sorted((k, v) for k, v in dict(row["anomaly_counts"] or []).items() if v)),
                tuple(sorted(row["bad"] or [])),
                tuple(sorted({"partition-log": row["lin_partition_log"],
                              "committed-offsets": row["lin_committed_offsets"]}.items())),
            )
        assert got == want
        # the job really ran on the cluster: the master lists it as a completed application
        done = []
        for _ in range(40):
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as resp:
                done = json.load(resp).get("completedapps", [])
            if done:
                break
            time.sleep(0.5)
        assert [a["name"] for a in done] == ["kafka-history-checks"]
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for f in logs:
            f.close()
