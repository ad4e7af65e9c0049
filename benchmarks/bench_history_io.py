"""Benchmark validated history reading (prints ops/s; a few minutes with the 1M-op file, most of it generating).

    /work/venv/bin/python benchmarks/bench_history_io.py [--small-ops 10000] [--big-ops 1000000]
        [--repeat 40] [--big-repeat 5] [--baseline-rev REV | --baseline DIR] [--worker-heap] [--gc-off]
        [--cache DIR]

1. ``history.io.read_bytes`` on one generated run of ``--small-ops`` operations (10 processes, 10 partitions,
   polls of up to 8 records; about 2.4 MB of JSONL): what the Spark job does once per file. JSONL and Parquet.
2. ``history.read`` on one file of ``--big-ops`` operations (0 skips it), JSONL and Parquet.

One core, wall-clock time. Each figure is the best and the median of its runs, with the runs' results freed
between runs (freeing is not timed). With ``--baseline-rev`` (a git revision of this repository) or
``--baseline`` (a directory holding a ``history`` package), that version is read in the same process,
alternating with this checkout's, so both see the same machine load. The cyclic garbage collector is on, as in
any Python process, unless ``--gc-off`` (as reports/spark_job.py runs the reader: it pauses the collector for
whole batches). ``--worker-heap`` first imports what a Spark Python worker has loaded (pyarrow, pandas,
pyspark.sql), which makes each full collection dearer. Generated files are kept in ``--cache`` (default: a
directory under the system temp dir), so runs are repeatable.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import history.io as current  # noqa: E402


def _load_history(directory: str, name: str):  # noqa: ANN202
    """The ``history`` package in ``directory``, imported under another name (it uses relative imports)."""
    init = os.path.join(directory, "history", "__init__.py")
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[os.path.dirname(init)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    spec.loader.exec_module(pkg)
    return importlib.import_module(f"{name}.io")


def _baseline(args: argparse.Namespace):  # noqa: ANN202
    if args.baseline:
        return _load_history(args.baseline, "history_baseline"), args.baseline
    if args.baseline_rev:
        d = tempfile.mkdtemp(prefix="bench-history-baseline-")
        archive = subprocess.run(["git", "-C", ROOT, "archive", args.baseline_rev, "history"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=archive, check=True)
        return _load_history(d, "history_baseline"), args.baseline_rev
    return None, None


def _files(cache: str, n_ops: int) -> tuple[str, str]:
    jsonl = os.path.join(cache, f"run-{n_ops}.jsonl")
    parquet = os.path.join(cache, f"run-{n_ops}.parquet")
    if not (os.path.exists(jsonl) and os.path.exists(parquet)):
        from reports import synth  # only needed to make the files

        t = time.perf_counter()
        h = synth.generate("r", seed=1, n_ops=n_ops, processes=10, partitions=10)
        current.write_jsonl(h, jsonl + ".tmp")
        current.write_parquet(h, parquet + ".tmp")
        os.replace(jsonl + ".tmp", jsonl)
        os.replace(parquet + ".tmp", parquet)
        print(f"generated {len(h.ops):,} operations in {time.perf_counter() - t:.1f}s -> {cache}")
        del h
        gc.collect()
    return jsonl, parquet


def _load() -> str:
    """The machine's load: figures from a shared machine are comparable only with it (and within one run)."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def _time(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    result = fn()
    dt = time.perf_counter() - t
    del result  # freeing the runs is not part of reading them
    return dt


def _measure(readers: dict, make_call, repeat: int) -> dict[str, list[float]]:  # noqa: ANN001
    """Run each reader ``repeat`` times, alternating between them; seconds per run."""
    times: dict[str, list[float]] = {k: [] for k in readers}
    for _ in range(repeat):
        for k, mod in readers.items():
            times[k].append(_time(make_call(mod)))
    return times


def _report(what: str, n_ops: int, times: dict[str, list[float]], unit: str) -> None:
    scale, fmt = (1e3, "{:8.1f} ms") if unit == "ms" else (1.0, "{:8.2f} s ")
    parts = []
    for k, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        parts.append(f"{k}: best {fmt.format(best * scale)} median {fmt.format(med * scale)} "
                     f"({n_ops / best:>9,.0f} / {n_ops / med:>9,.0f} ops/s)")
    line = f"{what}\n    " + "\n    ".join(parts)
    if len(times) == 2:
        (_, a), (_, b) = times.items()
        line += (f"\n    speed-up: x{min(a) / min(b):.2f} (best), x{statistics.median(a) / statistics.median(b):.2f}"
                 " (median)")
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small-ops", type=int, default=10_000)
    ap.add_argument("--big-ops", type=int, default=1_000_000, help="0 skips the big file")
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--big-repeat", type=int, default=5)
    ap.add_argument("--baseline-rev", default=None, help="git revision to compare with, e.g. HEAD~3")
    ap.add_argument("--baseline", default=None, help="directory holding a history package to compare with")
    ap.add_argument("--worker-heap", action="store_true", help="import what a Spark Python worker has loaded")
    ap.add_argument("--gc-off", action="store_true", help="read with the cyclic GC off, as the Spark job does")
    ap.add_argument("--cache", default=None)
    args = ap.parse_args()
    if args.worker_heap:
        import pandas  # noqa: F401
        import pyarrow.parquet  # noqa: F401
        import pyspark.sql  # noqa: F401
    cache = args.cache or os.path.join(tempfile.gettempdir(), f"bench-history-io-{args.small_ops}-{args.big_ops}")
    os.makedirs(cache, exist_ok=True)
    base, base_name = _baseline(args)
    readers = {"baseline": base, "now": current} if base is not None else {"now": current}
    print(f"now: {os.path.dirname(current.__file__)}" + (f"; baseline: {base_name}" if base else "")
          + f"; {len(gc.get_objects()):,} objects tracked by the GC before reading"
          + ("; GC off" if args.gc_off else "; GC on") + f"; {_load()}")

    jsonl, parquet = _files(cache, args.small_ops)
    if args.gc_off:
        gc.disable()
    for path in (jsonl, parquet):
        data = open(path, "rb").read()  # noqa: SIM115
        name = os.path.basename(path)
        n = len(current.read_bytes(data, name)[0].ops)
        times = _measure(readers, lambda m, d=data, nm=name: lambda: m.read_bytes(d, nm), args.repeat)
        _report(f"read_bytes {name} ({n:,} operations, {len(data) / 1e6:.1f} MB), {args.repeat} runs",
                n, times, "ms")

    if args.big_ops:
        jsonl, parquet = _files(cache, args.big_ops)
        for path in (jsonl, parquet):
            name = os.path.basename(path)
            n = len(current.read(path)[0].ops)
            gc.collect()
            times = _measure(readers, lambda m, p=path: lambda: m.read(p), args.big_repeat)
            _report(f"read {name} ({n:,} operations, {os.path.getsize(path) / 1e6:.0f} MB), {args.big_repeat} runs",
                    n, times, "s")
    print(_load())


if __name__ == "__main__":
    main()
