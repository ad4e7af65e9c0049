"""The Spark job and the CLI agree on every never-cry-wolf case (test_never_cry_wolf.py): the same verdicts and
the same anomaly counts per run, and the same files refused (0-byte JSONL and Parquet, unreadable Parquet).
One Spark session (local[2]) for the module, one job over one directory of real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_never_cry_wolf import ROOT, H, T, _info_poll_history  # rootdir-relative (tests are not a package)

from history import read
from reports.analysis import check_history

pyspark = pytest.importorskip("pyspark")


def _cases(d) -> dict[str, str]:  # noqa: ANN001
    """file name -> how the CLI must end (exit code)"""
    H("unmatched").send(0, 1, 0).send(1, 2, typ=None).poll(2, [(0, 1), (1, 2)]).write(d / "unmatched.jsonl")
    H("info").send(0, 1, 0).send(1, 2, typ="info").poll(2, [(0, 1), (1, 2)]).write(d / "info.jsonl")
    H("stale").send(0, 1, 0).poll(1, [], positions={f"{T}/0": 0}).write(d / "stale.jsonl")
    (H("past").send(0, 1, 0).poll(2, [(0, 1)]).poll(1, [], positions={f"{T}/0": 1})
     .poll(1, [], positions={f"{T}/0": 9}).write(d / "past.jsonl"))
    h = H("cascade").send(0, 1, 0).send(1, 2, 1)
    bad = len(h.lines) - 1
    h.send(1, 3, 2).poll(2, [(0, 1), (1, 2), (2, 3)])
    h.lines[bad] = h.lines[bad][:25]
    h.write(d / "cascade.jsonl")
    big = 10**40
    H("big").send(0, big, 0).send(0, big + 1, 1).poll(1, [(0, big), (1, big + 1)]).write(d / "big.jsonl")
    huge = "y" * (1 << 20)
    H("huge").send(0, huge, 0).poll(1, [(0, huge), (1, huge)]).write(d / "huge.jsonl")
    h = H("deep").send(0, 1, 0).poll(1, [(0, 1)])
    h.lines.append('{"run_id": "deep", "index": 9, "time_ns": 99999, "process": 5, "type": "info", "f": "x", '
                   f'"value": {"[" * 50_000 + "]" * 50_000}}}')
    h.write(d / "deep.jsonl")
    for how in ("info", "unmatched", "fail"):
        _info_poll_history(how, f"{how}-poll").write(d / f"{how}-poll.jsonl")
    (H("acks1", settings={"sub_via": ["assign"], "acks": 1}).send(0, 1, 0).poll(1, [], positions={f"{T}/0": 0})
     .poll(2, [(0, 1)]).write(d / "acks1.jsonl"))
    # --skip-corrupt: a skipped poll completion, a skipped assign (lost-write / nonmonotonic-poll rest on their
    # absence: indeterminate, exit 2), and a skipped line beside a proven inconsistent-offsets (still exit 1)
    h = H("skipped-poll").send(0, 1, 0).send(0, 2, 1).poll(1, [(0, 1), (1, 2)])
    h.lines[-1] = h.lines[-1][:25]
    h.send(0, 3, 2).poll(1, [(2, 3)]).write(d / "skipped-poll.jsonl")
    h = H("skipped-assign").send(0, 1, 0).send(0, 2, 1).poll(1, [(0, 1), (1, 2)])
    h.op(1, "invoke", "assign", {"partitions": [f"{T}/0"]}).op(1, "ok", "assign", {"partitions": [f"{T}/0"]})
    h.lines[-2], h.lines[-1] = h.lines[-2][:25], h.lines[-1][:25]
    h.poll(1, [(0, 1)]).write(d / "skipped-assign.jsonl")
    h = H("skipped-but-proven").send(0, 1, 0).send(1, 2, 0).poll(2, [(0, 1)])
    h.lines[-1] = h.lines[-1][:25]
    h.write(d / "skipped-but-proven.jsonl")
    # transactional runs (issue 20): clean (aborts, info txns, consume-transform-produce), a torn read, a G1c
    # cycle (both invalid), a G0 cycle under ww_deps (found, acceptable)
    from history import write_jsonl
    from reports import synth

    write_jsonl(synth.generate_txn("txn-clean", seed=5, n_ops=400), str(d / "txn-clean.jsonl"))
    for kind in ("torn", "G1c", "G0"):
        write_jsonl(synth.with_txn_anomaly(synth.generate_txn(f"txn-{kind}", seed=5, n_ops=400), kind),
                    str(d / f"txn-{kind}.jsonl"))
    # metadata runs (reports.metadata): a clean one (a lagging read, acceptable) and a lost create (its own
    # topic-metadata model illegal too)
    from test_metadata_checker import _create, _delete, _final, _read
    from test_metadata_checker import _ops as _meta_ops

    from history import History

    for name, steps in (("meta-clean", [*_create(0, "a", 2), *_read(1, 2, {"a": None}), *_create(1, "b", 1),
                                        *_delete(1, "b"), *_final(2, {"a": 2, "b": None})]),
                        ("meta-lost", [*_create(0, "a", 2), *_final(1, {"a": None})])):
        ops = [{**op, "run_id": name} for op in _meta_ops(steps)]
        write_jsonl(History(name, ops, target="reference", settings={"workload": "metadata"}), str(d / f"{name}.jsonl"))
    (d / "empty.jsonl").write_bytes(b"")
    (d / "empty.parquet").write_bytes(b"")
    (d / "garbage.parquet").write_bytes(b"PAR1 this is not parquet")
    return {"unmatched": 0, "info": 0, "stale": 1, "past": 0, "cascade": 0, "big": 0, "huge": 1, "deep": 0,
            "info-poll": 0, "unmatched-poll": 0, "fail-poll": 1, "acks1": 0, "skipped-poll": 2, "skipped-assign": 2,
            "skipped-but-proven": 1, "txn-clean": 0, "txn-torn": 1, "txn-G1c": 1, "txn-G0": 0, "meta-clean": 0, "meta-lost": 1,
            "empty.jsonl": 2, "empty.parquet": 2, "garbage.parquet": 2}


def test_spark_and_cli_agree_on_every_case(tmp_path):
    from reports.spark_job import build_session, run_job

    d = tmp_path / "h"
    d.mkdir()
    want_exit = _cases(d)
    spark = build_session("local[2]")
    try:
        res = run_job(spark, str(d), str(tmp_path / "out"), budget_s=10, skip_corrupt=True, progress=False,
                      html=False)
    finally:
        spark.stop()
    got = {k: v.key() for k, v in res.verdicts().items()}
    direct = {}
    for name in sorted(os.listdir(d)):
        path = str(d / name)
        r = subprocess.run([sys.executable, "-m", "reports", "check", "--skip-corrupt", "--json", path], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        key = name if name.split(".")[0] not in want_exit else name.split(".")[0]
        assert r.returncode == want_exit[key], (name, r.stderr[-500:])
        assert "Traceback" not in r.stderr
        if r.returncode == 2 and not r.stdout.strip():       # refused: no verdict at all
            continue
        (cli,) = json.loads(r.stdout)
        (h,) = read(path, skip_corrupt=True)
        direct[h.run_id] = check_history(h, budget_s=10).key()
        assert cli["valid"] == (r.returncode == 0)
        assert cli["status"] == res_status(res, h.run_id) and cli["indeterminate"] == list(got[h.run_id][7])
        assert cli["anomalies"]["counts"] == dict(got[h.run_id][4])
        assert {m: v["verdict"] for m, v in cli["linearizability"].items()} == dict(got[h.run_id][6])
    assert got == direct
    assert {os.path.basename(e["path"]) for e in res.errors} == {"empty.jsonl", "empty.parquet", "garbage.parquet"}
    assert {r["run_id"]: r["valid"] for r in res.runs} == {
        k: want_exit[k] == 0 for k in want_exit if "." not in k}
    assert {r["run_id"]: r["status"] for r in res.runs if r["run_id"].startswith("skipped")} == {
        "skipped-poll": "indeterminate", "skipped-assign": "indeterminate", "skipped-but-proven": "invalid"}


def res_status(res, run_id: str) -> str:  # noqa: ANN001
    return next(r["status"] for r in res.runs if r["run_id"] == run_id)
