"""Generated histories: a small simulated Kafka that yields clean (linearizable, anomaly-free) runs, plus
scenarios that add exactly one Jepsen anomaly on a partition of their own.

Used by the tests, the benchmarks and the Spark equivalence check, so that every checker is exercised on
histories whose ground truth is known by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from history.io import History
from history.schema import key_of

ANOMALY_TOPIC = "anom"
ANOMALY_KEY = key_of(ANOMALY_TOPIC, 0)


@dataclass
class _Proc:
    pending: tuple | None = None  # (f, invoke value, extra)
    assigned: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)


class _Builder:
    def __init__(self, h: History, t0: int = 0) -> None:
        self.h = h
        self.t = t0

    def add(self, process: int, typ: str, f: str, value: object, dt: int = 1000) -> dict:
        self.t += dt
        op = {"run_id": self.h.run_id, "index": len(self.h.ops), "time_ns": self.t, "process": process,
              "type": typ, "f": f, "value": value}
        self.h.ops.append(op)
        return op


def generate(
    run_id: str,
    *,
    seed: int = 0,
    n_ops: int = 1000,
    processes: int = 5,
    partitions: int = 3,
    topic: str = "t",
    target: str = "synthetic",
    nemesis: str | None = None,
    p_info: float = 0.05,
    p_fail: float = 0.03,
    max_poll: int = 8,
    group: str = "g",
    settings: dict | None = None,
) -> History:
    """A clean run of about ``n_ops`` operations: each effect happens atomically at its completion, info sends
    happen or not at random, failed ones never do, and a final poller reads every partition to the end."""
    rnd = random.Random(seed)
    h = History(run_id, target=target, nemesis=nemesis, settings=dict(settings or {"sub_via": ["assign"]}))
    b = _Builder(h)
    keys = [key_of(topic, i) for i in range(partitions)]
    logs: dict[str, list] = {k: [] for k in keys}
    committed: dict[str, int] = {}
    procs = [_Proc() for _ in range(processes)]
    next_value = 0

    def complete(p: int, st: _Proc, final: bool = False) -> None:
        f, inv, extra = st.pending
        st.pending = None
        roll = 1.0 if final else rnd.random()
        if f == "send":
            k = key_of(inv["topic"], inv["partition"])
            if roll < p_fail:
                b.add(p, "fail", f, inv, rnd.randint(1, 50_000))
            elif roll < p_fail + p_info:
                if rnd.random() < 0.5:
                    logs[k].append(inv["value"])  # happened, but the client never learned it
                b.add(p, "info", f, inv, rnd.randint(1, 50_000))
            else:
                logs[k].append(inv["value"])
                b.add(p, "ok", f, {**inv, "offset": len(logs[k]) - 1}, rnd.randint(1, 50_000))
        elif f == "poll":
            recs = []
            for k in st.assigned:
                pos = st.positions.get(k, 0)
                take = logs[k][pos: pos + max(1, max_poll - len(recs))]
                t, part = k.rsplit("/", 1)
                for j, v in enumerate(take):
                    recs.append({"topic": t, "partition": int(part), "offset": pos + j, "key": None, "value": v})
                st.positions[k] = pos + len(take)
                if len(recs) >= max_poll:
                    break
            b.add(p, "ok", f, {"records": recs}, rnd.randint(1, 50_000))
        elif f == "assign":
            new = inv["partitions"]
            st.positions = {k: v for k, v in st.positions.items() if k in new}
            st.assigned = list(new)
            b.add(p, "ok", f, inv, rnd.randint(1, 5_000))
        elif f == "commit":
            if roll < p_fail:
                b.add(p, "fail", f, inv, rnd.randint(1, 20_000))
            else:
                ok = roll >= p_fail + p_info
                if ok or rnd.random() < 0.5:
                    committed.update(inv["offsets"])
                b.add(p, "ok" if ok else "info", f, inv, rnd.randint(1, 20_000))
        elif f == "fetch_offsets":
            offs = {k: committed.get(k) for k in inv["partitions"]}
            b.add(p, "ok", f, {"group": group, "offsets": offs}, rnd.randint(1, 20_000))
        elif f == "crash":
            st.assigned, st.positions = [], {}
            b.add(p, "info", f, None, rnd.randint(1, 5_000))

    while len(h.ops) < n_ops:
        p = rnd.randrange(processes)
        st = procs[p]
        if st.pending is not None:
            complete(p, st)
            continue
        if nemesis and rnd.random() < 0.002:
            b.add(-1, "info", "nemesis", {"fault": nemesis, "phase": rnd.choice(["start", "stop"])}, 10)
        roll = rnd.random()
        if not st.assigned or roll < 0.02:
            inv: object = {"partitions": sorted(rnd.sample(keys, rnd.randint(1, len(keys))))}
            f = "assign"
        elif roll < 0.5:
            k = rnd.choice(keys)
            t, part = k.rsplit("/", 1)
            inv = {"topic": t, "partition": int(part), "key": None, "value": next_value}
            next_value += 1
            f = "send"
        elif roll < 0.88:
            inv, f = {}, "poll"
        elif roll < 0.94:
            inv = {"group": group, "offsets": {k: st.positions.get(k, 0) for k in st.assigned}}
            f = "commit"
        elif roll < 0.995:
            inv, f = {"group": group, "partitions": list(keys)}, "fetch_offsets"
        else:
            inv, f = None, "crash"
        st.pending = (f, inv, None)
        b.add(p, "invoke", f, inv, rnd.randint(1, 20_000))
    # Finish everything in flight, then one fresh consumer reads every partition to its end.
    for p, st in enumerate(procs):
        if st.pending is not None:
            complete(p, st, final=True)
    fin = processes
    st = _Proc()
    st.pending = ("assign", {"partitions": list(keys)}, None)
    b.add(fin, "invoke", "assign", {"partitions": list(keys)})
    complete(fin, st, final=True)
    while any(st.positions.get(k, 0) < len(logs[k]) for k in keys):
        st.pending = ("poll", {}, None)
        b.add(fin, "invoke", "poll", {})
        complete(fin, st, final=True)
    return h


# ---------------------------------------------------------------- one-anomaly scenarios

def _rec(v: object, off: int | None = None) -> dict:
    r = {"topic": ANOMALY_TOPIC, "partition": 0, "key": None, "value": v}
    if off is not None:
        r["offset"] = off
    return r


def _scenario(kind: str) -> list[tuple]:
    """Steps (process, f, invoke value, completion type, completion value) on partition anom/0."""
    a, b_, c = "a", "b", "c"
    W, R1, R2 = 100, 101, 102
    assign = [(R1, "assign", {"partitions": [ANOMALY_KEY]}, "ok", None),
              (R2, "assign", {"partitions": [ANOMALY_KEY]}, "ok", None)]

    def send(v: object, off: int | None, typ: str = "ok", p: int = W) -> tuple:
        return (p, "send", _rec(v), typ, _rec(v, off) if typ == "ok" else _rec(v))

    def poll(p: int, *pairs: tuple) -> tuple:
        return (p, "poll", {}, "ok", {"records": [_rec(v, o) for o, v in pairs]})

    abc = [send(a, 0), send(b_, 1), send(c, 2)]
    full = poll(R2, (0, a), (1, b_), (2, c))
    scenarios = {
        # b was acknowledged at offset 1, c (offset 2) was read, nobody ever read b.
        "lost-write": abc + assign + [poll(R1, (0, a)), poll(R2, (2, c))],
        # a is seen at offsets 0 and 2.
        "duplicate": [send(a, 0), send(b_, 1)] + assign + [poll(R1, (0, a), (1, b_)), poll(R2, (2, a))],
        # offset 1 holds b for one client and c for another.
        "inconsistent-offsets": [send(a, 0), send(b_, 1), send(c, 1)] + assign
        + [poll(R1, (0, a), (1, b_)), poll(R2, (1, c))],
        # one producer's second send landed before its first.
        "nonmonotonic-send": [send(a, 1), send(b_, 0)] + assign + [poll(R1, (0, b_), (1, a))],
        # inside one batch, the second record got the lower offset.
        "int-nonmonotonic-send": [(W, "send", {"records": [_rec(a), _rec(b_)]}, "ok",
                                   {"records": [_rec(a, 1), _rec(b_, 0)]})] + assign + [poll(R1, (0, b_), (1, a))],
        # the second poll starts again at b, where the first ended.
        "nonmonotonic-poll": abc + assign + [poll(R1, (0, a), (1, b_)), poll(R1, (1, b_), (2, c))],
        # one poll repeats b.
        "int-nonmonotonic-poll": abc + assign + [poll(R1, (0, a), (1, b_), (1, b_), (2, c))],
        # the second poll jumps from a to c; b exists (R2 read it).
        "poll-skip": abc + assign + [poll(R1, (0, a)), poll(R1, (2, c)), full],
        # one poll jumps from a to c.
        "int-poll-skip": abc + assign + [poll(R1, (0, a), (2, c)), full],
        # b was acknowledged at the tail and no one ever caught up with it.
        "unseen": [send(a, 0), send(b_, 1)] + assign + [poll(R1, (0, a))],
        # a's send failed, yet a poll returned it.
        "G1a": [send(a, None, "fail")] + assign + [poll(R1, (0, a))],
        # acceptable: a batch's records were not adjacent (a concurrent producer's b sits between them).
        "int-send-skip": [("raw", 103, "invoke", "send", _rec(b_)),
                          (W, "send", {"records": [_rec(a), _rec(c)]}, "ok", {"records": [_rec(a, 0), _rec(c, 2)]}),
                          ("raw", 103, "ok", "send", _rec(b_, 1))] + assign + [full],
    }
    return scenarios[kind]


SCENARIOS = (
    "lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-send", "int-nonmonotonic-send",
    "nonmonotonic-poll", "int-nonmonotonic-poll", "poll-skip", "int-poll-skip", "unseen", "G1a", "int-send-skip",
)


def with_anomaly(h: History, kind: str) -> History:
    """A copy of ``h`` with one scenario appended on partition anom/0 by processes of its own (100+)."""
    out = History(h.run_id, [dict(op) for op in h.ops], h.target, h.nemesis, dict(h.settings))
    b = _Builder(out, out.ops[-1]["time_ns"] if out.ops else 0)
    for step in _scenario(kind):
        if step[0] == "raw":
            b.add(*step[1:])
            continue
        p, f, inv, typ, done = step
        b.add(p, "invoke", f, inv)
        b.add(p, typ, f, done if done is not None else inv)
    return out


def scenario_history(kind: str, run_id: str = "scenario") -> History:
    """Just the scenario, on an otherwise empty run."""
    return with_anomaly(History(run_id, settings={"sub_via": ["assign"]}), kind)
