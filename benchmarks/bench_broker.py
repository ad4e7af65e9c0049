"""Broker benchmark: the reference broker against Tansu, measured in the same run.

1. Throughput: produce then consume N x 100-byte records with confluent-kafka (acks=all), msgs/s each way.
2. Parked-fetch wake latency: a fetch parked on an idle partition, then a produce (acks=1); the time from the
   produce's ack to the fetch's answer (p50/p99; negative = the fetch answer arrived first).
3. max_wait error: fetches on an idle partition with max_wait 100 ms; answer time minus 100 ms (p50/p99).
4. Durable broker memory: broker RSS before and after writing --rss-gb of 10 KB records (goal < 200 MB at 1 GB:
   the durable log reads from files, it does not hold the log in RAM).

    python benchmarks/bench_broker.py [--records 1000000] [--targets reference,reference-durable,tansu]

Prints a table and writes JSON next to it (benchmarks/results/bench_broker.json).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixtures.reference import ReferenceTarget  # noqa: E402
from fixtures.tansu import TansuTarget  # noqa: E402
from reference_broker.client.protocol import Connection  # noqa: E402

MS = 1e6


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def throughput(bootstrap: str, n: int, partitions: int = 3) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("bench", partitions, 1)]).values():
        f.result(30)
    time.sleep(0.5)
    payload = b"x" * 100
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 2_000_000, "enable.idempotence": False})
    errors = 0

    def cb(err, _msg):
        nonlocal errors
        if err is not None:
            errors += 1

    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce("bench", payload, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
    left = p.flush(120)
    t_produce = time.perf_counter() - t0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition("bench", i, 0) for i in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    t_consume = time.perf_counter() - t0
    c.close()
    return {"records": n, "produce_s": round(t_produce, 3), "produce_msgs_s": round(n / t_produce),
            "produce_errors": errors + left, "consume_s": round(t_consume, 3), "consumed": got,
            "consume_msgs_s": round(got / t_consume)}


def rss_after_writing(bootstrap: str, pid: int, gigabytes: float) -> dict:
    import psutil

    proc = psutil.Process(pid)
    before = proc.memory_info().rss
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("rss", 3, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576})
    value = b"r" * 10_000
    n = int(gigabytes * (1 << 30) / len(value))
    delivered = 0

    def cb(err, _msg):
        nonlocal delivered
        delivered += err is None

    t0 = time.perf_counter()
    peak = before
    for i in range(n):
        while True:
            try:
                p.produce("rss", value, partition=i % 3, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 5000 == 0:
            p.poll(0)
            peak = max(peak, proc.memory_info().rss)
    p.flush(300)
    after = proc.memory_info().rss
    if delivered != n:
        raise SystemExit(f"RSS check: only {delivered} of {n} records were acknowledged")
    return {"written_gb": round(n * len(value) / (1 << 30), 2), "acknowledged": delivered, "seconds": round(time.perf_counter() - t0, 1),
            "rss_before_mb": round(before / 1e6, 1), "rss_peak_mb": round(max(peak, after) / 1e6, 1),
            "rss_after_mb": round(after / 1e6, 1)}


def _batch(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


async def latencies(host: str, port: int, samples: int) -> dict:
    fetcher = await Connection.connect(host, port)
    producer = await Connection.connect(host, port)
    await fetcher.api_versions()
    await producer.api_versions()
    CT = CreateTopicsRequest.CreatableTopic
    await producer.request(CreateTopicsRequest[5](topics=[CT(name="lat", num_partitions=1, replication_factor=1,
                                                             assignments=[], configs=[])], timeout_ms=5000,
                                                  validate_only=False))
    await asyncio.sleep(0.5)
    FT = FetchRequest.FetchTopic
    PT = ProduceRequest.TopicProduceData

    def fetch(offset: int, max_wait: int):
        return FetchRequest[11](replica_id=-1, max_wait_ms=max_wait, min_bytes=1, max_bytes=1 << 20,
                                isolation_level=0, session_id=0, session_epoch=-1,
                                topics=[FT(topic="lat", partitions=[FT.FetchPartition(
                                    partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                    current_leader_epoch=-1, log_start_offset=-1)])],
                                forgotten_topics_data=[], rack_id="")

    wake, wake_from_send, early = [], [], 0
    offset = 0
    for _ in range(samples):
        f = fetcher.submit(fetch(offset, 5000))
        await asyncio.sleep(0.005)
        if f.done():
            early += 1
        req = ProduceRequest[8](transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            PT(name="lat", partition_data=[PT.PartitionProduceData(index=0, records=_batch(b"v"))])])
        ack = await producer.request(req)
        r = await asyncio.wait_for(f, 10)
        wake.append((r.received_ns - ack.received_ns) / MS)
        wake_from_send.append((r.received_ns - ack.sent_ns) / MS)
        offset += 1
    errs = []
    for _ in range(max(20, samples // 4)):
        r = await fetcher.request(fetch(offset, 100))
        errs.append(r.rtt_ns / MS - 100)
    await fetcher.close()
    await producer.close()
    return {"wake_ack_to_answer_ms_p50": round(pct(wake, .5), 3), "wake_ack_to_answer_ms_p99": round(pct(wake, .99), 3),
            "wake_send_to_answer_ms_p50": round(pct(wake_from_send, .5), 3),
            "wake_send_to_answer_ms_p99": round(pct(wake_from_send, .99), 3),
            "answered_before_produce": early,
            "max_wait_error_ms_p50": round(pct(errs, .5), 3), "max_wait_error_ms_p99": round(pct(errs, .99), 3),
            "max_wait_error_ms_mean": round(statistics.mean(errs), 3)}


def make(name: str, work: Path):
    if name == "reference":
        return ReferenceTarget({"memory": "true"}, work_dir=work / name)
    if name == "reference-durable":
        return ReferenceTarget({}, work_dir=work / name)
    if name == "tansu":
        return TansuTarget({}, work_dir=work / name)
    raise SystemExit(f"unknown target {name!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--targets", default="reference,reference-durable,tansu")
    ap.add_argument("--rss-gb", type=float, default=1.0, help="GB to write for the durable RSS check (0: skip)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_broker.json")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.targets.split(","):
            with make(name, Path(tmp)) as t:
                host, port = t.bootstrap.split(",")[0].rsplit(":", 1)
                r = {"throughput": throughput(t.bootstrap, args.records)}
                r["latency"] = asyncio.run(latencies(host, int(port), args.samples))
                if name == "reference-durable" and args.rss_gb > 0:
                    r["memory"] = rss_after_writing(t.bootstrap, t.pid, args.rss_gb)
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
