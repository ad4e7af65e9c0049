"""Group rebalance benchmark: the reference broker against Tansu (or Apache Kafka), measured in the same run.

For 2, 10 and 50 members in one group, one non-leader member leaves (LeaveGroup) or, in a fresh group, is killed
(no LeaveGroup: only the session timeout tells the coordinator); the time until the group is Stable again and every
partition reassigned. What each figure means and the member settings: benchmarks/measure/groups.py (shared with
bench_vs_kafka.py). The reference broker and Kafka run with group.min.session.timeout.ms=1000 and
group.initial.rebalance.delay.ms=100 (Tansu has no such settings: its defaults).

    python benchmarks/bench_groups.py [--sizes 2,10,50] [--targets reference,tansu,kafka]

Prints a table and writes JSON (benchmarks/results/bench_groups.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure.groups import (  # noqa: E402
    BROKER_SETTINGS,
    HEARTBEAT_MS,
    MAX_POLL_MS,
    SESSION_MS,
    rebalances,
)
from fixtures import make_target  # noqa: E402

# Targets that take Kafka's group settings (Tansu has none: its defaults).
SETTABLE = ("reference", "kafka")


def fmt(x: Any) -> str:
    return "-" if x is None else f"{x:8.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2,10,50")
    ap.add_argument("--targets", default="reference,tansu")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_groups.json")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = {"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                "max.poll.interval.ms": MAX_POLL_MS, "broker": BROKER_SETTINGS, "describe_groups_poll_ms": 5}
    print(f"member settings: session.timeout.ms={SESSION_MS} heartbeat.interval.ms={HEARTBEAT_MS} "
          f"max.poll.interval.ms={MAX_POLL_MS}; {', '.join(SETTABLE)} {BROKER_SETTINGS}; Tansu defaults", flush=True)
    results: dict[str, Any] = {"settings": settings, "runs": []}
    t_all = time.monotonic()
    for name in args.targets.split(","):
        cfg = dict(BROKER_SETTINGS) if name in SETTABLE else {}
        if name == "reference":
            cfg["memory"] = "true"
        with tempfile.TemporaryDirectory() as tmp, make_target(name, config=cfg, work_dir=tmp) as target:
            results.setdefault("versions", {})[name] = target.version()
            for r in rebalances(target.bootstrap, sizes):
                r["target"] = name
                results["runs"].append(r)
                print(json.dumps(r), flush=True)
    results["wall_s"] = time.monotonic() - t_all
    print()
    print("time from a member's leave / kill to the group Stable again with every partition reassigned (ms)")
    print(f"{'target':10} {'members':>7} {'event':>6} {'formed':>8} {'rebal.':>8} {'stable':>8} {'assigned':>8}  note")
    for r in results["runs"]:
        print(f"{r['target']:10} {r['members']:7d} {r['event']:>6} {fmt(r.get('formed_ms'))} "
              f"{fmt(r.get('rebalance_ms'))} {fmt(r.get('stable_ms'))} {fmt(r.get('assigned_ms'))}  {r.get('error', '')}")
    kills = [r["assigned_ms"] for r in results["runs"] if r["event"] == "kill" and "assigned_ms" in r]
    if kills:
        print(f"(kills include the {SESSION_MS} ms session timeout; median kill takeover {statistics.median(kills):.0f} ms)")
    print(f"rebal. = coordinator left Stable (DescribeGroups every 5 ms); stable = Stable again with n-1 members; assigned = last remaining member's on_assign; "
          f"whole run {results['wall_s']:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
