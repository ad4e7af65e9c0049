"""Benchmark the linearizability side of the per-run check (prints figures; about a minute).

    /work/venv/bin/python benchmarks/bench_linearizability.py [--runs 20] [--files DIR] [--repeat 5] [--lin-ops 10000]

1. Per run, on 10,000-operation runs (10 processes, 10 partitions): ``log_operations``, ``check_operations`` with
   ``PARTITION_LOG``, ``offset_operations``, ``check_operations`` with ``COMMITTED_OFFSETS``, and their total.
   Runs are ``synth.generate(f"r{i}", seed=i, n_ops=10000, processes=10, partitions=10)`` for ``i`` in 1..runs,
   plus (when present) the files of ``--files`` read with ``history.read`` (default: the Spark benchmark's
   /tmp/bench-spark-histories/batch-000). Each figure is the median over runs of the best of ``--repeat``.
2. The same, the Spark job's way: the run split into parts (``reports.analysis.split_parts``), extraction + check
   per part, summed over the run's parts.
3. One partition with about ``--lin-ops`` log operations from 10 concurrent processes (as in bench_checkers.py):
   extraction and check, and the check of the committed-offsets register of the same run.

GC is off while timing (as in the Spark job, history.io.gc_paused); ``--gc`` leaves it on.

Before/after in one session: copy this script into a checkout of the older revision and run both, e.g.

    git worktree add --detach /tmp/lin-base fc54f7a && cp benchmarks/bench_linearizability.py /tmp/lin-base/benchmarks/
    /work/venv/bin/python /tmp/lin-base/benchmarks/bench_linearizability.py; /work/venv/bin/python benchmarks/bench_linearizability.py
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from history import read  # noqa: E402
from reports import synth  # noqa: E402
from reports.linearizability import check_operations  # noqa: E402
from reports.models import COMMITTED_OFFSETS, PARTITION_LOG, log_operations, offset_operations  # noqa: E402


def best_of(n: int, fn) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


STAGES = ("log_operations", "check partition-log", "offset_operations", "check committed-offsets")


def per_run(ops: list[dict], repeat: int) -> dict[str, float]:
    lops = log_operations(ops)
    oops = offset_operations(ops)
    return {
        "log_operations": best_of(repeat, lambda: log_operations(ops)),
        "check partition-log": best_of(repeat, lambda: check_operations(PARTITION_LOG, lops, budget_s=60)),
        "offset_operations": best_of(repeat, lambda: offset_operations(ops)),
        "check committed-offsets": best_of(repeat, lambda: check_operations(COMMITTED_OFFSETS, oops, budget_s=60)),
    }


def per_parts(ops: list[dict], repeat: int) -> dict[str, float]:
    from reports.analysis import TP, split_parts

    parts = split_parts(ops)
    tp = [p for kind, _k, p in parts if kind == TP]
    grp = [p for kind, _k, p in parts if kind != TP]

    def lin_tp() -> None:
        for p in tp:
            check_operations(PARTITION_LOG, log_operations(p), budget_s=60)

    def lin_grp() -> None:
        for p in grp:
            check_operations(COMMITTED_OFFSETS, offset_operations(p), budget_s=60)

    return {"parts partition-log": best_of(repeat, lin_tp), "parts committed-offsets": best_of(repeat, lin_grp)}


def report(label: str, rows: list[dict[str, float]]) -> None:
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"{label} ({len(rows)} runs, median of per-run best):")
    for k, v in med.items():
        print(f"  {k:<26} {v * 1e3:8.2f} ms")
    print(f"  {'total':<26} {sum(med.values()) * 1e3:8.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="generated 10k-op runs")
    ap.add_argument("--files", default="/tmp/bench-spark-histories/batch-000", help="directory of *.jsonl runs")
    ap.add_argument("--max-files", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lin-ops", type=int, default=10_000)
    ap.add_argument("--no-parts", action="store_true", help="skip the Spark-style per-part figures")
    ap.add_argument("--gc", action="store_true", help="leave the garbage collector on while timing")
    args = ap.parse_args()
    if not args.gc:
        gc.disable()  # as the Spark job runs it (history.io.gc_paused)

    runs = [synth.generate(f"r{i}", seed=i, n_ops=10_000, processes=10, partitions=10).ops
            for i in range(1, args.runs + 1)]
    report("generated 10k-op runs, whole run", [per_run(ops, args.repeat) for ops in runs])
    files = sorted(glob.glob(os.path.join(args.files, "*.jsonl")))[: args.max_files]
    file_runs = [h.ops for f in files for h in read(f)]
    if file_runs:
        report(f"{args.files} ({len(files)} files), whole run", [per_run(ops, args.repeat) for ops in file_runs])
    if not args.no_parts:
        report("generated 10k-op runs, Spark-style parts (extraction + check)",
               [per_parts(ops, args.repeat) for ops in runs])
        if file_runs:
            report(f"{args.files}, Spark-style parts (extraction + check)",
                   [per_parts(ops, args.repeat) for ops in file_runs])

    n = int(args.lin_ops * 2.3)  # about 43% of a generated run's operations become log operations
    lh = synth.generate("lin", seed=2, n_ops=n, processes=10, partitions=1, p_info=0.05)
    ops = log_operations(lh.ops)
    dt_x = best_of(args.repeat, lambda: log_operations(lh.ops))
    r = check_operations(PARTITION_LOG, ops, budget_s=300)
    dt = best_of(args.repeat, lambda: check_operations(PARTITION_LOG, ops, budget_s=300))
    print(f"single partition, 10 processes: {len(ops):,} log ops: extraction {dt_x * 1e3:.1f} ms, "
          f"check {r.verdict} in {dt * 1e3:.1f} ms ({len(ops) / dt:,.0f} ops/s)")
    oops = offset_operations(lh.ops)
    r = check_operations(COMMITTED_OFFSETS, oops, budget_s=300)
    dt = best_of(args.repeat, lambda: check_operations(COMMITTED_OFFSETS, oops, budget_s=300))
    print(f"  committed-offsets of that run: {len(oops):,} ops: {r.verdict} in {dt * 1e3:.1f} ms")
    bad = synth.with_anomaly(lh, "nonmonotonic-send")
    bops = log_operations(bad.ops)
    r = check_operations(PARTITION_LOG, bops, budget_s=300)
    dt = best_of(args.repeat, lambda: check_operations(PARTITION_LOG, bops, budget_s=300))
    print(f"  with a violation: {r.verdict} in {dt * 1e3:.1f} ms (incl. smallest-window search)")


if __name__ == "__main__":
    main()
