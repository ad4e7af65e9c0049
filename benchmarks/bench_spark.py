"""Benchmark the Spark job (prints figures): wall time on N runs x M ops with local[2], and scaling 100 -> N runs.

    /work/venv/bin/python benchmarks/bench_spark.py [--runs 1000] [--ops 10000] [--master local[2]] [--data DIR]

Generated histories (every 10th run with a one-anomaly scenario) are written once to ``--data`` (reused when the
same parameters were generated before), 100 runs per subdirectory, so the 100-run figure reads one of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from history import write_jsonl  # noqa: E402
from reports import synth  # noqa: E402


def _gen(args: tuple) -> int:
    d, i, ops = args
    h = synth.generate(f"run-{i:05d}", seed=i, n_ops=ops, processes=10, partitions=10,
                       target=("reference", "tansu", "docker")[i % 3], nemesis=("kill", "partition", None)[i % 3])
    if i % 10 == 0:
        h = synth.with_anomaly(h, synth.SCENARIOS[(i // 10) % len(synth.SCENARIOS)])
    sub = os.path.join(d, f"batch-{i // 100:03d}")
    os.makedirs(sub, exist_ok=True)
    write_jsonl(h, os.path.join(sub, f"run-{i:05d}.jsonl"))
    return len(h.ops)


def generate(d: str, runs: int, ops: int, workers: int) -> int:
    marker = os.path.join(d, "DONE.json")
    want = {"runs": runs, "ops": ops, "version": 1}
    if os.path.exists(marker) and json.load(open(marker))["params"] == want:
        return json.load(open(marker))["total_ops"]
    os.makedirs(d, exist_ok=True)
    with ProcessPoolExecutor(workers) as pool:
        total = sum(pool.map(_gen, [(d, i, ops) for i in range(runs)], chunksize=8))
    with open(marker, "w") as fh:
        json.dump({"params": want, "total_ops": total}, fh)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "bench-spark-histories"))
    ap.add_argument("--workers", type=int, default=2, help="processes generating histories")
    args = ap.parse_args()

    t = time.perf_counter()
    total = generate(args.data, args.runs, args.ops, args.workers)
    print(f"data: {args.runs} runs, {total:,} operations in {args.data} (ready in {time.perf_counter() - t:.0f}s)")

    os.environ.setdefault("REPORTS_SPARK_DRIVER_MEMORY", "4g")
    from reports.spark_job import build_session, run_job

    t = time.perf_counter()
    spark = build_session(args.master)
    print(f"Spark session ({args.master}): {time.perf_counter() - t:.1f}s")
    try:
        sizes = [n for n in (100, args.runs) if n <= args.runs]
        for n in dict.fromkeys(sizes):
            src = os.path.join(args.data, "batch-000") if n == 100 and args.runs > 100 else args.data
            with tempfile.TemporaryDirectory() as out:
                t = time.perf_counter()
                res = run_job(spark, src, out, budget_s=10, progress=True)
                wall = time.perf_counter() - t
            ops = sum(r["ops"] for r in res.runs)
            failing = sum(1 for r in res.runs if not r["valid"])
            print(f"{len(res.runs)} runs x ~{args.ops} ops ({ops:,} ops): wall {wall:.1f}s "
                  f"(check {res.timings['check_s']:.1f}s, aggregate+write {res.timings['aggregate_s']:.1f}s), "
                  f"{ops / wall:,.0f} ops/s, {failing} failing runs")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
