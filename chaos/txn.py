"""The transactional queue workload (``chaos run --workload txn``), after Jepsen's Kafka queue test with
transactions: a spec first, then the generators.

Model
=====
Two topics of the same partition count: ``<topic>`` (input) and ``<topic>-out`` (output), replication 3 where the
cluster has 3 brokers. Three kinds of process, each with its own client (one of chaos/txn_clients.TXN_CLIENTS):
- transactional producers (``--producers``): each a transactional.id of its own (``tp-<run>-<process>``); each
  transaction writes 1-4 unique values to random partitions of the input topic and then commits, or, with
  probability ``abort_prob``, aborts on purpose;
- consume-transform-produce stages (``--transformers``): a read_committed consumer in one group subscribed to the
  input topic, and a transactional producer; each transaction polls the input, writes one new unique value per
  record read to the same partition of the output topic, commits its input offsets in the transaction
  (send_offsets_to_transaction) and commits (or aborts on purpose, with ``abort_prob`` / 2); after an abort or a
  failure the consumer is rewound to the group's committed offsets, as an exactly-once application does;
- read_committed consumers (``--consumers``): assign every partition of both topics and record plain ``poll`` ops.
At the end, with every fault undone and every transaction decided (the last stable offset caught up with the
high watermark, bounded), a fresh read_committed reader reads both topics from the beginning to their end.

Operations (the history contract, history/schema.py ``txn``)
=============================================================
One ``txn`` op per transaction on its process: invoke ``{txn_id, ops, abort}`` with the planned micro-ops (a
consume-transform-produce invoke lists an empty ``poll``, its ops are known once it has read); the completion
carries the ops as executed (``send`` with ``offset`` when the broker answered one; ``poll`` with the records read)
and, for consume-transform-produce, ``offsets`` ``{group, offsets: {"t/p": next offset}}``.
- ``ok``: commit_transaction returned.
- ``fail``: certainly not committed: aborted on purpose (``abort: true``), or an error before commit was asked for
  (the value says ``error``; ``abort_error`` when the abort that followed failed too: still no commit was ever
  requested, so the coordinator aborts it), or commit raised and the abort that followed succeeded.
- ``info``: commit raised and the abort failed (or a fatal error, fenced included, met the commit): unknown. The
  producer is then replaced (its InitProducerId fences the old epoch and settles the open transaction).
A consume-transform-produce transaction that read nothing is recorded ``fail`` with ``abort: true`` and an empty
poll (it was abandoned before writing). Plain polls, assigns and subscribes keep their queue-workload form.

Processes 0..P-1 are producers, P..P+T-1 transformers, then C consumers, then the final reader.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .client_stacks import make_txn_client
from .clients import ClientConfig
from .queue import Stats
from .txn_clients import TxnClient
from .workers import Workers


@dataclass
class TxnSpec:
    """Workload shape; every field goes into the run header's settings."""

    topic: str = "chaos-txn"
    partitions: int = 3
    replication: int = 3
    producers: int = 2
    transformers: int = 1
    consumers: int = 1
    rate: float = 20.0  # transactions per second over all producers
    abort_prob: float = 0.2
    max_sends: int = 4
    poll_timeout_s: float = 0.5
    final_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.producers < 1 or self.partitions < 1 or self.rate <= 0 or self.transformers < 0 or self.consumers < 0:
            raise ValueError("at least one producer and one partition, transformers/consumers >= 0, rate > 0")
        if not 0 <= self.abort_prob <= 1 or not 1 <= self.max_sends:
            raise ValueError("abort_prob in [0, 1], max_sends >= 1")

    @property
    def out_topic(self) -> str:
        return f"{self.topic}-out"

    @property
    def topics(self) -> list[str]:
        return [self.topic, self.out_topic]


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:500]


class TxnWorkload:
    """Runs the processes until `stop()`, then `final_read()`; records everything to `recorder`."""

    def __init__(self, spec: TxnSpec, recorder: Any, client: str, cfg: ClientConfig, seed: int = 0,
                 client_factory: Callable[[str, ClientConfig], TxnClient] = make_txn_client) -> None:
        self.spec = spec
        self.recorder = recorder
        self.client_name = client
        self.cfg = ClientConfig(**{**cfg.__dict__, "isolation": "read_committed", "commit": "sync"})
        self.seed = seed
        self.factory = client_factory
        self.stats = Stats()
        self._workers = Workers()
        self._stop = self._workers.stopping
        self.errors = self._workers.errors
        self.counts = {"committed": 0, "aborted": 0, "failed": 0, "unknown": 0}
        self._lock = threading.Lock()

    def keys(self, topics: list[str] | None = None) -> list[tuple[str, int]]:
        return [(t, p) for t in (topics or self.spec.topics) for p in range(self.spec.partitions)]

    def _client(self, process: int, **kw: Any) -> TxnClient:
        return self.factory(self.client_name, ClientConfig(**{**self.cfg.__dict__, **kw}))

    def _txn_id(self, process: int) -> str:
        return f"tp-{self.recorder.history.run_id}-{process}"

    # -- lifecycle
    def start(self) -> None:
        s = self.spec
        for i in range(s.producers):
            self._workers.spawn(f"txn-producer-{i}", self._producer, i)
        for j in range(s.transformers):
            self._workers.spawn(f"transformer-{j}", self._transformer, s.producers + j)
        for k in range(s.consumers):
            self._workers.spawn(f"consumer-{k}", self._consumer, s.producers + s.transformers + k)

    def stop(self, timeout_s: float = 45.0) -> None:
        """Ask every worker to finish its current operation and wait (bounded)."""
        self._workers.stop(timeout_s)

    def _count(self, outcome: str, kind: str) -> None:
        with self._lock:
            self.counts[outcome] += 1
        self.stats.count(kind)

    # -- one transaction, any kind
    def _finish_failed(self, client: TxnClient, process: int, value: dict[str, Any], err: BaseException | None,
                       commit_asked: bool) -> bool:
        """Record a transaction that did not commit cleanly; returns whether the producer must be replaced."""
        abort_err: BaseException | None = None
        try:
            client.abort()
        except Exception as e:  # noqa: BLE001 - recorded
            abort_err = e
        if err is not None:
            value["error"] = _error(err)
        if abort_err is not None:
            value["abort_error"] = _error(abort_err)
        if commit_asked and abort_err is not None:
            self.recorder.info(process, "txn", value)
            self._count("unknown", "info")
        else:
            self.recorder.fail(process, "txn", value)
            self._count("aborted" if value.get("abort") else "failed", "fail")
        return abort_err is not None

    def _run_txn(self, client: TxnClient, process: int, sends: list[dict[str, Any]], abort: bool,
                 poll: list[dict[str, Any]] | None = None, offsets: dict[str, int] | None = None) -> str:
        """Sends (after a poll already done) in one transaction; records the completion. Returns the outcome:
        ok | fail | info; the caller replaces the client after 'reset'."""
        txn_id = client.cfg.transactional_id or ""
        ops: list[dict[str, Any]] = []
        if poll is not None:
            ops.append({"f": "poll", "records": poll})
        value: dict[str, Any] = {"txn_id": txn_id, "ops": ops, "abort": abort}
        if offsets:
            value["offsets"] = {"group": client.cfg.group, "offsets": dict(offsets)}
        try:
            for s in sends:
                ops.append(dict(s))
                off = client.txn_send(s["topic"], s["partition"], s["key"], s["value"])
                if off is not None and off >= 0:
                    ops[-1]["offset"] = off
            if offsets:
                client.send_offsets(offsets)
        except Exception as e:  # noqa: BLE001 - no commit was asked for: it cannot commit
            ops.extend(dict(s) for s in sends[len(ops) - (poll is not None):])
            return "reset" if self._finish_failed(client, process, value, e, False) else "fail"
        if abort:
            return "reset" if self._finish_failed(client, process, value, None, False) else "fail"
        try:
            client.commit()
        except Exception as e:  # noqa: BLE001 - unknown unless the abort succeeds
            return "reset" if self._finish_failed(client, process, value, e, True) else "fail"
        self.recorder.ok(process, "txn", value)
        self._count("committed", "ok")
        return "ok"

    def _ensure_producer(self, client: TxnClient, process: int) -> bool:
        try:
            client.init()
            return True
        except Exception as e:  # noqa: BLE001 - the cluster may be down: try again shortly
            client.reset()
            if len(self.errors) < 50:
                self.errors.append(f"process {process} init_transactions: {_error(e)}")
            self._stop.wait(0.5)
            return False

    # -- transactional producers
    def _producer(self, process: int) -> None:
        rng = random.Random(self.seed * 1000 + process)
        client = self._client(process, transactional_id=self._txn_id(process))
        interval = self.spec.producers / self.spec.rate
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                if not self._ensure_producer(client, process):
                    continue
                sends = []
                for _ in range(rng.randint(1, self.spec.max_sends)):
                    part = rng.randrange(self.spec.partitions)
                    sends.append({"f": "send", "topic": self.spec.topic, "partition": part, "key": str(part),
                                  "value": self.recorder.unique_value()})
                abort = rng.random() < self.spec.abort_prob
                self.recorder.invoke(process, "txn", {"txn_id": client.cfg.transactional_id, "ops": sends,
                                                      "abort": abort})
                try:
                    client.begin()
                except Exception as e:  # noqa: BLE001 - fatal/illegal state: nothing was sent
                    self.recorder.fail(process, "txn", {"txn_id": client.cfg.transactional_id, "ops": sends,
                                                        "abort": abort, "error": _error(e)})
                    self._count("failed", "fail")
                    client.reset()
                    continue
                if self._run_txn(client, process, sends, abort) == "reset":
                    client.reset()
                next_at = max(next_at + interval, time.monotonic() - 1.0)
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        finally:
            client.close()

    # -- consume-transform-produce
    def _transformer(self, process: int) -> None:
        rng = random.Random(self.seed * 1000 + process)
        group = f"{self.cfg.group}-ctp"

        def open_client() -> TxnClient:
            c = self._client(process, transactional_id=self._txn_id(process), group=group)
            self.recorder.invoke(process, "subscribe", {"topics": [self.spec.topic]})
            c.subscribe([self.spec.topic])
            self.recorder.ok(process, "subscribe", {"topics": [self.spec.topic]})
            return c

        client = open_client()
        try:
            while not self._stop.is_set():
                if not self._ensure_producer(client, process):
                    continue
                txn_id = client.cfg.transactional_id
                abort = rng.random() < self.spec.abort_prob / 2
                self.recorder.invoke(process, "txn", {"txn_id": txn_id, "ops": [{"f": "poll"}], "abort": abort})
                try:
                    client.begin()
                    records, _ = client.poll(self.spec.poll_timeout_s)
                except Exception as e:  # noqa: BLE001 - nothing written
                    self.recorder.fail(process, "txn", {"txn_id": txn_id, "ops": [{"f": "poll"}], "abort": abort,
                                                        "error": _error(e)})
                    self._count("failed", "fail")
                    client.close()
                    client = open_client()
                    continue
                read = [{"topic": t, "partition": p, "offset": o, "key": k, "value": v} for t, p, o, k, v in records]
                if not read:
                    self._finish_failed(client, process, {"txn_id": txn_id, "ops": [{"f": "poll", "records": []}],
                                                          "abort": True}, None, False)
                    continue
                offsets: dict[str, int] = {}
                sends = []
                for r in read:
                    offsets[f"{r['topic']}/{r['partition']}"] = r["offset"] + 1
                    sends.append({"f": "send", "topic": self.spec.out_topic, "partition": r["partition"],
                                  "key": r["key"], "value": self.recorder.unique_value()})
                outcome = self._run_txn(client, process, sends, abort, poll=read, offsets=offsets)
                if outcome != "ok":
                    try:
                        client.rewind()  # read the aborted transaction's input again
                        if outcome == "reset":
                            client.reset()
                    except Exception:  # noqa: BLE001 - a new consumer starts from the committed offsets
                        client.close()
                        client = open_client()
        finally:
            client.close()

    # -- read_committed consumers
    def _poll(self, client: TxnClient, process: int) -> list[tuple]:
        self.recorder.invoke(process, "poll", {})
        try:
            records, positions = client.poll(self.spec.poll_timeout_s)
        except Exception as e:  # noqa: BLE001 - a poll changes nothing on the broker: fail
            self.recorder.fail(process, "poll", {"error": _error(e)})
            return []
        value: dict[str, Any] = {"records": [{"topic": t, "partition": p, "offset": o, "key": k, "value": v}
                                             for t, p, o, k, v in records]}
        if positions:
            value["positions"] = positions
        self.recorder.ok(process, "poll", value)
        return records

    def _assign_all(self, client: TxnClient, process: int) -> None:
        parts = [f"{t}/{p}" for t, p in self.keys()]
        self.recorder.invoke(process, "assign", {"partitions": parts})
        client.assign(self.keys())
        self.recorder.ok(process, "assign", {"partitions": parts})

    def _consumer(self, process: int) -> None:
        client = self._client(process, group=f"{self.cfg.group}-reader-{process}")
        self._assign_all(client, process)
        try:
            while not self._stop.is_set():
                if not self._poll(client, process):
                    self._stop.wait(0.1)
        finally:
            client.close()

    # -- final read
    def final_read(self) -> dict[str, Any]:
        """Read both topics read_committed from offset 0 to their end (bounded by final_timeout_s). Done when the
        reader's position (past markers) reached each partition's end."""
        s = self.spec
        process = s.producers + s.transformers + s.consumers
        deadline = time.monotonic() + s.final_timeout_s
        client = self._client(process, group=f"{self.cfg.group}-final")
        ends: dict[str, int] | None = None
        last = "no answer"  # the last end-offsets error: the report says why there were none
        pos: dict[str, int] = {}
        try:
            while ends is None and time.monotonic() < deadline:
                try:
                    ends = client.end_offsets(self.keys())
                except Exception as e:  # noqa: BLE001 - leaders may still be moving
                    last = f"{type(e).__name__}: {e}"[:300]
                    time.sleep(0.5)
            if ends is None:
                return {"complete": False, "error": f"no end offsets before the deadline (last: {last})"}
            self._assign_all(client, process)
            for t, p in self.keys():
                client.seek(t, p, 0)
            while time.monotonic() < deadline:
                self._poll(client, process)
                try:
                    pos = client.positions()
                except Exception:  # noqa: BLE001 - ask again after the next poll
                    continue
                if all(pos.get(k, 0) >= e for k, e in ends.items()):
                    break
        finally:
            client.close()
        return {"complete": all(pos.get(k, 0) >= e for k, e in (ends or {}).items()), "ends": ends, "reached": pos}


    def raw_read(self, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Every data record of the input topic read_uncommitted (the reference stack, outside the history): what
        really sits at each offset, aborted and committed alike. Not checked; evidence for a finding (e.g. which
        record a lost write's reported offset holds)."""
        from .clients import ReferenceClient

        keys = self.keys([self.spec.topic])
        client = ReferenceClient(ClientConfig(**{**self.cfg.__dict__, "isolation": "read_uncommitted", "extra": {},
                                         "group": f"{self.cfg.group}-raw"}))
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        try:
            ends = client.end_offsets(keys)
            client.assign(keys)
            for t, p in keys:
                client.seek(t, p, 0)
            while time.monotonic() < deadline:
                records, _ = client.poll(1.0)
                out.extend({"topic": t, "partition": p, "offset": o, "value": v} for t, p, o, _k, v in records)
                pos = client.positions()
                if all(pos.get(k, 0) >= e for k, e in ends.items()):
                    break
        except Exception:  # noqa: BLE001, S110 - diagnostic only: keep what was read
            pass
        finally:
            client.close()
        return out


def await_stable(bootstrap: str, keys: list[tuple[str, int]], timeout_s: float) -> dict[str, Any]:
    """Wait (bounded) until every partition's last stable offset equals its high watermark (ListOffsets LATEST at
    read_committed and read_uncommitted): every transaction decided, so the final read_committed read can reach
    the log end. A transaction left open by a producer that vanished is aborted by its coordinator after
    transaction.timeout.ms. Returns {"stable", "waited_s", "open": {"t/p": [lso, hw]}}."""
    from reference_broker.client import LATEST, Admin, TopicPartition

    from .kafka_meta import run_sync

    tps = [TopicPartition(t, p) for t, p in keys]

    async def ask() -> dict[str, list[int]]:
        async with Admin(bootstrap, request_timeout=5.0) as admin:
            committed = await admin.list_offsets({tp: LATEST for tp in tps}, isolation_level=1)
            hw = await admin.list_offsets({tp: LATEST for tp in tps}, isolation_level=0)
        return {f"{tp.topic}/{tp.partition}": [committed[tp].offset, hw[tp].offset] for tp in tps
                if committed[tp].offset != hw[tp].offset}

    t0 = time.monotonic()
    open_: dict[str, list[int]] | None = None
    error = None
    while True:
        try:
            open_ = run_sync(ask)
            if not open_:
                break
        except Exception as e:  # noqa: BLE001 - leaders may still be moving
            error = _error(e)
        if time.monotonic() - t0 >= timeout_s:
            break
        time.sleep(0.5)
    out: dict[str, Any] = {"stable": open_ == {}, "waited_s": round(time.monotonic() - t0, 1), "open": open_}
    if open_ is None and error:
        out["error"] = error
    return out
