"""Linearizability models for Kafka histories, and the extraction of their operations from our contract.

``PARTITION_LOG``: each topic-partition is a log. ``append(value) -> offset`` is legal iff the offset is past every
offset already in the log (offsets strictly increase; holes are allowed, as transactions leave them), encoded as
"the n-th append has the n-th smallest offset" so that a wrong order fails at once; a poll is a
read of ``(offset, value)`` pairs, legal iff each pair is in the log. Failed sends are dropped; info sends are
kept (with the offset a poll saw them at) only if some poll read them, since an unread info send may or may not
have happened and an append nobody read is indistinguishable from a hole.

``COMMITTED_OFFSETS``: each (group, topic-partition) is a register; ``commit`` writes, ``fetch_offsets`` reads;
unknown before the first commit reads as ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from history.schema import key_of

from .linearizability import INF, Model, Operation

# ---------------------------------------------------------------- partition log

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


PARTITION_LOG = Model(
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


COMMITTED_OFFSETS = Model(
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


MODELS = {"partition-log": (PARTITION_LOG, log_operations), "committed-offsets": (COMMITTED_OFFSETS, offset_operations)}
