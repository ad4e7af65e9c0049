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


# ---------------------------------------------------------------- transactional runs (issue 20)

TXN_ANOMALY_TOPIC = "anomt"


def generate_txn(
    run_id: str,
    *,
    seed: int = 0,
    n_ops: int = 1000,
    producers: int = 4,
    consumers: int = 2,
    ctp: int = 1,
    partitions: int = 4,
    out_partitions: int = 2,
    p_abort: float = 0.1,
    p_info: float = 0.03,
    max_poll: int = 8,
    target: str = "synthetic",
    settings: dict | None = None,
    pending: bool = True,
) -> History:
    """A clean transactional run (Jepsen's transactional queue workload): producers' txns of 1-4 sends over
    partitions of topic ``t``, some aborted on purpose, some of unknown outcome (info); read_committed consumers
    polling ``t`` and ``out``; consume-transform-produce txns reading ``t`` (read_committed) and writing ``out``
    with their input offsets in the txn, rewound when their txn does not commit.

    The log is modelled as Kafka keeps it: a txn's records are appended when it is invoked (so txns interleave),
    occupy offsets whether committed or not, and every partition a txn touched gets a marker (an offset no one
    reads) when it ends; read_committed reads stop at the last stable offset (the first record of the earliest
    open txn) and skip aborted records. ``pending``: the run ends with a txn invoked and never completed."""
    rnd = random.Random(seed)
    h = History(run_id, target=target, settings=dict(settings or {"sub_via": ["assign"], "isolation":
                                                                   "read_committed"}))
    b = _Builder(h)
    keys = [key_of("t", i) for i in range(partitions)]
    out_keys = [key_of("out", i) for i in range(out_partitions)]
    logs: dict[str, list] = {k: [] for k in keys + out_keys}  # entries [value or None (marker), state]
    open_at: dict[str, dict[int, int]] = {k: {} for k in logs}  # key -> {txn serial: first offset, while open}
    n_proc = producers + consumers + ctp
    kinds = ["producer"] * producers + ["consumer"] * consumers + ["ctp"] * ctp
    state: dict[int, dict] = {p: {"pending": None, "pos": {}, "committed_pos": {}} for p in range(n_proc)}
    counter = [0, 0]  # next value, next txn serial

    def lso(k: str) -> int:
        return min(open_at[k].values(), default=len(logs[k]))

    def read(pos: dict, ks: list[str], limit: int) -> list[dict]:
        recs: list[dict] = []
        for k in ks:
            at, end = pos.get(k, 0), lso(k)
            t, part = k.rsplit("/", 1)
            while at < end and len(recs) < limit:
                v, st = logs[k][at]
                if v is not None and st == "committed":
                    recs.append({"topic": t, "partition": int(part), "offset": at, "key": None, "value": v})
                at += 1
            pos[k] = at
        return recs

    def append(serial: int, sends: list[dict]) -> None:
        for m in sends:
            k = key_of(m["topic"], m["partition"])
            open_at[k].setdefault(serial, len(logs[k]))
            m["offset"] = len(logs[k])
            logs[k].append([m["value"], serial])

    def end(serial: int, sends: list[dict], commit: bool) -> None:
        for m in sends:
            logs[key_of(m["topic"], m["partition"])][m["offset"]][1] = "committed" if commit else "aborted"
        for k in sorted({key_of(m["topic"], m["partition"]) for m in sends}):
            logs[k].append([None, "marker"])
            open_at[k].pop(serial, None)

    def new_sends(ks: list[str], n: int) -> list[dict]:
        out = []
        for _ in range(n):
            t, part = rnd.choice(ks).rsplit("/", 1)
            out.append({"f": "send", "topic": t, "partition": int(part), "key": None, "value": counter[0]})
            counter[0] += 1
        return out

    def invoke(p: int) -> None:
        st = state[p]
        kind = kinds[p]
        if kind == "consumer":
            st["pending"] = ("poll", None)
            b.add(p, "invoke", "poll", {}, rnd.randint(1, 20_000))
            return
        serial = counter[1]
        counter[1] += 1
        if kind == "producer":
            sends = new_sends(keys, rnd.randint(1, 4))
            mops: list[dict] = [dict(m) for m in sends]
            reads: list[dict] = []
        else:  # consume-transform-produce: read t, write one output per input record (at least one)
            before = dict(st["pos"])
            reads = read(st["pos"], keys, max_poll)
            sends = new_sends(out_keys, max(1, len(reads)))
            mops = [{"f": "poll"}, *(dict(m) for m in sends)]
            st["rewind"] = before
        abort = rnd.random() < p_abort
        inv = {"txn_id": f"tp-{p}", "ops": [{k: v for k, v in m.items() if k != "offset"} for m in mops]}
        if abort:
            inv["abort"] = True
        b.add(p, "invoke", "txn", inv, rnd.randint(1, 20_000))
        append(serial, sends)
        st["pending"] = ("txn", (serial, sends, reads, inv, abort))

    def complete(p: int, final: bool = False) -> None:
        st = state[p]
        f, data = st["pending"]
        st["pending"] = None
        if f == "poll":
            recs = read(st["pos"], keys + out_keys, max_poll)
            b.add(p, "ok", "poll", {"records": recs}, rnd.randint(1, 50_000))
            return
        serial, sends, reads, inv, abort = data
        info = not final and rnd.random() < p_info
        commit = (not abort) and (not info or rnd.random() < 0.5)
        end(serial, sends, commit)
        if kinds[p] == "ctp" and not commit:
            st["pos"] = st.pop("rewind")
        value = {"txn_id": inv["txn_id"], "ops": []}
        if kinds[p] == "ctp":
            value["ops"].append({"f": "poll", "records": reads} if not info else {"f": "poll"})
        for m in sends:
            m2 = {k: v for k, v in m.items() if k != "offset"}
            if not info and (commit or rnd.random() < 0.5):  # an aborted txn's client may know its offsets
                m2["offset"] = m["offset"]
            value["ops"].append(m2)
        if kinds[p] == "ctp" and reads:
            nxt: dict[str, int] = {}
            for r in reads:
                nxt[key_of(r["topic"], r["partition"])] = r["offset"] + 1
            value["offsets"] = {"group": "ctp", "offsets": nxt}
        if abort:
            value["abort"] = True
        b.add(p, "info" if info else ("ok" if commit else "fail"), "txn", value, rnd.randint(1, 50_000))

    while len(h.ops) < n_ops:
        p = rnd.randrange(n_proc)
        if state[p]["pending"] is None:
            invoke(p)
        else:
            complete(p)
    last_open = None
    for p in range(n_proc):
        if state[p]["pending"] is None:
            continue
        if pending and last_open is None and state[p]["pending"][0] == "txn":
            last_open = p  # never completed: indeterminate; the log decides it (commit or abort) at random
            serial, sends, _reads, _inv, abort = state[p]["pending"][1]
            end(serial, sends, not abort and rnd.random() < 0.5)
            continue
        complete(p, final=True)
    fin = n_proc
    pos: dict[str, int] = {}
    b.add(fin, "invoke", "assign", {"partitions": keys + out_keys})
    b.add(fin, "ok", "assign", {"partitions": keys + out_keys})
    while True:
        b.add(fin, "invoke", "poll", {})
        recs = read(pos, keys + out_keys, 64)
        b.add(fin, "ok", "poll", {"records": recs})
        if all(pos.get(k, 0) >= len(logs[k]) for k in logs):
            break
    return h


TXN_SCENARIOS = ("G1a", "precommitted-read", "torn", "G1c", "G0")


def _txn_scenario(kind: str) -> list[tuple]:
    """Steps (process, type, f, value) on topic anomt, by processes of their own (200+); ``G0`` needs the run's
    settings to ask for ww edges (``ww_deps``)."""
    t = TXN_ANOMALY_TOPIC

    def snd(v: object, part: int, off: int | None = None) -> dict:
        m = {"f": "send", "topic": t, "partition": part, "key": None, "value": v}
        if off is not None:
            m["offset"] = off
        return m

    def rec(v: object, part: int, off: int) -> dict:
        return {"topic": t, "partition": part, "offset": off, "key": None, "value": v}

    def txn(p: int, typ: str, *mops: dict, abort: bool = False) -> tuple:
        v: dict = {"txn_id": f"anom-{p}", "ops": list(mops)}
        if abort:
            v["abort"] = True
        return (p, typ, "txn", v)

    def poll(p: int, *recs: dict) -> list[tuple]:
        return [(p, "invoke", "poll", {}), (p, "ok", "poll", {"records": list(recs)})]

    def reader_all(*recs: dict) -> list[tuple]:
        return poll(209, *recs)

    w, r, w2 = 200, 201, 202
    scenarios = {
        # an aborted txn's record (offset 0) returned to a read_committed poll
        "G1a": [txn(w, "invoke", snd("A1", 0), abort=True), txn(w, "fail", snd("A1", 0, 0), abort=True),
                *poll(r, rec("A1", 0, 0))],
        # a txn read its own write before it committed
        "precommitted-read": [txn(w, "invoke", snd("P1", 0), {"f": "poll"}),
                              txn(w, "ok", snd("P1", 0, 0), {"f": "poll", "records": [rec("P1", 0, 0)]}),
                              *reader_all(rec("P1", 0, 0))],
        # T wrote T1@0 and T2@1; a reader got T1 and the later U@3 (offset 2: T's marker) but not T2
        "torn": [txn(w, "invoke", snd("T1", 0), snd("T2", 0)), txn(w, "ok", snd("T1", 0, 0), snd("T2", 0, 1)),
                 (w2, "invoke", "send", {"topic": t, "partition": 0, "key": None, "value": "U"}),
                 (w2, "ok", "send", {"topic": t, "partition": 0, "key": None, "value": "U", "offset": 3}),
                 *poll(r, rec("T1", 0, 0), rec("U", 0, 3)),
                 *reader_all(rec("T1", 0, 0), rec("T2", 0, 1), rec("U", 0, 3))],
        # two committed txns each read the other's write: circular information flow
        "G1c": [txn(w, "invoke", snd("C1", 0), {"f": "poll"}), txn(w2, "invoke", snd("C2", 1), {"f": "poll"}),
                txn(w, "ok", snd("C1", 0, 0), {"f": "poll", "records": [rec("C2", 1, 0)]}),
                txn(w2, "ok", snd("C2", 1, 0), {"f": "poll", "records": [rec("C1", 0, 0)]}),
                *reader_all(rec("C1", 0, 0), rec("C2", 1, 0))],
        # two committed txns wrote partitions 0 and 1 in opposite orders (Jepsen's g0-test)
        "G0": [txn(w, "invoke", snd("G1", 0), snd("G2", 1)), txn(w2, "invoke", snd("H1", 0), snd("H2", 1)),
               txn(w, "ok", snd("G1", 0, 0), snd("G2", 1, 1)), txn(w2, "ok", snd("H1", 0, 1), snd("H2", 1, 0)),
               *reader_all(rec("G1", 0, 0), rec("H1", 0, 1), rec("H2", 1, 0), rec("G2", 1, 1))],
    }
    return scenarios[kind]


def with_txn_anomaly(h: History, kind: str) -> History:
    """A copy of ``h`` with one transactional scenario appended on topic anomt by processes of its own (200+);
    for ``G0`` the settings ask for ww edges (Jepsen's ``:ww-deps``)."""
    settings = dict(h.settings)
    if kind == "G0":
        settings["ww_deps"] = True
    out = History(h.run_id, [dict(op) for op in h.ops], h.target, h.nemesis, settings)
    b = _Builder(out, out.ops[-1]["time_ns"] if out.ops else 0)
    for p, typ, f, v in _txn_scenario(kind):
        b.add(p, typ, f, v)
    return out
