"""The queue workload, in the spirit of Jepsen's Kafka queue test: a spec first, then the generators.

Model
=====
N producer processes append unique integers to the partitions of one topic (replication factor 3 where the
cluster has 3 brokers); M consumer processes read them back, by manual `assign` of every partition or by
`subscribe` in one consumer group, and commit what they consumed (sync, async or the client's auto-commit).
At the end, with every fault undone, a fresh reader process reads every partition from the beginning up to its
high watermark, so that every acknowledged write has had its chance to be seen: a write acknowledged and then
missing from that final read (below what was read) is a lost write.

Operations (the history contract, history/schema.py)
====================================================
- producer ``send`` invoke ``{topic, partition, key, value}``; ``ok`` adds ``offset``; ``fail`` when the broker's
  answer proves nothing was appended (the producer never retries: clients.definite_send_errors(acks)); ``info``
  otherwise, a timed-out send included (it may be appended later).
- consumer ``assign`` / ``subscribe`` once at start (and after each reset); ``poll`` invoke ``{}``, ``ok``
  ``{records, positions?}`` (positions: every client stack, with assign only), ``fail`` on an error;
  ``commit`` ``{group, offsets}`` every `commit_every` polls that read something: ``ok`` when a sync commit was
  confirmed, ``info`` for async commits and for errors (a commit may land late). Auto-commits are the client's
  and are not recorded; the reference stack commits only in a group (with ``assign`` it does not commit).
- a consumer *reset* (probability `reset_prob` per poll) tears the client down and starts a new one (``crash``;
  its next position comes from the group's committed offsets or from the earliest offset): Jepsen's
  crash-and-reopen, which is how position resets enter the history without looking like a skip.
- nemesis operations are interleaved by the NemesisRunner on process -1.

Processes 0..N-1 are producers, N..N+M-1 consumers, N+M the final reader. Everything runs in threads with one
client each; durations and retries are bounded.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .client_stacks import make_client
from .clients import ClientConfig, Definite, Indefinite, QueueClient
from .workers import Workers


@dataclass
class QueueSpec:
    """Workload shape; every field goes into the run header's settings."""

    topic: str = "chaos-queue"
    partitions: int = 2
    replication: int = 3
    producers: int = 2
    consumers: int = 2
    rate: float = 200.0  # sends per second over all producers
    sub_via: str = "assign"  # assign | subscribe
    commit_every: int = 5
    reset_prob: float = 0.0
    poll_timeout_s: float = 0.5
    final_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.sub_via not in ("assign", "subscribe"):
            raise ValueError("sub_via must be assign or subscribe")
        if self.producers < 1 or self.consumers < 0 or self.partitions < 1 or self.rate <= 0:
            raise ValueError("at least one producer and one partition, consumers >= 0, rate > 0")


@dataclass
class Stats:
    """Live counters for the progress display (thread-safe enough: one writer per counter key under a lock)."""

    ok: int = 0
    fail: int = 0
    info: int = 0
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (t, send latency s), bounded
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str) -> None:
        with self.lock:
            setattr(self, kind, getattr(self, kind) + 1)


class QueueWorkload:
    """Runs producers and consumers until `stop()`, then `final_read()`; records everything to `recorder`."""

    def __init__(self, spec: QueueSpec, recorder: Any, client: str, cfg: ClientConfig, seed: int = 0,
                 client_factory: Callable[[str, ClientConfig], QueueClient] = make_client) -> None:
        self.spec = spec
        self.recorder = recorder
        self.client_name = client
        self.cfg = cfg
        self.seed = seed
        self.factory = client_factory
        self.stats = Stats()
        self._workers = Workers()
        self._stop = self._workers.stopping
        self.errors = self._workers.errors

    @property
    def keys(self) -> list[tuple[str, int]]:
        return [(self.spec.topic, p) for p in range(self.spec.partitions)]

    # -- lifecycle
    def start(self) -> None:
        for i in range(self.spec.producers):
            self._workers.spawn(f"producer-{i}", self._producer, i)
        for j in range(self.spec.consumers):
            self._workers.spawn(f"consumer-{j}", self._consumer, self.spec.producers + j)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask every worker to finish its current operation and wait (bounded)."""
        self._workers.stop(timeout_s)

    # -- producers
    def _producer(self, process: int) -> None:
        rng = random.Random(self.seed * 1000 + process)
        client = self.factory(self.client_name, self.cfg)
        interval = self.spec.producers / self.spec.rate
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                topic, part = rng.choice(self.keys)
                value = self.recorder.unique_value()
                op = {"topic": topic, "partition": part, "key": str(part), "value": value}
                self.recorder.invoke(process, "send", op)
                t0 = time.monotonic()
                try:
                    offset = client.send(topic, part, str(part), value)
                except Definite as e:
                    self.recorder.fail(process, "send", {**op, "error": str(e)})
                    self.stats.count("fail")
                except Indefinite as e:
                    self.recorder.info(process, "send", {**op, "error": str(e)})
                    self.stats.count("info")
                else:
                    self.recorder.ok(process, "send", {**op, "offset": offset})
                    self.stats.count("ok")
                    with self.stats.lock:
                        if len(self.stats.latencies) < 200_000:
                            self.stats.latencies.append((t0, time.monotonic() - t0))
                next_at = max(next_at + interval, time.monotonic() - 1.0)  # no catch-up bursts after a stall
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        finally:
            client.close()

    # -- consumers
    def _open(self, process: int) -> QueueClient:
        client = self.factory(self.client_name, self.cfg)
        if self.spec.sub_via == "assign":
            parts = [f"{t}/{p}" for t, p in self.keys]
            self.recorder.invoke(process, "assign", {"partitions": parts})
            client.assign(self.keys)
            self.recorder.ok(process, "assign", {"partitions": parts})
        else:
            self.recorder.invoke(process, "subscribe", {"topics": [self.spec.topic]})
            client.subscribe([self.spec.topic])
            self.recorder.ok(process, "subscribe", {"topics": [self.spec.topic]})
        return client

    def _consumer(self, process: int) -> None:
        rng = random.Random(self.seed * 1000 + process)
        client = self._open(process)
        next_offsets: dict[str, int] = {}
        polls = 0
        try:
            while not self._stop.is_set():
                if self.spec.reset_prob and rng.random() < self.spec.reset_prob:
                    client.close()
                    self.recorder.invoke(process, "crash", {"why": "reset"})
                    self.recorder.info(process, "crash", {"why": "reset"})
                    client = self._open(process)
                    next_offsets = {}
                if not self._poll(client, process, next_offsets):
                    self._stop.wait(0.2)
                    continue
                polls += 1
                if (self.cfg.commit != "auto" and next_offsets and polls % self.spec.commit_every == 0
                        and client.can_commit()):
                    self._commit(client, process, dict(next_offsets))
        finally:
            client.close()

    def _poll(self, client: QueueClient, process: int, next_offsets: dict[str, int]) -> bool:
        self.recorder.invoke(process, "poll", {})
        try:
            records, positions = client.poll(self.spec.poll_timeout_s)
        except Exception as e:  # noqa: BLE001 - a poll changes nothing on the broker: fail
            self.recorder.fail(process, "poll", {"error": f"{type(e).__name__}: {e}"})
            return False
        value: dict[str, Any] = {"records": [{"topic": t, "partition": p, "offset": o, "key": k, "value": v}
                                             for t, p, o, k, v in records]}
        if positions:
            value["positions"] = positions
        self.recorder.ok(process, "poll", value)
        for t, p, o, _, _ in records:
            next_offsets[f"{t}/{p}"] = o + 1
        return True

    def _commit(self, client: QueueClient, process: int, offsets: dict[str, int]) -> None:
        op = {"group": self.cfg.group, "offsets": offsets}
        self.recorder.invoke(process, "commit", op)
        try:
            confirmed = client.commit(offsets)
        except Exception as e:  # noqa: BLE001 - a failed commit may still have landed
            self.recorder.info(process, "commit", {**op, "error": f"{type(e).__name__}: {e}"})
            return
        (self.recorder.ok if confirmed else self.recorder.info)(process, "commit", op)

    # -- final read
    def final_read(self, start: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Read every partition from offset 0 (or ``start["topic/partition"]``: a schedule that deleted records
        reads from the log start, where a seek to 0 is reset to) to its end (bounded by final_timeout_s); returns
        what was reached."""
        process = self.spec.producers + self.spec.consumers
        deadline = time.monotonic() + self.spec.final_timeout_s
        cfg = ClientConfig(**{**self.cfg.__dict__, "group": f"{self.cfg.group}-final"})
        client = self.factory(self.client_name, cfg)
        ends: dict[str, int] | None = None
        last = "no answer"  # the last end-offsets error: the report says why there were none
        reached: dict[str, int] = {}
        try:
            while ends is None and time.monotonic() < deadline:
                try:
                    ends = client.end_offsets(self.keys)
                except Exception as e:  # noqa: BLE001 - leaders may still be moving: retry until the deadline
                    last = f"{type(e).__name__}: {e}"[:300]
                    time.sleep(0.5)
            if ends is None:
                return {"complete": False, "error": f"no end offsets before the deadline (last: {last})"}
            parts = [f"{t}/{p}" for t, p in self.keys]
            self.recorder.invoke(process, "assign", {"partitions": parts})
            client.assign(self.keys)
            self.recorder.ok(process, "assign", {"partitions": parts})
            for t, p in self.keys:
                client.seek(t, p, (start or {}).get(f"{t}/{p}", 0))
            while time.monotonic() < deadline and any(reached.get(k, 0) < e for k, e in ends.items()):
                self._poll(client, process, reached)
        finally:
            client.close()
        return {"complete": all(reached.get(k, 0) >= e for k, e in ends.items()), "ends": ends, "reached": reached}
