"""Benchmark the history checkers (prints figures; a few minutes at most).

    /work/main/.venv/bin/python benchmarks/bench_checkers.py [--ops 1000000] [--lin-ops 10000] [--repeat 5]

1. Anomaly checker: operations per second over one generated run of ``--ops`` operations (10 processes,
   10 partitions, polls of up to 8 records), single core; the record-by-record checker on the same run as the
   peer. Then the run written to JSONL and read back (validated): read speed, the checker on the read history,
   read + check together, and the whole ``python -m reports check`` command on that file.
2. Linearizability: one partition with ``--lin-ops`` log operations from 10 concurrent processes (Wing-Gong-Lowe),
   and the committed-offsets register of the same run.

Every timed figure is the median (and best) of ``--repeat`` runs, one core, with the load average before and
after: the machine may be shared, so compare medians taken in one run.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from history import read, write_jsonl  # noqa: E402
from reports import synth  # noqa: E402
from reports.checkers import analyze  # noqa: E402
from reports.checkers_simple import analyze as analyze_simple  # noqa: E402
from reports.linearizability import check_operations  # noqa: E402
from reports.models import COMMITTED_OFFSETS, PARTITION_LOG, log_operations, offset_operations  # noqa: E402


def times_of(n: int, fn) -> list[float]:  # noqa: ANN001
    """Seconds of ``n`` runs of ``fn`` (its result freed between runs, untimed)."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = fn()
        out.append(time.perf_counter() - t)
        del r
    return out


def best_of(n: int, fn) -> float:  # noqa: ANN001
    return min(times_of(n, fn))


def _fig(ts: list[float], n_ops: int) -> str:
    """Median and best of a list of timings, as seconds and ops/s."""
    med, best = statistics.median(ts), min(ts)
    return (f"median {med:.2f}s ({n_ops / med:,.0f} ops/s), best {best:.2f}s ({n_ops / best:,.0f} ops/s), "
            f"{len(ts)} runs")


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--lin-ops", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure (median and best are shown)")
    args = ap.parse_args()
    print(f"before: {_load()}")

    t = time.perf_counter()
    h = synth.generate("bench", seed=1, n_ops=args.ops, processes=10, partitions=10)
    gen_s = time.perf_counter() - t
    records = sum(len(o["value"]["records"]) for o in h.ops if o["f"] == "poll" and o["type"] == "ok")
    print(f"history: {len(h.ops):,} operations, {records:,} polled records (generated in {gen_s:.1f}s)")

    res = analyze(h.ops, h.settings)
    assert res.valid, res.counts
    ts = times_of(args.repeat, lambda: analyze(h.ops, h.settings))
    dt = statistics.median(ts)
    print(f"anomaly checker (columnar) on the generated run: {_fig(ts, len(h.ops))}; "
          f"{(len(h.ops) + records) / dt:,.0f} ops+records/s (median), one core")
    dt_simple = best_of(1, lambda: analyze_simple(h.ops, h.settings))
    print(f"peer, same run: record-by-record checker {dt_simple:.2f}s -> {len(h.ops) / dt_simple:,.0f} ops/s; "
          f"columnar is {dt_simple / dt:.2f}x")
    bad = synth.with_anomaly(h, "lost-write")
    dt_bad = best_of(1, lambda: analyze(bad.ops, bad.settings))
    print(f"anomaly checker with a lost write: {len(bad.ops) / dt_bad:,.0f} ops/s, "
          f"found {sorted(analyze(bad.ops).found)}")

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "h.jsonl")
        write_jsonl(h, path)
        size = os.path.getsize(path)
        h = bad = None  # free the generated run before reading it back
        gc.collect()
        n = sum(1 for _ in open(path, "rb")) - 1  # noqa: SIM115 - operations: lines but the header
        ts_read = times_of(args.repeat, lambda: read(path))
        print(f"validated JSONL read ({size / 1e6:.0f} MB): {_fig(ts_read, n)}")
        (rh,) = read(path)
        cols = getattr(rh, "columns", None)
        ts_chk = times_of(args.repeat, lambda: analyze(rh.op_view(), rh.settings, cols))
        how = "with the columns the reader gathered" if cols is not None else "gathering its own columns"
        print(f"anomaly checker on the read history ({how}): {_fig(ts_chk, n)}")
        rh = cols = None
        gc.collect()

        def read_and_check() -> object:
            (r,) = read(path)
            # op_view: the checker builds only the operations it cites; the linearizability extraction reads the
            # decoded structs (History.typed_ops), so no operation dict is built; the run is freed after the timing
            return r, analyze(r.op_view(), r.settings, r.columns)

        print(f"read + check (one call each, as `python -m reports check` runs them): "
              f"{_fig(times_of(args.repeat, read_and_check), n)}")
        # The whole command a user runs: read, anomaly checker, both linearizability models, the summary.
        cmd = [sys.executable, "-m", "reports", "check", path]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ts_cli = times_of(max(1, args.repeat // 2), lambda: subprocess.run(cmd, cwd=root, check=True,
                                                                          stdout=subprocess.DEVNULL))
        print(f"`python -m reports check` (whole process, incl. linearizability): {_fig(ts_cli, n)}")
    print(f"after: {_load()}")

    # Linearizability: one partition, 10 concurrent processes, about --lin-ops log operations.
    n = int(args.lin_ops * 2.3)  # about 43% of a generated run's operations become log operations
    lh = synth.generate("lin", seed=2, n_ops=n, processes=10, partitions=1, p_info=0.05)
    ops = log_operations(lh.ops)
    t = time.perf_counter()
    r = check_operations(PARTITION_LOG, ops, budget_s=300)
    dt = time.perf_counter() - t
    print(f"linearizability partition-log: {len(ops):,} ops in 1 partition, 10 processes: {r.verdict} in {dt:.2f}s "
          f"({len(ops) / dt:,.0f} ops/s)")
    oops = offset_operations(lh.ops)
    t = time.perf_counter()
    r = check_operations(COMMITTED_OFFSETS, oops, budget_s=300)
    dt = time.perf_counter() - t
    print(f"linearizability committed-offsets: {len(oops):,} ops: {r.verdict} in {dt:.2f}s")
    bad = synth.with_anomaly(lh, "nonmonotonic-send")
    t = time.perf_counter()
    r = check_operations(PARTITION_LOG, log_operations(bad.ops), budget_s=300)
    dt = time.perf_counter() - t
    print(f"linearizability with a violation: {r.verdict} in {dt:.2f}s (incl. smallest-window search)")


if __name__ == "__main__":
    main()
