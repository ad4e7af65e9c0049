"""Broker benchmark: the reference broker against Tansu (and Apache Kafka), measured in the same run.

1. Throughput: produce then consume N x 100-byte records with confluent-kafka (acks=all), msgs/s each way.
2. Parked-fetch wake latency: a fetch parked on an idle partition, then a produce (acks=1); the time from the
   produce's ack to the fetch's answer (p50/p99; negative = the fetch answer arrived first).
3. max_wait error: fetches on an idle partition with max_wait 100 ms; answer time minus 100 ms (p50/p99).
4. Durable broker memory: broker RSS before and after writing --rss-gb of 10 KB records (goal < 200 MB at 1 GB:
   the durable log reads from files, it does not hold the log in RAM).

The measurements are benchmarks/measure (shared with bench_vs_kafka.py, the full comparison with Apache Kafka).

    python benchmarks/bench_broker.py [--records 1000000] [--targets reference,reference-durable,tansu,kafka]

Prints a table and writes JSON next to it (benchmarks/results/bench_broker.json).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import clients, fetch, nodes  # noqa: E402
from fixtures import make_target  # noqa: E402

# name -> (target, --target-config): the durable reference broker is the one to compare with Kafka (durable too).
TARGETS = {"reference": ("reference", {"memory": "true"}), "reference-durable": ("reference", {}),
           "tansu": ("tansu", {}), "kafka": ("kafka", {})}
RSS_TARGETS = ("reference-durable", "kafka")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--targets", default="reference,reference-durable,tansu",
                    help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--rss-gb", type=float, default=1.0, help="GB to write for the durable RSS check (0: skip)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_broker.json")
    args = ap.parse_args()
    results = {}
    names = args.targets.split(",")
    if unknown := [n for n in names if n not in TARGETS]:
        ap.error(f"unknown target(s) {unknown}: choose from {', '.join(TARGETS)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            kind, cfg = TARGETS[name]
            with make_target(kind, config=cfg, work_dir=Path(tmp) / name) as t:
                r = {"version": t.version(), "throughput": clients.throughput(t.bootstrap, args.records)}
                r["latency"] = fetch.latencies(t.bootstrap, args.samples)
                if name in RSS_TARGETS and args.rss_gb > 0:
                    r["memory"] = clients.rss_while_writing(t.bootstrap, nodes.node_pids(t), args.rss_gb)
                results[name] = r
                print(name, json.dumps(r), flush=True)
    if "tansu" in results:
        base = results["tansu"]["throughput"]
        for name, r in results.items():
            if name != "tansu":
                r["ratio_vs_tansu"] = {
                    "produce": round(r["throughput"]["produce_msgs_s"] / base["produce_msgs_s"], 2),
                    "consume": round(r["throughput"]["consume_msgs_s"] / max(1, base["consume_msgs_s"]), 2)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
