"""Reference cluster benchmark: replication cost, failover time, memory. Repeatable; prints medians.

1. confluent-kafka produce throughput, RF=3 acks=all against RF=1 acks=1 on the same 3-broker cluster (the peer
   is the same cluster without replication), alternating, ``--repeats`` times.
2. Failover: kill -9 the leader of a partition ``--kills`` times; time from the kill to Metadata naming a new
   leader, and the client-visible unavailability (the longest gap between two acknowledged acks=all writes of a
   producer writing all along). broker.session.timeout.ms decides most of it (``--session-ms``).
3. RSS of each broker process after ``--gb`` GB written at RF=3 (page cache, not heap, holds the log).

    .venv/bin/python benchmarks/bench_cluster.py [--repeats 3] [--messages 200000] [--kills 20] [--gb 1]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reference_broker.cluster import Cluster  # noqa: E402


def create(bootstrap: str, name: str, rf: int, **cfg: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, 1, rf, config=cfg)])[name].result(30)


def leader_of(bootstrap: str, topic: str) -> int:
    a = AdminClient({"bootstrap.servers": bootstrap})
    return a.list_topics(topic, timeout=5).topics[topic].partitions[0].leader


def produce_rate(bootstrap: str, topic: str, acks: str, n: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * size
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t0)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--gb", type=float, default=1.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    cfg = {"broker.session.timeout.ms": str(args.session_ms), "broker.heartbeat.interval.ms": "500",
           "replica.fetch.backoff.ms": "200", "min.insync.replicas": "2", "offsets.topic.num.partitions": "3"}
    cluster = Cluster(3, data_dir=work / "data", work_dir=work, config=cfg)
    cluster.start()
    try:
        b = cluster.bootstrap
        # 1. throughput
        create(b, "rf3", 3)
        create(b, "rf1", 1)
        produce_rate(b, "rf3", "all", 20_000, args.size)      # warm-up
        rf3, rf1 = [], []
        for r in range(args.repeats):
            order = [("rf3", "all", rf3), ("rf1", "1", rf1)]
            for topic, acks, out in order if r % 2 == 0 else order[::-1]:
                out.append(produce_rate(b, topic, acks, args.messages, args.size))
        m3, m1 = statistics.median(rf3), statistics.median(rf1)
        print(f"produce {args.size}-byte records, confluent-kafka, {args.repeats} repeats (median msg/s):")
        print(f"  RF=3 acks=all {m3:,.0f}   RF=1 acks=1 {m1:,.0f}   ratio {m3 / m1:.2f}x")
        print(f"  all: rf3 {[round(x) for x in rf3]} rf1 {[round(x) for x in rf1]}")

        # 2. failover
        create(b, "fo", 3)
        acked_at: list[float] = []
        stop = threading.Event()

        def writer() -> None:
            p = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0, "message.timeout.ms": 60_000,
                          "enable.idempotence": True})

            def done(err, _msg) -> None:
                if err is None:
                    acked_at.append(time.monotonic())
            while not stop.is_set():
                p.produce("fo", b"f", partition=0, on_delivery=done)
                p.poll(0.002)
            p.flush(60)
        t = threading.Thread(target=writer)
        t.start()
        to_leader, gaps = [], []
        for _ in range(args.kills):
            old = leader_of(b, "fo")
            time.sleep(0.5)
            t_kill = time.monotonic()
            cluster.kill(old)
            while True:
                try:
                    new = leader_of(b, "fo")
                except Exception:  # noqa: BLE001
                    new = -1
                if new >= 0 and new != old:
                    break
                time.sleep(0.02)
            to_leader.append(time.monotonic() - t_kill)
            t_new = time.monotonic()
            while not [x for x in acked_at if x > t_new] and time.monotonic() - t_new < 30:
                time.sleep(0.02)
            before = [x for x in acked_at if x <= t_kill]
            after = [x for x in acked_at if x > t_kill]
            if before and after:
                gaps.append(after[0] - before[-1])
            cluster.restart(old)
        stop.set()
        t.join(60)
        print(f"failover over {args.kills} leader kills (broker.session.timeout.ms={args.session_ms}):")
        print(f"  kill -> new leader in Metadata: p50 {statistics.median(to_leader):.2f} s, "
              f"p99 {pct(to_leader, 0.99):.2f} s")
        if gaps:
            print(f"  client-visible unavailability (acks=all gap): p50 {statistics.median(gaps):.2f} s, "
                  f"p99 {pct(gaps, 0.99):.2f} s")

        # 3. RSS after writing at RF=3
        create(b, "big", 3)
        rec = 10_000
        n = int(args.gb * (1 << 30) / rec)
        rss0 = {k: psutil.Process(pid).memory_info().rss for k, pid in cluster.pids().items() if pid}
        produce_rate(b, "big", "all", n, rec)
        rss1 = {k: psutil.Process(pid).memory_info().rss for k, pid in cluster.pids().items() if pid}
        print(f"RSS after {args.gb} GB at RF=3 ({n} x {rec} B records, all acknowledged):")
        for k in rss1:
            print(f"  {k}: {rss0.get(k, 0) / 2**20:.1f} -> {rss1[k] / 2**20:.1f} MiB")
    finally:
        cluster.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
