"""N seeded chaos runs against fresh reference clusters, aggregated by the Spark job into one report.

    .venv/bin/python benchmarks/chaos_runs.py --runs 20 --duration 15s --out out/chaos-20

Every 5th seed runs the lossy schedule with unclean election and min.insync.replicas=1 (expected: lost writes),
the others a seeded kill/pause/restart schedule with Kafka's safe settings (expected: valid), so the Spark report's
per-nemesis breakdown has both. Afterwards each run's recorded fault schedule (run header) and the nemesis
operations in its history are compared with the schedule its seed gives now: the same seed replays the same
faults. Prints one line per run and the aggregate figures; exit 1 if replay or the expected verdicts disagree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.run import RunOptions, parse_duration, plan_only, run  # noqa: E402

UNSAFE = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
FAST = {"replica.lag.time.max.ms": "1000", "broker.session.timeout.ms": "2500"}


def options(seed: int, out: Path, duration: float) -> RunOptions:
    lossy = seed % 5 == 0
    return RunOptions(out=out, seed=seed, duration=max(duration, 13.0) if lossy else duration, rate=100,
                      schedule="lossy" if lossy else "random", nemeses=("kill", "pause", "restart"),
                      interval=4.0, fault_duration=3.0, partitions=1 if lossy else 2, consumers=0 if lossy else 2,
                      cluster_settings={**FAST, **(UNSAFE if lossy else {})}, progress=False,
                      run_id=f"seed-{seed:02d}", check_budget=5)


def replayed(opts: RunOptions, history: Path) -> bool:
    steps = [(s.id, s.at, s.kind, s.params) for s in plan_only(opts)]
    lines = history.read_text().splitlines()
    header = json.loads(lines[0])["header"]["settings"]["faults"]
    recorded = [(f["id"], f["at"], f["kind"], f["params"]) for f in header]
    starts = [json.loads(x)["value"] for x in lines[1:] if '"f":"nemesis"' in x]
    started = [(v["id"], v["fault"]) for v in starts if v.get("phase") == "start" and "ok" in v]
    return recorded == steps and started == [(s[0], s[2]) for s in steps]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--duration", default="15s")
    ap.add_argument("--out", type=Path, default=Path("out/chaos-20"))
    args = ap.parse_args()
    hist = args.out / "histories"
    bad = 0
    t0 = time.monotonic()
    for seed in range(args.runs):
        opts = options(seed, hist, parse_duration(args.duration))
        t = time.monotonic()
        res = run(opts)
        expect = 1 if opts.schedule == "lossy" else 0
        counts = (res.verdict or {}).get("anomalies", {}).get("counts", {})
        rep = replayed(opts, res.history) if res.history else False
        ok = res.exit_code == expect and rep
        bad += not ok
        print(f"seed {seed:2d} {opts.schedule:6s} exit {res.exit_code} (expected {expect}) replay={rep} "
              f"sends ok/fail/info {res.stats.get('ok')}/{res.stats.get('fail')}/{res.stats.get('info')} "
              f"anomalies {counts} {time.monotonic() - t:.0f}s", flush=True)
    for p in hist.glob("*.html"):
        p.unlink()  # the run pages stay out of the Spark input directory listing noise
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "reports", "spark", "--histories", str(hist / "*.jsonl"),
                        "--out", str(args.out / "spark")], capture_output=True, text=True)
    print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-500:])
    print(f"spark job: exit {r.returncode} in {time.monotonic() - t:.0f}s; all runs {time.monotonic() - t0:.0f}s; "
          f"report {args.out / 'spark' / 'report.html'}")
    return 1 if bad or r.returncode not in (0, 1) else 0


if __name__ == "__main__":
    sys.exit(main())
