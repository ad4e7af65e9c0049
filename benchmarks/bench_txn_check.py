"""Benchmark the transactional checkers on a 1M-operation transactional history (issue 20; a few minutes).

    .venv/bin/python benchmarks/bench_txn_check.py [--ops 1000000] [--repeat 5] [--cli]

The history: ``reports.synth.generate_txn`` - 6 transactional producers (1-4 sends over 8 partitions, ~10%
aborted on purpose, ~3% of unknown outcome, one never completed), 3 read_committed consumers, 3
consume-transform-produce processes (read_committed input, outputs to 4 partitions, input offsets in the txn),
written to JSONL. Timed, each the median (and best) of ``--repeat`` runs on one core:

1. read (validated, typed path) of the file;
2. check: every anomaly analysis (the queue checker's and reports.txn's: precommitted-read, torn, G1c) on the
   read run; and the same with ``ww_deps`` (write-write edges: the G0 search over the whole version order);
3. read + check together - the goal is under 10 s;
4. the peer, measured in the same run: read + check of a 1M-operation *queue* history (``synth.generate``, the
   existing checkers' own benchmark shape), so the ratio says what transactions cost;
5. with ``--cli``: the whole ``python -m reports check`` command (linearizability included) on both files, once.
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
from history.io import gc_paused  # noqa: E402
from reports import synth  # noqa: E402
from reports.checkers import analyze  # noqa: E402


class Times(list):
    """Wall times of the runs, with their CPU times (``cpu``): on a shared, loaded machine the wall time
    includes waiting for the core, the process's CPU time much less so."""

    cpu: list[float]


def times_of(n: int, fn) -> Times:  # noqa: ANN001
    out = Times()
    out.cpu = []
    for _ in range(n):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        r = fn()
        out.append(time.perf_counter() - t)
        out.cpu.append(time.process_time() - c)
        del r
    return out


def fig(ts: Times, n_ops: int) -> str:
    med, best = statistics.median(ts), min(ts)
    return (f"median {med:.2f}s ({n_ops / med:,.0f} ops/s), best {best:.2f}s, {len(ts)} runs; "
            f"CPU median {statistics.median(ts.cpu):.2f}s")


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def read_check(path: str, ww: bool = False):  # noqa: ANN201
    (h,) = read(path)
    settings = {**h.settings, "ww_deps": True} if ww else h.settings
    with gc_paused():
        return analyze(h.op_view(), settings, h.columns)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cli", action="store_true", help="also time python -m reports check on both files, once")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    print(load())
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        h = synth.generate_txn("bench-txn", seed=args.seed, n_ops=args.ops, producers=6, consumers=3, ctp=3,
                               partitions=8, out_partitions=4)
        txn_path = os.path.join(d, "txn.jsonl")
        write_jsonl(h, txn_path)
        n_txn = len(h.ops)
        kinds: dict[str, int] = {}
        for op in h.ops:
            if op["type"] != "invoke":
                kinds[f"{op['f']} {op['type']}"] = kinds.get(f"{op['f']} {op['type']}", 0) + 1
        sends = sum(1 for op in h.ops if op["f"] == "txn" and op["type"] != "invoke"
                    for m in op["value"]["ops"] if m["f"] == "send")
        polled = sum(len(m.get("records", ())) for op in h.ops if op["f"] == "txn" and op["type"] == "ok"
                     for m in op["value"]["ops"] if m["f"] == "poll")
        polled += sum(len(op["value"]["records"]) for op in h.ops if op["f"] == "poll" and op["type"] == "ok")
        del h
        q = synth.generate("bench-queue", seed=args.seed, n_ops=args.ops, processes=10, partitions=10)
        queue_path = os.path.join(d, "queue.jsonl")
        write_jsonl(q, queue_path)
        n_queue = len(q.ops)
        del q
        print(f"generated in {time.perf_counter() - t:.0f}s: txn history {n_txn:,} ops "
              f"({os.path.getsize(txn_path) / 1e6:.0f} MB; completions {kinds}; {sends:,} txn sends, "
              f"{polled:,} records polled); queue history {n_queue:,} ops "
              f"({os.path.getsize(queue_path) / 1e6:.0f} MB)")
        res = read_check(txn_path)
        print(f"txn verdict: valid={res.valid}, found={sorted(res.found)}")
        res = read_check(txn_path, ww=True)
        print(f"txn verdict with ww_deps: valid={res.valid}, found={sorted(res.found)}")
        del res
        r_read = times_of(args.repeat, lambda: read(txn_path))
        print(f"1. read txn history:              {fig(r_read, n_txn)}")
        (hh,) = read(txn_path)

        def check(ww: bool) -> object:
            with gc_paused():
                return analyze(hh.op_view(), {**hh.settings, "ww_deps": ww}, hh.columns)

        r_check = times_of(args.repeat, lambda: check(False))
        print(f"2. check (queue + txn analyses):  {fig(r_check, n_txn)}")
        r_check_ww = times_of(args.repeat, lambda: check(True))
        print(f"   check with ww_deps (G0 too):   {fig(r_check_ww, n_txn)}")
        hh = None  # (frees the run before the next timings)
        r_txn = times_of(args.repeat, lambda: read_check(txn_path))
        print(f"3. read + check, txn history:     {fig(r_txn, n_txn)}   (goal: < 10 s)")
        r_txn_ww = times_of(args.repeat, lambda: read_check(txn_path, ww=True))
        print(f"   read + check with ww_deps:     {fig(r_txn_ww, n_txn)}")
        r_queue = times_of(args.repeat, lambda: read_check(queue_path))
        print(f"4. peer: read + check, queue:     {fig(r_queue, n_queue)}")
        print(f"   ratio txn / queue (medians):   {statistics.median(r_txn) / statistics.median(r_queue):.2f} "
              f"(per op: {statistics.median(r_txn) / n_txn / (statistics.median(r_queue) / n_queue):.2f}; "
              f"CPU: {statistics.median(r_txn.cpu) / statistics.median(r_queue.cpu):.2f})")
        if args.cli:
            for name, path in (("txn", txn_path), ("queue", queue_path)):
                t = time.perf_counter()
                rc = subprocess.run([sys.executable, "-m", "reports", "check", path], capture_output=True,
                                    cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).returncode
                print(f"5. python -m reports check {name}: {time.perf_counter() - t:.2f}s, exit {rc}")
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
