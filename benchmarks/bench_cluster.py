"""Three-node cluster benchmark: replication cost, failover time, memory. Repeatable; prints medians.

1. confluent-kafka produce throughput, RF=3 acks=all against RF=1 acks=1 on the same 3-broker cluster (the peer
   is the same cluster without replication), alternating, ``--repeats`` times.
2. Failover: kill -9 the leader of a partition ``--kills`` times; time from the kill to Metadata naming a new
   leader, and the client-visible unavailability (the longest gap between acknowledgements of an acks=all producer
   writing all along, and between the records a consumer receives). broker.session.timeout.ms decides most of it
   (``--session-ms``).
3. RSS of each node process after ``--gb`` GB written at RF=3 (page cache, not heap, holds the log).

The cluster is a target (``--target reference``, the default, or ``kafka``: Apache Kafka, 3 combined KRaft nodes);
the measurements are benchmarks/measure (bench_vs_kafka.py compares both in one run).

    .venv/bin/python benchmarks/bench_cluster.py [--target reference] [--repeats 3] [--messages 200000] [--kills 20] [--gb 1]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import clients, failover, nodes  # noqa: E402
from fixtures import make_target  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=("reference", "kafka"), default="reference")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--gb", type=float, default=1.0)
    args = ap.parse_args()
    cfg = {"brokers": "3", "kafka.broker.session.timeout.ms": str(args.session_ms),
           "kafka.broker.heartbeat.interval.ms": "500", "kafka.replica.fetch.backoff.ms": "200",
           "kafka.min.insync.replicas": "2", "kafka.offsets.topic.num.partitions": "3"}
    with make_target(args.target, config=cfg) as cluster:
        b = cluster.bootstrap
        print(f"{cluster.version()}, 3 nodes: {b}")
        # 1. throughput
        clients.create_topic(b, "rf3", 1, 3)
        clients.create_topic(b, "rf1", 1, 1)
        clients.produce(b, "rf3", 20_000, args.size)      # warm-up
        rf3, rf1 = [], []
        for r in range(args.repeats):
            order = [("rf3", "all", rf3), ("rf1", "1", rf1)]
            for topic, acks, out in order if r % 2 == 0 else order[::-1]:
                w = clients.produce(b, topic, args.messages, args.size, acks=acks)
                assert w["errors"] == 0, w
                out.append(w["msgs_s"])
        m3, m1 = statistics.median(rf3), statistics.median(rf1)
        print(f"produce {args.size}-byte records, confluent-kafka, {args.repeats} repeats (median msg/s):")
        print(f"  RF=3 acks=all {m3:,.0f}   RF=1 acks=1 {m1:,.0f}   ratio {m3 / m1:.2f}x")
        print(f"  all: rf3 {rf3} rf1 {rf1}")

        # 2. failover
        s = failover.summarize(failover.failover(cluster, args.kills, topic="fo"))
        print(f"failover over {args.kills} leader kills (broker.session.timeout.ms={args.session_ms}; "
              f"{s['killed_controller']} of them also the active controller):")
        for key, what in (("to_leader_s", "kill -> new leader in Metadata"),
                          ("producer_gap_s", "producer unavailability (acks=all gap)"),
                          ("consumer_gap_s", "consumer unavailability (gap between records)")):
            f = s[key]
            if f["n"]:
                print(f"  {what}: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s"
                      + (f" ({f['timeouts']} timed out)" if f["timeouts"] else ""))

        # 3. RSS after writing at RF=3
        if args.gb > 0:
            m = clients.rss_while_writing(b, nodes.node_pids(cluster), args.gb, topic="big", rf=3, partitions=1)
            print(f"RSS after {m['written_gb']} GB at RF=3 ({m['records']} x 10000 B records, all acknowledged):")
            for k, v in m["per_node"].items():
                print(f"  {k}: {v['before_mb']:.1f} -> {v['after_mb']:.1f} MB (peak {v['peak_mb']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
