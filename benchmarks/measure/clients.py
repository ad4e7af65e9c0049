"""confluent-kafka (librdkafka) throughput and the broker memory it leaves, against any bootstrap.

One produce loop serves the throughput figures and the RSS-while-writing figure, so both see the same client
settings: linger.ms 5, 1 MB batches, idempotence off unless asked, every record acknowledged or counted as an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1e6


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 1,
                 config: Mapping[str, str] | None = None, timeout: float = 60.0) -> None:
    """Create a topic and wait until Metadata names a leader for every partition (the first produce would
    otherwise time how long the broker takes to elect, not to write)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=dict(config or {}))])[name].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.list_topics(name, timeout=5).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions \
                    and all(p.leader >= 0 for p in md.partitions.values()):
                return
        except Exception:  # noqa: BLE001 - a transient Metadata failure: ask again until the deadline
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name}: no leader for every partition within {timeout:g} s")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, n: int, size: int = 100, *, partitions: int = 1, acks: str = "all",
            idempotence: bool = False, on_progress: Callable[[int], None] | None = None,
            timeout: float = 300.0) -> dict[str, float | int]:
    """Write n records of `size` bytes round-robin over the partitions; rate over the acknowledged whole.

    `on_progress(i)` is called every 5000 records (the RSS sampler uses it)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "enable.idempotence": idempotence})
    payload = b"x" * size
    errors = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.01)
        if i % 5000 == 0:
            p.poll(0)
            if on_progress is not None:
                on_progress(i)
    left = p.flush(timeout)
    seconds = time.perf_counter() - t0
    return {"records": n, "seconds": round(seconds, 3), "msgs_s": round(n / seconds),
            "mb_s": round(n * size / MB / seconds, 2), "errors": errors + left}


def consume(bootstrap: str, topic: str, n: int, *, partitions: int = 1, timeout: float = 300.0
            ) -> dict[str, float | int]:
    """Read n records from offset 0 of every partition (assigned, no group): msgs/s until the last one."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        got = 0
        t0 = time.perf_counter()
        deadline = t0 + timeout
        while got < n and time.perf_counter() < deadline:
            # Never ask for more than is left: consume() waits its whole timeout for a batch it cannot fill.
            got += sum(1 for m in c.consume(min(10_000, n - got), 1.0) if m.error() is None)
        seconds = time.perf_counter() - t0
    finally:
        c.close()
    return {"records": got, "seconds": round(seconds, 3), "msgs_s": round(got / seconds)}


def throughput(bootstrap: str, n: int, *, topic: str = "bench", partitions: int = 3, rf: int = 1,
               size: int = 100, acks: str = "all", topic_config: Mapping[str, str] | None = None,
               warmup: int = 0) -> dict[str, float | int]:
    """Produce then consume n records on a fresh topic: msgs/s each way (errors and shortfalls counted).

    `warmup` records first go through a topic of their own, untimed: a JVM broker compiles its hot paths in the
    first seconds, and a comparison should not time that against a broker that has nothing to compile."""
    if warmup:
        create_topic(bootstrap, f"{topic}-warmup", partitions, rf, topic_config)
        produce(bootstrap, f"{topic}-warmup", warmup, size, partitions=partitions, acks=acks)
        consume(bootstrap, f"{topic}-warmup", warmup, partitions=partitions)
    create_topic(bootstrap, topic, partitions, rf, topic_config)
    w = produce(bootstrap, topic, n, size, partitions=partitions, acks=acks)
    r = consume(bootstrap, topic, n, partitions=partitions)
    return {"records": n, "size": size, "rf": rf, "acks": acks, "partitions": partitions, "warmup": warmup,
            "produce_s": w["seconds"], "produce_msgs_s": w["msgs_s"], "produce_errors": w["errors"],
            "consume_s": r["seconds"], "consumed": r["records"], "consume_msgs_s": r["msgs_s"]}


def rss_while_writing(bootstrap: str, pids: Mapping[str, int], gigabytes: float, *, topic: str = "rss",
                      rf: int = 1, partitions: int = 3, size: int = 10_000) -> dict:
    """RSS of each node process before, at its peak during and after writing `gigabytes` of `size`-byte records.

    A durable broker should hold the log in the page cache, not in its own memory: RSS stays flat as the log
    grows. Raises RuntimeError unless every record was acknowledged (a partial write gives no figure)."""
    import psutil

    procs = {name: psutil.Process(pid) for name, pid in pids.items()}

    def sample() -> dict[str, int]:
        return {name: p.memory_info().rss for name, p in procs.items()}

    before = sample()
    peak = dict(before)

    def progress(_i: int) -> None:
        for name, rss in sample().items():
            peak[name] = max(peak[name], rss)

    create_topic(bootstrap, topic, partitions, rf)
    n = int(gigabytes * (1 << 30) / size)
    w = produce(bootstrap, topic, n, size, partitions=partitions, acks="all", on_progress=progress)
    after = sample()
    if w["errors"]:
        raise RuntimeError(f"RSS while writing: {w['errors']} of {n} records were not acknowledged")
    return {"written_gb": round(n * size / (1 << 30), 3), "records": n, "rf": rf, "seconds": w["seconds"],
            "per_node": {name: {"before_mb": round(before[name] / MB, 1),
                                "peak_mb": round(max(peak[name], after[name]) / MB, 1),
                                "after_mb": round(after[name] / MB, 1)} for name in procs}}
