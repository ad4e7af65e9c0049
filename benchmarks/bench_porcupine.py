#!/usr/bin/env python3
"""Partition-log linearizability vs Porcupine (Go), same histories, same run: an illegal verdict WITH its minimal
failing window (ours) against Porcupine's verdict, and legal histories, at 1k / 10k / 30k operations.

Histories come from ../shared/bench/porcupine/partition_history.py (one partition log: append -> offset, read of
an offset -> value or null); its converter maps them to our contract. Porcupine's harness is built at run time
into a temporary directory (needs ``go`` and Porcupine's source in /tmp/porcupine, see that directory's README);
nothing built or fetched is kept. Times are each checker's own check time (parsing excluded on both sides),
medians of --repeat runs. Porcupine gets ``-drop-null-reads`` because our converted histories drop them too.

    .venv/bin/python benchmarks/bench_porcupine.py [--sizes 1000,10000,30000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
HARNESS = os.path.join(os.path.dirname(ROOT), "shared", "bench", "porcupine")
if not os.path.isdir(HARNESS):
    HARNESS = "/work/shared/bench/porcupine"

from history import read  # noqa: E402
from reports.linearizability import check_operations  # noqa: E402
from reports.models import PARTITION_LOG, log_operations  # noqa: E402


def build_harness(tmp: str) -> str:
    """Porcupine's harness, built into ``tmp`` from the shared sources (go.mod points at /tmp/porcupine)."""
    src = os.path.join(tmp, "harness")
    os.makedirs(src)
    for f in ("go.mod", "main.go"):
        shutil.copy(os.path.join(HARNESS, f), src)
    exe = os.path.join(tmp, "porcharness")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOCACHE": os.path.join(tmp, "gocache")}
    subprocess.run(["go", "build", "-o", exe, "."], cwd=src, env=env, check=True)
    return exe


def ours(path: str) -> tuple[float, str, int | None]:
    (h,) = read(path)
    ops = log_operations(h.typed_ops())
    t0 = time.perf_counter()
    r = check_operations(PARTITION_LOG, ops, budget_s=600)
    dt = time.perf_counter() - t0
    cex = r.illegal_parts[0].counterexample if r.illegal_parts else None
    return dt, r.verdict, cex["prefix_completions"] if cex else None


def porcupine(exe: str, path: str) -> tuple[float, str]:
    # (the harness exits 1 on an illegal history: its verdict is in the JSON)
    out = subprocess.run([exe, "-timeout", "600s", "-drop-null-reads", path], capture_output=True, text=True,
                         check=False).stdout
    res = json.loads(out)
    return float(res["check_s"]), res["result"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,30000")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-porcupine-") as tmp:
        exe = build_harness(tmp)
        print(f"{'history':>12} {'ops':>6} {'ours s':>9} {'porcupine s':>12} {'ratio':>7}  verdicts")
        for n in map(int, a.sizes.split(",")):
            for bad in (True, False):
                raw = os.path.join(tmp, f"h{n}{'bad' if bad else 'good'}.jsonl")
                conv = raw + ".contract.jsonl"
                subprocess.run([sys.executable, os.path.join(HARNESS, "partition_history.py"), raw, "--ops", str(n),
                                *(["--bad"] if bad else [])], check=True, capture_output=True)
                subprocess.run([sys.executable, os.path.join(HARNESS, "ph_convert.py"), raw, conv], check=True)
                mine = [ours(conv) for _ in range(a.repeat)]
                theirs = [porcupine(exe, raw) for _ in range(a.repeat)]
                m = statistics.median(x[0] for x in mine)
                p = statistics.median(x[0] for x in theirs)
                print(f"{'illegal' if bad else 'legal':>12} {n:>6} {m:9.3f} {p:12.3f} {p / m:6.1f}x  "
                      f"{mine[0][1]} (window after {mine[0][2]} completions) / {theirs[0][1]}", flush=True)


if __name__ == "__main__":
    main()
