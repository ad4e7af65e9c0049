"""Small synchronous helpers over real clients: partition state from Metadata, waiting with a deadline."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

T = TypeVar("T")


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    a = admin(bootstrap)          # kept alive until the future resolves (a dropped handle cancels it)
    a.create_topics([NewTopic(name, partitions, rf, config=dict(configs))])[name].result(30)


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) as Metadata reports them now."""
    a = admin(bootstrap)
    md = a.list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[partition]
    return p.leader, list(p.replicas), sorted(p.isrs)


def wait_for(probe: Callable[[], T], ok: Callable[[T], bool], timeout: float, what: str,
             interval: float = 0.1) -> tuple[T, float]:
    """Poll ``probe`` until ``ok``; returns (value, seconds waited) or fails with the last value seen."""
    t0 = time.monotonic()
    last: T | None = None
    while time.monotonic() - t0 < timeout:
        try:
            last = probe()
            if ok(last):
                return last, time.monotonic() - t0
        except Exception as e:  # noqa: BLE001 - a broker being killed answers with errors for a while
            last = e  # type: ignore[assignment]
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}")


def move_leadership(cluster, topic: str, how: str) -> tuple[int, int]:
    """End the current leader's epoch: ``pause`` it until the controller fenced it and elected another leader, then
    resume it; or ``kill`` it and restart it. Returns (old leader, new leader); the old one runs again, not
    necessarily back in the ISR yet."""
    old, _, _ = partition_state(cluster.bootstrap, topic)
    # Probe through the other brokers: a Metadata request sent to a stopped broker waits out its timeout.
    others = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in cluster.broker_ids if b != old)
    (getattr(cluster, how))(old)
    try:
        (new, _, _), _ = wait_for(lambda: partition_state(others, topic),
                                  lambda s: s[0] >= 0 and s[0] != old, 30, f"a new leader after {how} {old}")
    finally:
        if how == "pause":
            cluster.resume(old)
        else:
            cluster.restart(old)
    return old, new
