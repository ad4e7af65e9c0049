"""Run the suites several times against one target and show which outcomes differ between runs.

    python -m conformance.repeat --target tansu [--runs 3] [--out out/repeat] [-- PYTEST ARGS]

Why: a divergence a maintainer should act on must be reproducible. A check whose outcome changes from run to run
is either a timing rule the target meets only sometimes (still a divergence, but its evidence must say so) or a
flaky check (a defect of the suite). This runs the suites as a user does (each run a child pytest writing a
results file), then lists per check the outcome of every run, and for the unstable ones the messages, so the
cause can be read off. Exit: 0 every check had the same outcome in every run, 1 some differ, 2 a run could not
complete.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def run_once(target: str, suites: str, out: Path, i: int, extra: list[str], timeout_s: int) -> dict:
    results = out / f"run-{i}.json"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", suites, "--target", target, "-q", "-p", "no:cacheprovider",
           "--kct-results-file", str(results), *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    (out / f"run-{i}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1) or not results.exists():
        raise RuntimeError(f"run {i}: pytest exited {proc.returncode}; see {out / f'run-{i}.log'}")
    doc = json.loads(results.read_text())
    doc["_wall_s"] = round(time.monotonic() - t0, 1)
    return doc


def compare(docs: list[dict]) -> dict:
    """{"stable": {nodeid: outcome}, "unstable": {nodeid: [{outcome, message, duration}] per run}}."""
    per: dict[str, list[dict]] = {}
    for doc in docs:
        for c in doc["checks"]:
            per.setdefault(c["nodeid"], []).append(
                {"outcome": c["outcome"], "message": (c.get("message") or "")[:600],
                 "duration_s": c.get("duration_s"), "rules": c.get("rules", [])})
    stable, unstable = {}, {}
    for nodeid, runs in sorted(per.items()):
        outcomes = {r["outcome"] for r in runs}
        if len(outcomes) == 1 and len(runs) == len(docs):
            stable[nodeid] = runs[0]["outcome"]
        else:
            unstable[nodeid] = runs
    return {"stable": stable, "unstable": unstable}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.repeat", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="a target name as for pytest --target (e.g. tansu)")
    ap.add_argument("--runs", type=int, default=3, help="how many runs (default 3)")
    ap.add_argument("--suites", default="conformance.suites", help="package of suites (default conformance.suites)")
    ap.add_argument("--out", type=Path, default=Path("out/repeat"), help="directory for results and logs")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run before it counts as failed")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error("--runs must be at least 2 to compare runs")
    args.out.mkdir(parents=True, exist_ok=True)
    docs = []
    for i in range(1, args.runs + 1):
        try:
            docs.append(run_once(args.target, args.suites, args.out, i, args.pytest_args, args.timeout))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"could not complete: {e}", file=sys.stderr)
            return 2
        s = docs[-1]["summary"]
        print(f"run {i}: {s} in {docs[-1]['_wall_s']} s", flush=True)
    cmp = compare(docs)
    counts: dict[str, int] = {}
    for o in cmp["stable"].values():
        counts[o] = counts.get(o, 0) + 1
    report = {"target": args.target, "runs": args.runs, "wall_s": [d["_wall_s"] for d in docs],
              "summaries": [d["summary"] for d in docs], "stable_counts": counts, **cmp}
    (args.out / "repeat.json").write_text(json.dumps(report, indent=1))
    print(f"stable in all {args.runs} runs: {counts}")
    if not cmp["unstable"]:
        print("no check changed its outcome between runs")
        return 0
    print(f"{len(cmp['unstable'])} check(s) changed outcome between runs:")
    for nodeid, runs in cmp["unstable"].items():
        print(f"  {nodeid}: {' / '.join(r['outcome'] for r in runs)}")
        for i, r in enumerate(runs, 1):
            if r["message"]:
                print(f"    run {i} ({r['outcome']}, {r['duration_s']} s): {r['message'].splitlines()[0][:200]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
