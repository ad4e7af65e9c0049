"""Failover after kill -9 of a partition leader, through the target's node control (any target with
`kill_broker` and `restart`: the reference cluster, Apache Kafka, Kafka in Docker).

Per kill, on a one-partition topic with RF=3 and min.insync.replicas=2:
- ``to_leader_s``: from the SIGKILL to the first Metadata answer (asked of every surviving broker every 20 ms)
  naming a leader other than the killed one. Kafka's controller moves leadership once the dead broker's
  session expires (broker.session.timeout.ms, KIP-631) and elects from the ISR (PartitionChangeBuilder).
- ``producer_gap_s``: the longest pause between two acknowledgements of an idempotent acks=all producer writing a
  record every 2 ms all along, from just before the kill until its first acknowledgement after the new leader.
- ``consumer_gap_s``: the same for the records a consumer reading the partition receives.
- ``killed_controller``: whether the killed node was the active controller too (Kafka's combined nodes: the
  quorum then elects a controller first; the reference cluster's controller is its own process).
Then the node is restarted and the next kill waits until the ISR holds every replica again.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from kafka.protocol.metadata import MetadataRequest

from fixtures.net import api_versions, cluster_view, parse_bootstrap, round_trip

from .clients import create_topic
from .stats import p50_p99

POLL_S = 0.02


class Traffic:
    """A producer and a consumer on one partition, each in its own thread, recording when records get through."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[float] = []
        self.consumed: list[float] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, name="failover-producer", daemon=True),
                         threading.Thread(target=self._read, name="failover-consumer", daemon=True)]

    def _write(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
                      "message.timeout.ms": 120_000, "enable.idempotence": True, "log_level": 2})

        def done(err: object, _msg: object) -> None:
            if err is None:
                self.acked.append(time.monotonic())
        while not self._stop.is_set():
            try:
                p.produce(self.topic, b"f", partition=0, on_delivery=done)
            except BufferError:
                pass
            p.poll(0.002)
        p.flush(5)

    def _read(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "failover", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 100, "log_level": 2})
        c.assign([TopicPartition(self.topic, 0, OFFSET_END)])
        try:
            while not self._stop.is_set():
                if any(m.error() is None for m in c.consume(1000, 0.05)):
                    self.consumed.append(time.monotonic())
        finally:
            c.close()

    def start(self) -> Traffic:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)



def first_after(times: list[float], t: float, timeout: float) -> float | None:
    """The first recorded time after t, waiting up to `timeout` for one (times grow in another thread)."""
    end = time.monotonic() + timeout
    while True:
        i = bisect.bisect_right(times, t)
        if i < len(times):
            return times[i]
        if time.monotonic() > end:
            return None
        time.sleep(POLL_S)


def longest_gap(times: list[float], start: float, end: float) -> float | None:
    """The longest pause between consecutive times in [start, end] (None when fewer than two fall there)."""
    window = times[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]
    if len(window) < 2:
        return None
    return max(b - a for a, b in zip(window, window[1:], strict=False))


class MetadataProbe:
    """Metadata for one partition, asked of one broker on a fresh connection (no client cache in the way)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        served = api_versions(host, port).versions[3]
        self.version = min(9, served[1])

    def partition(self, topic: str, partition: int = 0, timeout: float = 1.0) -> tuple[int, list[int]]:
        """(leader id, ISR) as this broker sees them; (-1, []) when it names none."""
        fields: dict[str, Any] = {"topics": [MetadataRequest.MetadataRequestTopic(name=topic)]}
        if self.version >= 4:
            fields["allow_auto_topic_creation"] = False
        if self.version >= 8:
            fields["include_topic_authorized_operations"] = False
        if 8 <= self.version <= 10:
            fields["include_cluster_authorized_operations"] = False
        resp = round_trip(self.host, self.port, MetadataRequest[self.version](**fields), timeout)
        for t in resp.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition and p.error_code == 0:
                    return p.leader_id, list(p.isr_nodes)
        return -1, []


def _ask(probes: dict[int, MetadataProbe], skip: int, topic: str) -> tuple[int, list[int]]:
    """The first answer from a broker other than `skip` that names a leader; (-1, []) if none does."""
    for nid, probe in probes.items():
        if nid == skip:
            continue
        try:
            leader, isr = probe.partition(topic)
        except Exception:  # noqa: BLE001 - a broker that does not answer now: ask the next one
            continue
        if leader >= 0:
            return leader, isr
    return -1, []


def _wait(pred: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(POLL_S)
    return True


def failover(target: Any, kills: int, *, topic: str = "failover", settle_s: float = 0.5, timeout_s: float = 60.0,
             log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Kill the partition leader `kills` times (restarting it after each); one dict of figures per kill."""
    host, port = parse_bootstrap(target.bootstrap)[0]
    brokers = cluster_view(host, port).brokers
    probes = {nid: MetadataProbe(h, p) for nid, (h, p) in sorted(brokers.items())}
    create_topic(target.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    traffic = Traffic(target.bootstrap, topic).start()
    out: list[dict[str, Any]] = []
    try:
        if first_after(traffic.consumed, time.monotonic(), timeout_s) is None:
            raise RuntimeError("failover: no record got through before the first kill")
        for k in range(kills):
            full = _wait(lambda: len(_ask(probes, -1, topic)[1]) == len(brokers), timeout_s)
            old, _ = _ask(probes, -1, topic)
            controller = killed_controller(target, probes, old)
            time.sleep(settle_s)
            t_kill = time.monotonic()
            target.kill_broker(old)
            got = _wait(lambda old=old: _ask(probes, old, topic)[0] not in (-1, old), timeout_s)
            t_new = time.monotonic()
            row: dict[str, Any] = {"kill": k, "leader": old, "killed_controller": controller,
                                   "isr_full_before": full, "to_leader_s": round(t_new - t_kill, 3) if got else None}
            for name, times in (("producer", traffic.acked), ("consumer", traffic.consumed)):
                first = first_after(times, t_new, timeout_s)
                row[f"{name}_gap_s"] = None if first is None else longest_gap(times, t_kill - settle_s, first)
                if row[f"{name}_gap_s"] is not None:
                    row[f"{name}_gap_s"] = round(row[f"{name}_gap_s"], 3)
            out.append(row)
            log(f"  kill {k + 1}/{kills}: {row}")
            target.restart(old)
    finally:
        traffic.stop()
    return out


def killed_controller(target: Any, probes: dict[int, MetadataProbe], node: int) -> bool | None:
    """Whether node `node` is the active controller: False when it holds no controller role at all (the reference
    cluster's controller is a process of its own), else DescribeQuorum's leader (Metadata's controller id will not
    do: a KRaft broker names a random live broker there); None when no broker answers DescribeQuorum."""
    if node not in getattr(target, "controller_ids", []):
        return False
    from kafka.protocol.admin.cluster import DescribeQuorumRequest

    TD = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest[0](topics=[TD(topic_name="__cluster_metadata",
                                             partitions=[TD.PartitionData(partition_index=0)])])
    for probe in probes.values():
        try:
            resp = round_trip(probe.host, probe.port, req, 2.0)
            return resp.topics[0].partitions[0].leader_id == node
        except Exception:  # noqa: BLE001 - this broker is down or does not serve it: ask the next
            continue
    return None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """p50/p99 of each figure over the kills (a kill whose figure timed out counts in `timeouts`)."""
    out: dict[str, Any] = {"kills": len(rows), "killed_controller": sum(r["killed_controller"] is True for r in rows)}
    for key in ("to_leader_s", "producer_gap_s", "consumer_gap_s"):
        vals = [r[key] for r in rows if r.get(key) is not None]
        out[key] = {**p50_p99(vals), "timeouts": len(rows) - len(vals)}
    return out
