"""The main job: targets → conformance suites → a short chaos run → histories → Spark aggregation → HTML report.

    python -m conformance.main [--targets reference,kafka,tansu] [--out out] [--suites conformance.suites] [-- PYTEST ARGS]

The chaos step (`python -m chaos run`, about a minute, kills and partitions against a fresh proxied 3-broker reference cluster)
puts a history with faults next to the suites' histories, so the Spark report's per-nemesis breakdown and fault
timelines have something to show; its own page (fault timeline over throughput and latency, verdict) is in
out/chaos/. Anomalies it finds are findings (exit 0); a chaos run that could not run fails the job.

One direction only: each target's suites run in their own pytest process (so a crashing target cannot take the
job down), write results and histories; the Spark job and the report generator only read those files.
Exit status: 0 when every target ran (divergences are findings, not job failures), 1 when a step could not run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fixtures.target import TargetUsageError

KNOWN_TARGETS = ("reference", "kafka", "tansu", "docker", "live")


def _targets(value: str) -> list[str]:
    names = [t.strip() for t in value.split(",") if t.strip()]
    bad = [t for t in names if t not in KNOWN_TARGETS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown target(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {', '.join(KNOWN_TARGETS)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m conformance.main", description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=_targets, default=["reference", "kafka", "tansu"],
                    help="comma-separated targets (default: reference,kafka,tansu; kafka is Apache Kafka itself, "
                         "the report's first column)")
    ap.add_argument("--out", type=Path, default=Path("out"), help="output directory (default: out)")
    ap.add_argument("--suites", default="conformance.suites",
                    help="package of suites to run (default: conformance.suites)")
    ap.add_argument("--bootstrap", help="HOST:PORT for the live target")
    ap.add_argument("--docker-image", default="build:tansu", help="image for the docker target")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark aggregation step")
    ap.add_argument("--no-chaos", action="store_true", help="skip the chaos run")
    ap.add_argument("--chaos-duration", default="60s", help="length of the chaos run (default 60s)")
    ap.add_argument("--chaos-nemesis", default="kill,partition",
                    help="faults of the chaos run (default kill,partition: the cluster it starts is proxied)")
    ap.add_argument("--chaos-seed", type=int, default=1)
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return ap


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run_suites(target: str, args: argparse.Namespace, out: Path) -> dict:
    """Run the suites against one target in a child pytest; return a summary of its results file."""
    results_dir = out / "conformance" / target
    results_dir.mkdir(parents=True, exist_ok=True)
    results_file = results_dir / "results.json"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", args.suites, "--target", target, "--kct-results", str(results_dir), "--kct-results-file", str(results_file),
           "-q", "-p", "no:cacheprovider", "--durations=15", "--junitxml", str(results_dir / "junit.xml"),
           # the target's own logs (broker output) stay beside the results as evidence, not in a rotating temp dir
           "--basetemp", str(results_dir / "tmp"), *args.pytest_args]
    if target == "live":
        if not args.bootstrap:
            raise TargetUsageError("--targets live needs --bootstrap HOST:PORT")
        cmd += ["--bootstrap", args.bootstrap]
    if target == "docker":
        cmd += ["--docker-image", args.docker_image]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, text=True, capture_output=True)
    wall = time.monotonic() - t0
    (results_dir / "pytest.log").write_text(proc.stdout + proc.stderr)
    # pytest: 0 all passed, 1 some checks failed (= divergences); anything else means the suite could not run
    if proc.returncode not in (0, 1) or not results_file.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        return {"target": target, "ok": False, "wall_s": wall,
                "error": f"pytest exited {proc.returncode}; see {results_dir / 'pytest.log'}\n{tail}"}
    doc = json.loads(results_file.read_text())
    counts: dict[str, int] = {}
    for check in doc.get("checks", []):
        counts[check.get("outcome", "?")] = counts.get(check.get("outcome", "?"), 0) + 1
    return {"target": target, "ok": True, "wall_s": wall, "counts": counts, "results": str(results_file)}


def run_chaos(args: argparse.Namespace, out: Path) -> dict:
    """A short chaos run against its own reference cluster, in a child process (one direction)."""
    chaos_dir = out / "chaos"
    chaos_dir.mkdir(parents=True, exist_ok=True)
    run_id = f"chaos-main-{args.chaos_seed}"
    cmd = [sys.executable, "-m", "chaos", "run", "--workload", "queue", "--nemesis", args.chaos_nemesis,
           "--duration", args.chaos_duration, "--interval", "10s", "--fault-duration", "5s", "--rate", "200",
           "--seed", str(args.chaos_seed), "--run-id", run_id, "--out", str(chaos_dir), "--quiet"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, text=True, capture_output=True)
    (chaos_dir / "chaos.log").write_text(proc.stdout + proc.stderr)
    history = chaos_dir / f"{run_id}.jsonl"
    ok = proc.returncode in (0, 1) and history.exists()
    return {"target": "chaos", "ok": ok, "wall_s": time.monotonic() - t0, "exit": proc.returncode,
            "verdict": {0: "valid", 1: "anomalies"}.get(proc.returncode, "could not run"),
            "history": str(history), "page": str(chaos_dir / f"{run_id}.html"),
            **({} if ok else {"error": "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])})}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    summaries = []
    for target in args.targets:
        _step(f"conformance suites against {target}")
        try:
            s = run_suites(target, args, out)
        except TargetUsageError as e:
            print(f"main: {e}", file=sys.stderr)
            return 2
        summaries.append(s)
        if s["ok"]:
            print(f"{target}: {s['counts']} in {s['wall_s']:.1f}s", flush=True)
        else:
            print(f"{target}: could not run: {s['error']}", file=sys.stderr, flush=True)
    chaos = None
    if not args.no_chaos:
        _step(f"chaos run: {args.chaos_nemesis} for {args.chaos_duration} against a 3-broker reference cluster")
        chaos = run_chaos(args, out)
        if chaos["ok"]:
            print(f"chaos: {chaos['verdict']} in {chaos['wall_s']:.1f}s; page {chaos['page']}", flush=True)
        else:
            print(f"chaos: could not run: {chaos['error']}", file=sys.stderr, flush=True)
    failed = [s for s in summaries if not s["ok"]] + ([chaos] if chaos and not chaos["ok"] else [])

    # gather every run's history in one place: the Spark job reads a directory of runs
    hist_dir = out / "histories"
    hist_dir.mkdir(exist_ok=True)
    histories = []
    for s in summaries:
        if s["ok"]:
            src = Path(s["results"]).with_suffix(".history.jsonl")
            if src.exists():
                dst = hist_dir / f"{s['target']}.jsonl"
                shutil.copyfile(src, dst)
                histories.append(dst)
    if chaos and chaos["ok"]:
        dst = hist_dir / Path(chaos["history"]).name  # JSONL only: its Parquet twin would count the run twice
        shutil.copyfile(chaos["history"], dst)
        histories.append(dst)
    if not args.no_spark:
        _step(f"Spark aggregation over {len(histories)} history file(s)")
        if histories:
            r = subprocess.run([sys.executable, "-m", "reports", "spark", "--histories", str(hist_dir),
                                "--out", str(out / "spark")])
            if r.returncode != 0:
                print("main: the Spark job failed", file=sys.stderr)
                failed.append({"target": "spark"})
        else:
            print("no histories were written; nothing to aggregate", file=sys.stderr)
            failed.append({"target": "spark"})

    _step("HTML conformance report")
    results = [s["results"] for s in summaries if s["ok"]]
    if results:
        r = subprocess.run([sys.executable, "-m", "reports", "conformance", *results, "--out", str(out / "report")])
        if r.returncode != 0:
            failed.append({"target": "report"})
    (out / "summary.json").write_text(json.dumps(summaries + ([chaos] if chaos else []), indent=2))
    print(f"\nreport:  {out / 'report' / 'index.html'}")
    if not args.no_spark:
        print(f"spark:   {out / 'spark'}")
    if chaos and chaos["ok"]:
        print(f"chaos:   {chaos['page']}")
    print(f"summary: {out / 'summary.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
