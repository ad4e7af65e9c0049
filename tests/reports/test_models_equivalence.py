"""The fast linearizability extraction and search give exactly the results of the simple ones they replaced.

The reference below is reports/linearizability.py and reports/models.py as of fc54f7a, before the speed-ups,
verbatim but for names (``Model`` is ``RefModel``; ``check_operations`` keeps only its serial path). It is the
specification by example: do not speed it up or "fix" it here. The tests compare operations (equal and with
equal reprs), verdicts, parts and counterexample windows on generated runs with info and failed operations and
every one-anomaly scenario, on their Spark-style parts, on hand-made odd histories, and on random small
histories that need backtracking and are often not linearizable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from history.schema import key_of
from reports.linearizability import ILLEGAL, INF, OK, UNKNOWN, LinResult, Operation, PartResult


@dataclass(frozen=True)
class RefModel:
    name: str
    init: Callable[[], Any]
    step: Callable[[Any, Any, Any], tuple[bool, Any]]
    partition: Callable
    is_read: Callable[[Any], bool]
    prepare: Callable = lambda ops: ops
    describe_operation: Callable[[Any, Any], str] = lambda i, o: f"{i!r} -> {o!r}"
    describe_state: Callable[[Any], str] = repr


def _search(model: RefModel, ops: Sequence[Operation], deadline: float) -> str:
    """Wing-Gong-Lowe over one part. Returns OK, ILLEGAL or UNKNOWN (deadline passed)."""
    n = len(ops)
    if n == 0:
        return OK
    # Entries 1..2n; 0 is the head sentinel. Calls before returns at equal times (treated as concurrent).
    events = []
    for i, op in enumerate(ops):
        events.append((op.call, 0, i))
        events.append((op.ret, 1, i))
    events.sort()
    size = 2 * n + 1
    nxt = [0] * (size + 1)
    prv = [0] * (size + 1)
    op_of = [0] * size
    is_call = [False] * size
    match = [0] * size
    call_node = [0] * n
    ret_node = [0] * n
    for node, (_t, kind, i) in enumerate(events, 1):
        op_of[node] = i
        if kind == 0:
            is_call[node] = True
            call_node[i] = node
        else:
            ret_node[i] = node
    for i in range(n):
        match[call_node[i]] = ret_node[i]
    END = size  # noqa: N806 - sentinel index
    for node in range(size):
        nxt[node] = node + 1 if node + 1 < size else END
    for node in range(1, size):
        prv[node] = node - 1
    prv[END] = size - 1
    step = model.step
    inputs = [op.input for op in ops]
    outputs = [op.output for op in ops]
    state = model.init()
    linearized = 0
    cache: set = set()
    calls: list[tuple[int, Any]] = []
    entry = nxt[0]
    iters = 0
    while nxt[0] != END:
        iters += 1
        if iters & 1023 == 0 and time.monotonic() > deadline:
            return UNKNOWN
        if is_call[entry]:
            i = op_of[entry]
            legal, new_state = step(state, inputs[i], outputs[i])
            if legal:
                new_lin = linearized | (1 << i)
                ck = (new_lin, new_state)
                if ck not in cache:
                    cache.add(ck)
                    calls.append((entry, state))
                    state, linearized = new_state, new_lin
                    # lift the call and its return out of the list
                    m = match[entry]
                    nxt[prv[entry]] = nxt[entry]
                    prv[nxt[entry]] = prv[entry]
                    nxt[prv[m]] = nxt[m]
                    prv[nxt[m]] = prv[m]
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:
            if not calls:
                return ILLEGAL
            entry, state = calls.pop()
            linearized &= ~(1 << op_of[entry])
            # unlift: return first, then call
            m = match[entry]
            nxt[prv[m]] = m
            prv[nxt[m]] = m
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            entry = nxt[entry]
    return OK


def _prefix(model: RefModel, ops: Sequence[Operation], k: int, by_ret: list[int]) -> tuple[list[Operation], float]:
    """Operations completed by the k-th completion, plus those pending then (reads dropped, writes left open)."""
    cut = ops[by_ret[k - 1]].ret
    out = []
    for op in ops:
        if op.ret <= cut:
            out.append(op)
        elif op.call <= cut and not model.is_read(op.input):
            out.append(Operation(op.client, op.input, op.output, op.call, INF, op.ref))
    return out, cut


def _counterexample(model: RefModel, ops: Sequence[Operation], deadline: float) -> dict:
    """Binary search for the smallest illegal prefix (monotone: an illegal prefix makes the whole illegal)."""
    by_ret = sorted((i for i, op in enumerate(ops) if op.ret != INF), key=lambda i: ops[i].ret)
    lo, hi = 1, len(by_ret)  # hi: known (or assumed) illegal
    exact = True
    while lo < hi:
        mid = (lo + hi) // 2
        sub, _ = _prefix(model, ops, mid, by_ret)
        v = _search(model, model.prepare(sub), deadline)
        if v == ILLEGAL:
            hi = mid
        else:
            if v == UNKNOWN:
                exact = False
            lo = mid + 1
    failing = ops[by_ret[hi - 1]]
    window = [op for op in ops if op.call <= failing.ret and op.ret >= failing.call]
    # plus the few operations that completed just before it began: the realtime order it contradicts
    before = sorted((op for op in ops if op.ret < failing.call), key=lambda o: o.ret)[-3:]
    window = sorted(set(window) | set(before), key=lambda o: (o.call, o.ret))
    return {
        "prefix_completions": hi,
        "minimal": exact,
        "failing": {"ref": failing.ref, "client": failing.client,
                    "op": model.describe_operation(failing.input, failing.output)},
        "window": [
            {"ref": o.ref, "client": o.client, "call": o.call, "ret": None if o.ret == INF else o.ret,
             "op": model.describe_operation(o.input, o.output)}
            for o in window
        ],
    }


def check_part(model: RefModel, key: Any, ops: Sequence[Operation], budget_s: float) -> PartResult:
    """Check one part within ``budget_s`` seconds; illegal parts get a counterexample window."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    verdict = _search(model, model.prepare(list(ops)), deadline)
    cex = None
    if verdict == ILLEGAL:
        cex = _counterexample(model, ops, t0 + 2 * budget_s)
    return PartResult(key, verdict, len(ops), time.monotonic() - t0, cex)


def _combine(results: list[PartResult]) -> str:
    if any(r.verdict == ILLEGAL for r in results):
        return ILLEGAL
    if any(r.verdict == UNKNOWN for r in results):
        return UNKNOWN
    return OK


def check_operations(
    model: RefModel, ops: list[Operation], *, budget_s: float = 10.0, stop_on_illegal: bool = False
) -> LinResult:
    """Partition with the model, check each part, combine verdicts (serially)."""
    parts = model.partition(ops)
    results: list[PartResult] = []
    for key, part in parts:
        r = check_part(model, key, part, budget_s)
        results.append(r)
        if stop_on_illegal and r.verdict == ILLEGAL:
            break
    results.sort(key=lambda r: str(r.key))
    return LinResult(model.name, _combine(results), results)


def _log_init() -> tuple[int, int]:
    return (0, 0)  # (appends so far, bitmask of the (offset, value) pair ids in the log)


def _log_step(state: tuple[int, int], inp: tuple, out: Any) -> tuple[bool, Any]:
    count, mask = state
    if inp[0] == "append":
        # inp[4] is the append's rank among the part's append offsets (see log_operations): appends must land
        # in offset order, so the n-th append linearized must be the one with the n-th smallest offset.
        if inp[4] == count:
            return True, (count + 1, mask | (1 << inp[3]))
        return False, state
    for _off, _v, pid in out:
        if not (mask >> pid) & 1:
            return False, state
    return True, state


def _by_key(ops: list[Operation]) -> list[tuple[Any, list[Operation]]]:
    parts: dict[Any, list[Operation]] = {}
    for op in ops:
        parts.setdefault(op.input[1], []).append(op)
    return sorted(parts.items(), key=lambda kv: str(kv[0]))


def _log_is_read(inp: tuple) -> bool:
    return inp[0] == "read"


def _log_describe(inp: tuple, out: Any) -> str:
    if inp[0] == "append":
        return f"append {inp[1]} {inp[2]!r} -> offset {out}"
    return f"read {inp[1]} " + " ".join(f"{o}:{v!r}" for o, v, _ in out)


def _log_state(state: tuple[int, int]) -> str:
    return f"{state[0]} appends, {bin(state[1]).count('1')} records"


def rank_appends(ops: list[Operation]) -> list[Operation]:
    """Give each append its rank among its partition's append offsets (equal offsets share a rank, so only one
    of them can ever be linearized). Equivalent to "offset above every offset in the log" with holes allowed,
    since every append in the part happened; but a wrong order now fails at once instead of deep in the search."""
    offsets: dict[str, list[int]] = {}
    for op in ops:
        if op.input[0] == "append":
            offsets.setdefault(op.input[1], []).append(op.output)
    rank: dict[str, dict[int, int]] = {}
    for k, offs in offsets.items():
        r: dict[int, int] = {}
        for i, o in enumerate(sorted(offs)):
            r.setdefault(o, i)
        rank[k] = r
    return [Operation(op.client, (*op.input[:4], rank[op.input[1]][op.output]), op.output, op.call, op.ret, op.ref)
            if op.input[0] == "append" else op for op in ops]


PARTITION_LOG = RefModel(
    name="partition-log",
    init=_log_init,
    step=_log_step,
    partition=_by_key,
    is_read=_log_is_read,
    prepare=rank_appends,
    describe_operation=_log_describe,
    describe_state=_log_state,
)


# ---------------------------------------------------------------- committed offsets

def _reg_init() -> None:
    return None


def _reg_step(state: Any, inp: tuple, out: Any) -> tuple[bool, Any]:
    if inp[0] == "commit":
        return True, inp[2]
    return out == state, state


def _reg_is_read(inp: tuple) -> bool:
    return inp[0] == "fetch"


def _reg_describe(inp: tuple, out: Any) -> str:
    g, k = inp[1]
    if inp[0] == "commit":
        return f"commit {g} {k} {inp[2]}"
    return f"fetch {g} {k} -> {out}"


COMMITTED_OFFSETS = RefModel(
    name="committed-offsets",
    init=_reg_init,
    step=_reg_step,
    partition=_by_key,
    is_read=_reg_is_read,
    describe_operation=_reg_describe,
)


def offset_operations(ops: Sequence[dict]) -> list[Operation]:
    """Commits (writes) and offset fetches (reads) per (group, topic-partition).

    An info commit whose offset no fetch ever returned is dropped: no read depends on it, so the history is
    linearizable with it (placed last) iff it is without it; keeping it would make the search try it everywhere.
    """
    fetched: set[tuple[str, str, Any]] = set()
    for op in ops:
        if op["f"] == "fetch_offsets" and op["type"] == "ok":
            g = op["value"]["group"]
            fetched.update((g, k, o) for k, o in op["value"]["offsets"].items())
    calls: dict[int, int] = {}
    out: list[Operation] = []
    for op in ops:
        p, typ, f = op["process"], op["type"], op["f"]
        if typ == "invoke":
            calls[p] = op["time_ns"]
            continue
        call = calls.pop(p, op["time_ns"])
        if typ == "fail":
            continue
        if f == "commit":
            v = op["value"]
            ret = op["time_ns"] if typ == "ok" else INF
            for k, o in v["offsets"].items():
                if ret == INF and (v["group"], k, o) not in fetched:
                    continue
                out.append(Operation(p, ("commit", (v["group"], k), o), None, call, ret, op["index"]))
        elif f == "fetch_offsets" and typ == "ok":
            v = op["value"]
            for k, o in v["offsets"].items():
                out.append(Operation(p, ("fetch", (v["group"], k)), o, call, op["time_ns"], op["index"]))
    return out


def _send_records(value: dict) -> list[dict]:
    return value["records"] if "records" in value else [value]


def log_operations(ops: Sequence[dict]) -> list[Operation]:
    """Appends and reads of every partition, paired invoke -> completion."""
    names: dict[tuple, str] = {}  # (topic, partition) -> "topic/partition", built once per partition

    def name(t: str, pn: int) -> str:
        n = names.get((t, pn))
        if n is None:
            n = names[(t, pn)] = key_of(t, pn)
        return n

    pids: dict[str, dict[tuple, int]] = {}

    def pid(key: str, off: int, v: Any) -> int:
        table = pids.get(key)
        if table is None:
            table = pids[key] = {}
        i = table.get((off, v))
        if i is None:
            i = table[(off, v)] = len(table)
        return i

    calls: dict[int, int] = {}
    out: list[Operation] = []
    info_sends: list[tuple] = []  # resolved after the pass, against what the polls saw
    for op in ops:
        typ = op["type"]
        p = op["process"]
        if typ == "invoke":
            calls[p] = op["time_ns"]
            continue
        f = op["f"]
        call = calls.pop(p, op["time_ns"])
        if f == "send":
            if typ == "fail":
                continue
            for r in _send_records(op["value"]):
                k = name(r["topic"], r["partition"])
                v = r["value"]
                off = r.get("offset")
                if typ == "ok" and off is not None:
                    out.append(Operation(p, ("append", k, v, pid(k, off, v)), off, call, op["time_ns"], op["index"]))
                else:
                    info_sends.append((p, k, v, off, call, op["index"]))
        elif f == "poll" and typ == "ok":
            recs = op["value"]["records"]
            if not recs:
                continue
            per_key: dict[str, list] = {}
            cur = None
            pairs: list = []
            for r in recs:
                tp = (r["topic"], r["partition"])
                if tp != cur:
                    cur = tp
                    k = name(*tp)
                    pairs = per_key.get(k)
                    if pairs is None:
                        pairs = per_key[k] = []
                off, v = r["offset"], r["value"]
                pairs.append((off, v, pid(k, off, v)))
            t = op["time_ns"]
            for k, prs in per_key.items():
                out.append(Operation(p, ("read", k), tuple(prs), call, t, op["index"]))
    if info_sends:
        # An info send somebody read happened, at the offset the poll saw it, and before that poll returned.
        # Bounding its return there is sound (a later linearization point would make the read illegal) and keeps
        # the search from trying it at every step until the end of the history. Unread info sends are dropped.
        seen: dict[tuple, tuple[int, float]] = {}
        for o in out:
            if o.input[0] == "read":
                for off, v, _ in o.output:
                    kv = (o.input[1], v)
                    prev = seen.get(kv)
                    if prev is None or o.ret < prev[1]:
                        seen[kv] = (off if prev is None else prev[0], o.ret)
        for p, k, v, off, call, ref in info_sends:
            hit = seen.get((k, v))
            if hit is not None:
                off = hit[0]
                out.append(Operation(p, ("append", k, v, pid(k, off, v)), off, call, hit[1], ref))
    return out


# ---------------------------------------------------------------- the tests

import dataclasses  # noqa: E402
import random  # noqa: E402

import pytest  # noqa: E402

from reports import linearizability as new_lin  # noqa: E402
from reports import models as new_models  # noqa: E402
from reports import synth  # noqa: E402
from reports.analysis import split_parts  # noqa: E402

REF_MODELS = {"partition-log": PARTITION_LOG, "committed-offsets": COMMITTED_OFFSETS}
NEW_MODELS = {"partition-log": new_models.PARTITION_LOG, "committed-offsets": new_models.COMMITTED_OFFSETS}
EXTRACT = {"partition-log": (log_operations, new_models.log_operations),
           "committed-offsets": (offset_operations, new_models.offset_operations)}


def _summary(r: LinResult) -> tuple:
    return (r.model, r.verdict, [(p.key, p.verdict, p.ops, p.counterexample) for p in r.parts])


def _outcome(check, model, ops) -> tuple:
    """The summary, or the exception (an illegal part with no completed operation has no window: IndexError)."""
    try:
        return _summary(check(model, ops, budget_s=60))
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return ("raises", type(e).__name__)


def _same_ops(got: list, want: list) -> None:
    assert got == want
    assert repr(got) == repr(want)  # same types too (1 is 1.0 to ==, not to repr)
    assert all(type(o) is Operation for o in got)


def _generated() -> list[tuple[str, list[dict]]]:
    """Runs with info and failed sends and commits, crashes, batches of polls, and every anomaly scenario."""
    out = []
    configs = [dict(processes=3, partitions=1, p_info=0.2, p_fail=0.1),
               dict(processes=6, partitions=4, p_info=0.1, p_fail=0.05, max_poll=3),
               dict(processes=10, partitions=10, p_info=0.05, p_fail=0.03),
               dict(processes=8, partitions=3, p_info=0.3, p_fail=0.2, max_poll=12)]
    for seed in range(6):
        cfg = configs[seed % len(configs)]
        h = synth.generate(f"g{seed}", seed=seed, n_ops=1500, nemesis="kill", **cfg)
        out.append((f"clean-{seed}", h.ops))
    for i, kind in enumerate(synth.SCENARIOS):
        base = synth.generate(f"a{i}", seed=100 + i, n_ops=600, **configs[i % len(configs)])
        out.append((kind, synth.with_anomaly(base, kind).ops))
        out.append((f"{kind}-alone", synth.scenario_history(kind).ops))
    return out


GENERATED = _generated()


def _odd() -> list[tuple[str, list[dict]]]:
    """Hand-made histories off the beaten path of the generator."""

    def o(i, p, typ, f, value, t=None):
        return {"run_id": "x", "index": i, "time_ns": 10 * i if t is None else t, "process": p, "type": typ, "f": f,
                "value": value}

    def rec(t, pn, v, off=None):
        r = {"topic": t, "partition": pn, "key": None, "value": v}
        if off is not None:
            r["offset"] = off
        return r

    hs = {}
    # A poll whose records go back and forth between partitions; batch sends over two partitions; an ok send
    # without an offset (kept as an info send); a completion without an invoke; an info send read at two
    # offsets and by two polls; an unread info send; inconsistent offsets; a value seen as 1 and as 1.0.
    hs["interleaved"] = [
        o(0, 1, "invoke", "send", {"records": [rec("t", 0, "a"), rec("u", 1, "b")]}),
        o(1, 1, "ok", "send", {"records": [rec("t", 0, "a", 0), rec("u", 1, "b", 0)]}),
        o(2, 2, "invoke", "send", rec("t", 0, "c")),
        o(3, 3, "invoke", "send", rec("t", 0, "d")),
        o(4, 2, "info", "send", rec("t", 0, "c")),
        o(5, 4, "invoke", "poll", {}),
        o(6, 4, "ok", "poll", {"records": [rec("t", 0, "a", 0), rec("u", 1, "b", 0), rec("t", 0, "c", 1),
                                           rec("u", 1, "b", 0), rec("t", 0, "c", 1)]}),
        o(7, 3, "ok", "send", rec("t", 0, "d")),  # ok without an offset
        o(8, 5, "ok", "send", rec("t", 0, "e", 3)),  # no invoke
        o(9, 6, "invoke", "poll", {}),
        o(10, 6, "ok", "poll", {"records": [rec("t", 0, "c", 2), rec("t", 0, "e", 3), rec("t", 0, "x", 3)]}),
        o(11, 7, "invoke", "send", rec("t", 0, "never")),
        o(12, 7, "info", "send", rec("t", 0, "never")),
        o(13, 8, "invoke", "send", rec("v", 0, 1)),
        o(14, 8, "ok", "send", rec("v", 0, 1, 0)),
        o(15, 9, "invoke", "poll", {}),
        o(16, 9, "ok", "poll", {"records": [rec("v", 0, 1.0, 0), rec("v", 0, 1, 0), rec("v", 0, True, 0)]}),
        o(17, 9, "invoke", "poll", {}),
        o(18, 9, "ok", "poll", {"records": []}),
        o(19, 9, "invoke", "poll", {}),
        o(20, 9, "fail", "poll", {}),
    ]
    # Commits ok, info (fetched or not, with None offsets), failed; fetches of several groups; a fetch without
    # an invoke; a process that invokes twice.
    hs["offsets"] = [
        o(0, 1, "invoke", "commit", {"group": "g", "offsets": {"t/0": 3, "t/1": 4}}),
        o(1, 2, "invoke", "commit", {"group": "g", "offsets": {"t/0": 5}}),
        o(2, 1, "ok", "commit", {"group": "g", "offsets": {"t/0": 3, "t/1": 4}}),
        o(3, 2, "info", "commit", {"group": "g", "offsets": {"t/0": 5}}),
        o(4, 3, "invoke", "commit", {"group": "h", "offsets": {"t/0": 7, "t/1": 8}}),
        o(5, 3, "info", "commit", {"group": "h", "offsets": {"t/0": 7, "t/1": 8}}),
        o(6, 4, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0", "t/1"]}),
        o(7, 4, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": 5, "t/1": None}}),
        o(8, 5, "ok", "fetch_offsets", {"group": "h", "offsets": {"t/1": 8}}),
        o(9, 6, "invoke", "commit", {"group": "g", "offsets": {"t/1": 9}}),
        o(10, 6, "fail", "commit", {"group": "g", "offsets": {"t/1": 9}}),
        o(11, 7, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]}),
        o(12, 7, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]}),
        o(13, 7, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": 3}}),
        o(14, 8, "invoke", "commit", {"group": "g", "offsets": {"t/0": None}}),
        o(15, 8, "info", "commit", {"group": "g", "offsets": {"t/0": None}}),
    ]
    # Two topics with the same partition number in one poll; an info send first read by a later poll that
    # returned earlier (times going backwards), at another offset.
    hs["topics"] = [
        o(0, 1, "invoke", "send", rec("t", 0, "a")),
        o(1, 1, "ok", "send", rec("t", 0, "a", 0)),
        o(2, 2, "invoke", "send", rec("u", 0, "b")),
        o(3, 2, "ok", "send", rec("u", 0, "b", 0)),
        o(4, 3, "invoke", "send", rec("t", 0, "i")),
        o(5, 3, "info", "send", rec("t", 0, "i")),
        o(6, 4, "invoke", "poll", {}),
        o(7, 4, "ok", "poll", {"records": [rec("t", 0, "a", 0), rec("u", 0, "b", 0), rec("t", 0, "i", 1)]}),
        o(8, 5, "invoke", "poll", {}, t=1),
        o(9, 5, "ok", "poll", {"records": [rec("t", 0, "i", 2), rec("u", 0, "b", 0)]}, t=2),
    ]
    # The same value sent twice, once ok and once info (read at another offset first, then at the ok one).
    hs["dup-values"] = [
        o(0, 1, "invoke", "send", rec("t", 0, "a")),
        o(1, 2, "invoke", "send", rec("t", 0, "a")),
        o(2, 2, "info", "send", rec("t", 0, "a")),
        o(3, 3, "invoke", "poll", {}),
        o(4, 3, "ok", "poll", {"records": [rec("t", 0, "a", 1)]}),
        o(5, 1, "ok", "send", rec("t", 0, "a", 0)),
        o(6, 4, "invoke", "poll", {}),
        o(7, 4, "ok", "poll", {"records": [rec("t", 0, "a", 0), rec("t", 0, "a", 1)]}),
        o(8, 5, "invoke", "send", rec("t", 0, "b")),
        o(9, 5, "ok", "send", rec("t", 0, "b", 2)),
        o(10, 6, "invoke", "send", rec("t", 0, "b")),
        o(11, 6, "info", "send", rec("t", 0, "b")),
        o(12, 4, "invoke", "poll", {}),
        o(13, 4, "ok", "poll", {"records": [rec("t", 0, "b", 2)]}),
    ]
    # Offsets too big to be shared int objects: equal, not identical.
    big = [int(str(10**6 + i)) for i in range(3)] + [int(str(10**6 + i)) for i in range(3)]
    hs["big-offsets"] = [
        o(0, 1, "invoke", "commit", {"group": "g", "offsets": {"t/0": big[0]}}),
        o(1, 1, "ok", "commit", {"group": "g", "offsets": {"t/0": big[0]}}),
        o(2, 2, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]}),
        o(3, 2, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": big[3]}}),
        o(4, 1, "invoke", "commit", {"group": "g", "offsets": {"t/0": big[1]}}),
        o(5, 1, "info", "commit", {"group": "g", "offsets": {"t/0": big[1]}}),
        o(6, 2, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]}),
        o(7, 2, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": big[4]}}),
        o(8, 3, "invoke", "send", rec("t", 0, big[2])),
        o(9, 3, "ok", "send", rec("t", 0, big[2], big[0])),
        o(10, 4, "invoke", "poll", {}),
        o(11, 4, "ok", "poll", {"records": [rec("t", 0, big[5], big[3])]}),
    ]
    # Equal times everywhere: ties between calls and returns.
    hs["ties"] = [dict(op, time_ns=5) for op in hs["interleaved"]] + [dict(op, time_ns=5) for op in hs["offsets"]]
    return list(hs.items())


ODD = _odd()


def _histories() -> list[tuple[str, list[dict]]]:
    return GENERATED + ODD


@pytest.mark.parametrize("name,ops", _histories(), ids=[n for n, _ in _histories()])
def test_extraction_is_the_reference_extraction(name, ops):
    for ref_extract, new_extract in EXTRACT.values():
        _same_ops(new_extract(ops), ref_extract(ops))
        for _kind, _key, part in split_parts(ops):  # the Spark job extracts from each part alone
            _same_ops(new_extract(part), ref_extract(part))


@pytest.mark.parametrize("name,ops", _histories(), ids=[n for n, _ in _histories()])
def test_checks_give_the_reference_verdicts_and_counterexamples(name, ops):
    for m, (ref_extract, _new_extract) in EXTRACT.items():
        ref_ops = ref_extract(ops)
        want = _summary(check_operations(REF_MODELS[m], ref_ops, budget_s=60))
        assert want[1] != UNKNOWN
        got = _summary(new_lin.check_operations(NEW_MODELS[m], ref_ops, budget_s=60))
        assert got == want
        # the models' plain steps (no compiled kernel) give the same as well
        plain = dataclasses.replace(NEW_MODELS[m], compile=None)
        assert _summary(new_lin.check_operations(plain, ref_ops, budget_s=60)) == want


def test_the_scenarios_are_not_all_linearizable():
    # the comparison above covers illegal parts with counterexamples, not only ok ones
    verdicts = {new_lin.check_operations(new_models.PARTITION_LOG, new_models.log_operations(ops)).verdict
                for name, ops in GENERATED if name in synth.SCENARIOS}
    assert verdicts == {OK, ILLEGAL}


# Random small parts built directly as operations: overlapping intervals, ties, info (INF) operations, reads
# of values that may not be there. Most need backtracking and many are not linearizable.

def _random_register(rnd: random.Random, n: int) -> list[Operation]:
    keys = [("g", "t/0"), ("g", "t/1")]
    ops = []
    for _ in range(n):
        call = rnd.randint(0, 40)
        ret = INF if rnd.random() < 0.1 else call + rnd.randint(0, 15)
        k = rnd.choice(keys)
        if rnd.random() < 0.5:
            ops.append(Operation(rnd.randrange(6), ("commit", k, rnd.randint(0, 3)), None, call, ret, len(ops)))
        else:
            ops.append(Operation(rnd.randrange(6), ("fetch", k), rnd.choice([None, 0, 1, 2, 3]), call, ret, len(ops)))
    return ops


def _random_log(rnd: random.Random, n: int) -> list[Operation]:
    ops = []
    pids: dict[tuple, int] = {}
    appended = []
    for v in range(n):
        call = rnd.randint(0, 40)
        ret = INF if rnd.random() < 0.1 else call + rnd.randint(0, 15)
        if appended and rnd.random() < 0.45:
            pairs = rnd.sample(appended, rnd.randint(1, min(3, len(appended))))
            if rnd.random() < 0.2:
                pairs.append((rnd.randint(0, n), -1))  # never appended
            out = tuple((o, val, pids.setdefault((o, val), len(pids))) for o, val in sorted(pairs, key=lambda pr: pr[0]))
            ops.append(Operation(rnd.randrange(6), ("read", "t/0"), out, call, ret, len(ops)))
        else:
            off = rnd.randint(0, n)  # duplicates and holes
            pid = pids.setdefault((off, v), len(pids))
            appended.append((off, v))
            ops.append(Operation(rnd.randrange(6), ("append", "t/0", v, pid), off, call, ret, len(ops)))
    return ops


@pytest.mark.parametrize("m", ["partition-log", "committed-offsets"])
def test_random_small_parts_give_the_reference_results(m):
    rnd = random.Random(7)
    make = _random_log if m == "partition-log" else _random_register
    seen = set()
    for _ in range(400):
        ops = make(rnd, rnd.randint(1, 12))
        want = _outcome(check_operations, REF_MODELS[m], ops)
        seen.add(want[1])
        assert _outcome(new_lin.check_operations, NEW_MODELS[m], ops) == want, ops
        plain = dataclasses.replace(NEW_MODELS[m], compile=None)
        assert _outcome(new_lin.check_operations, plain, ops) == want, ops
    assert {OK, ILLEGAL} <= seen


def _recording(model, log: list):
    """The model with its step (or compiled kernel's step) recording (input[:4], output, legal) per call.
    (Not the states: a kernel may encode them its own way.)"""
    if model.compile is None:
        step = model.step

        def rec_step(state, inp, out):
            legal, new = step(state, inp, out)
            log.append((inp[:4], out, bool(legal)))
            return legal, new

        return dataclasses.replace(model, step=rec_step)
    compile_ = model.compile

    def rec_compile(ops):
        k = compile_(ops)

        def rec_step(state, i):
            new = k.step(state, i)
            log.append((ops[i].input[:4], ops[i].output, new is not new_lin.NOT_LEGAL))
            return new

        return k._replace(step=rec_step)

    return dataclasses.replace(model, compile=rec_compile)


@pytest.mark.parametrize("m", ["partition-log", "committed-offsets"])
def test_the_search_takes_the_reference_path_step_by_step(m):
    """Same steps in the same order (so the same iterations, hence the same time-budget checks). For an illegal
    part only the search itself: the counterexample now probes prefixes in another order (galloping from the
    search's frontier instead of halving), by design; its answer is still the reference's."""
    rnd = random.Random(11)
    make = _random_log if m == "partition-log" else _random_register
    parts = [make(rnd, rnd.randint(1, 12)) for _ in range(150)]
    parts += [p for name, ops in GENERATED[:4] for _k, p in REF_MODELS[m].partition(EXTRACT[m][0](ops))]
    for ops in parts:
        want: list = []
        ref_model = dataclasses.replace(REF_MODELS[m], step=_recording_ref(REF_MODELS[m].step, want))
        ref_outcome = _outcome(check_operations, ref_model, ops)
        for model in (NEW_MODELS[m], dataclasses.replace(NEW_MODELS[m], compile=None)):
            got: list = []
            assert _outcome(new_lin.check_operations, _recording(model, got), ops) == ref_outcome
            if ref_outcome[1] == ILLEGAL:
                main: list = []  # the first part's search (check_operations checks the parts in this order)
                first = model.partition(list(ops))[0][1]
                new_lin._search(_recording(model, main), first, time.monotonic() + 60)
                got, want_main = got[:len(main)], want[:len(main)]
                assert got == want_main
            else:
                assert got == want


def _recording_ref(step, log: list):
    def rec_step(state, inp, out):
        legal, new = step(state, inp, out)
        log.append((inp[:4], out, bool(legal)))
        return legal, new

    return rec_step


def test_an_exhausted_budget_is_reached_at_the_same_point():
    # With the deadline already past, a search is unknown iff it needs 1024 iterations or more (the first time
    # check): the same parts must be decided as before, and the others unknown.
    h = synth.generate("b", seed=4, n_ops=8000, processes=10, partitions=2, p_info=0.2)
    seen = set()
    for m, (ref_extract, _) in EXTRACT.items():
        ops = ref_extract(h.ops)
        want = [(p.key, p.verdict) for p in check_operations(REF_MODELS[m], ops, budget_s=0).parts]
        got = [(p.key, p.verdict) for p in new_lin.check_operations(NEW_MODELS[m], ops, budget_s=0).parts]
        assert got == want
        seen |= {v for _, v in want}
    assert seen == {OK, UNKNOWN}
