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

from .linearizability import INF, NOT_LEGAL, Kernel, Model, Operation

_new = tuple.__new__  # Operation(...) without the Python-level NamedTuple __new__: _new(Operation, (fields))

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
        k = op.input[1]
        try:
            parts[k].append(op)
        except KeyError:
            parts[k] = [op]
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


def _log_compile(ops: Sequence[Operation]) -> Kernel:
    """``rank_appends`` + ``_log_step`` by index. Linearized appends are one per rank 0, 1, ..., count - 1 (the step
    demands rank == count), so the state is a function of the linearized set. When each append of a one-key part
    has a rank of its own they are exactly the appends ranked below the count: the state is just the count, and
    a read is legal once the count is past the rank of the first-ranked append of each pair it read."""
    n = len(ops)
    appends: list[tuple] = []  # (offset, position, pair id)
    reads: list[tuple] = []  # (position, pairs)
    key = keys = None
    for i, op in enumerate(ops):
        inp = op.input
        if inp[0] == "append":
            appends.append((op.output, i, inp[3]))
            if inp[1] != key:
                if keys is None:
                    key, keys = inp[1], 1
                else:
                    keys = 2  # (several keys: ranks per key, the bits kernel)
                    key = inp[1]
        else:
            reads.append((i, op.output))
    if keys == 2 or len({a[0] for a in appends}) != len(appends):
        return _log_bits_kernel(ops)
    appends.sort()  # by offset (all distinct): by rank
    ranks = [-1] * n  # -1: a read
    first: dict[Any, int] = {}  # pair id -> lowest rank of an append of it
    for r, (_off, i, pid) in enumerate(appends):
        ranks[i] = r
        if pid not in first:
            first[pid] = r
    past = [0] * n  # a read's rank to be past; n: a pair nobody appended, never legal
    for i, pairs in reads:
        t = -1
        try:
            for _off, _v, pid in pairs:
                r = first[pid]
                if r > t:
                    t = r
        except KeyError:
            t = n
        past[i] = t

    def step(count: int, i: int) -> Any:
        r = ranks[i]
        if r < 0:
            return count if count > past[i] else NOT_LEGAL
        return count + 1 if r == count else NOT_LEGAL

    return Kernel(0, step, state_of_set=True)


def _log_bits_kernel(ops: Sequence[Operation]) -> Kernel:
    """The general case: state ``(count, bits of the pairs appended)``."""
    n = len(ops)
    ranked = rank_appends(list(ops))
    ranks = [-1] * n  # -1: a read
    bits = [0] * n
    for i, op in enumerate(ranked):
        inp = op.input
        if inp[0] == "append":
            ranks[i] = inp[4]
            bits[i] = 1 << inp[3]
        else:
            need = 0
            for _off, _v, pid in op.output:
                need |= 1 << pid
            bits[i] = need

    def step(state: tuple[int, int], i: int) -> Any:
        r = ranks[i]
        if r < 0:
            need = bits[i]
            return state if state[1] & need == need else NOT_LEGAL
        if r == state[0]:
            return (r + 1, state[1] | bits[i])
        return NOT_LEGAL

    return Kernel((0, 0), step, state_of_set=True)


PARTITION_LOG = Model(
    name="partition-log",
    init=_log_init,
    step=_log_step,
    partition=_by_key,
    is_read=_log_is_read,
    prepare=rank_appends,
    describe_operation=_log_describe,
    describe_state=_log_state,
    compile=_log_compile,
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


def _reg_compile(ops: Sequence[Operation]) -> Kernel:
    """``_reg_step`` by index: a commit's offset, or a fetch's result."""
    commits = [op.input[0] == "commit" for op in ops]
    values = [op.input[2] if c else op.output for op, c in zip(ops, commits, strict=True)]

    def step(state: Any, i: int) -> Any:
        if commits[i]:
            return values[i]
        return state if values[i] == state else NOT_LEGAL

    return Kernel(None, step)


COMMITTED_OFFSETS = Model(
    name="committed-offsets",
    init=_reg_init,
    step=_reg_step,
    partition=_by_key,
    is_read=_reg_is_read,
    describe_operation=_reg_describe,
    compile=_reg_compile,
)


def offset_operations(ops: Sequence[dict]) -> list[Operation]:
    """Commits (writes) and offset fetches (reads) per (group, topic-partition).

    An info commit whose offset no fetch ever returned is dropped: no read depends on it, so the history is
    linearizable with it (placed last) iff it is without it; keeping it would make the search try it everywhere.
    """
    # One pass; info commits are kept in place and those no fetch returned are removed at the end. Keys and
    # fetch inputs are built once per (group, partition), not per operation. Pairing: a completion's call is the
    # time of its process's previous operation if that was an invoke (else its own), as a map of pending
    # invokes popped by every completion gives; only commits and fetches need it here.
    gks: dict[str, dict[str, tuple]] = {}  # group -> partition -> ((g, p), ("fetch", (g, p)), {fetched offsets})
    last: dict[int, dict] = {}  # process -> its latest operation
    out: list[Operation] = []
    info: list[tuple[int, tuple, Any]] = []  # (position in out, entry, offset) of info commits
    for op in ops:
        p = op["process"]
        f = op["f"]
        if f == "commit" or f == "fetch_offsets":
            typ = op["type"]
            if typ != "invoke" and typ != "fail" and (f == "commit" or typ == "ok"):
                prev = last.get(p)
                t = op["time_ns"]
                call = prev["time_ns"] if prev is not None and prev["type"] == "invoke" else t
                v = op["value"]
                g = v["group"]
                tab = gks.get(g)
                if tab is None:
                    tab = gks[g] = {}
                ref = op["index"]
                if f == "commit":
                    ok = typ == "ok"
                    ret = t if ok else INF
                    for k, o in v["offsets"].items():
                        e = tab.get(k)
                        if e is None:
                            gk = (g, k)
                            e = tab[k] = (gk, ("fetch", gk), set())
                        if not ok:
                            info.append((len(out), e, o))
                        out.append(_new(Operation, (p, ("commit", e[0], o), None, call, ret, ref)))
                else:
                    for k, o in v["offsets"].items():
                        e = tab.get(k)
                        if e is None:
                            gk = (g, k)
                            e = tab[k] = (gk, ("fetch", gk), set())
                        e[2].add(o)
                        out.append(_new(Operation, (p, e[1], o, call, t, ref)))
        last[p] = op
    drop = [j for j, e, o in info if o not in e[2]]
    for j in reversed(drop):
        del out[j]
    return out


class _Pairs:
    """One partition's (offset, value) pair ids, in order of first sight: the bit a pair has in the log state.
    Also what the info sends' resolution needs: the values ok sends gave, and for each value first met in a
    poll (a pair no send gave before) the offset and return time of that first read."""

    __slots__ = ("key", "by_off", "more", "read_input", "sent", "first_read")

    def __init__(self, key: str) -> None:
        self.key = key
        self.by_off: dict[Any, tuple[Any, int]] = {}  # offset -> (value, id) of the first pair seen there
        self.more: dict[tuple, int] = {}  # (offset, value) -> id of the other pairs (inconsistent offsets)
        self.read_input = ("read", key)
        self.sent: set = set()  # values of ok sends
        self.first_read: dict[Any, tuple[Any, Any]] = {}  # value -> (offset, ret) of the first read of a new pair

    def pid(self, off: Any, v: Any) -> int:
        e = self.by_off.get(off)
        if e is None:
            i = len(self.by_off) + len(self.more)
            self.by_off[off] = (v, i)
            return i
        w = e[0]
        if w is v or w == v:
            return e[1]
        i = self.more.get((off, v))
        if i is None:
            i = self.more[(off, v)] = len(self.by_off) + len(self.more)
        return i

    def read_pid(self, off: Any, v: Any, ret: Any) -> int:
        """``pid`` for a pair a poll read and the fast path did not find: it is new, or at a taken offset."""
        if v not in self.first_read:
            self.first_read[v] = (off, ret)
        return self.pid(off, v)


def log_operations(ops: Sequence[dict]) -> list[Operation]:
    """Appends and reads of every partition, paired invoke -> completion."""
    tables: dict[tuple, _Pairs] = {}  # (topic, partition) -> its pairs, built once per partition
    by_key: dict[str, _Pairs] = {}

    def table(tp: tuple) -> _Pairs:
        tab = tables.get(tp)
        if tab is None:
            k = key_of(*tp)
            tab = by_key.get(k)
            if tab is None:
                tab = by_key[k] = _Pairs(k)
            tables[tp] = tab
        return tab

    calls: dict[int, int] = {}
    out: list[Operation] = []
    info_sends: list[tuple] = []
    last_ret = -INF
    rets_sorted = True  # the reads' returns never go backwards (as the contract's times do not)
    for op in ops:
        typ = op["type"]
        if typ == "invoke":
            calls[op["process"]] = op["time_ns"]
            continue
        t = op["time_ns"]
        p = op["process"]
        call = calls.pop(p, t)
        f = op["f"]
        if f == "poll":
            if typ != "ok":
                continue
            recs = op["value"]["records"]
            if not recs:
                continue
            if t < last_ret:
                rets_sorted = False
            last_ret = t
            # Records come grouped by partition, and mostly from one.
            r = recs[0]
            t0, pn0 = r["topic"], r["partition"]
            tab = tables.get((t0, pn0)) or table((t0, pn0))
            by_off = tab.by_off
            prs: list = []
            groups = None  # {partition's pairs: its records' triples} once a second partition shows up
            for r in recs:
                if r["partition"] != pn0 or r["topic"] != t0:
                    if groups is None:
                        groups = {tab: prs}
                    t0, pn0 = r["topic"], r["partition"]
                    tab = tables.get((t0, pn0)) or table((t0, pn0))
                    by_off = tab.by_off
                    prs = groups.get(tab)
                    if prs is None:
                        prs = groups[tab] = []
                off = r["offset"]
                v = r["value"]
                try:
                    w, pid = by_off[off]
                except KeyError:
                    prs.append((off, v, tab.read_pid(off, v, t)))
                    continue
                if w is v or w == v:
                    prs.append((off, v, pid))
                else:
                    prs.append((off, v, tab.read_pid(off, v, t)))
            if groups is None:
                out.append(_new(Operation, (p, tab.read_input, tuple(prs), call, t, op["index"])))
            else:
                for tab, prs in groups.items():
                    out.append(_new(Operation, (p, tab.read_input, tuple(prs), call, t, op["index"])))
        elif f == "send":
            if typ == "fail":
                continue
            sv = op["value"]
            for r in sv["records"] if "records" in sv else (sv,):
                tp = (r["topic"], r["partition"])
                tab = tables.get(tp) or table(tp)
                v = r["value"]
                off = r.get("offset")
                if off is not None and typ == "ok":
                    tab.sent.add(v)
                    by_off = tab.by_off
                    if off in by_off:
                        pid = tab.pid(off, v)
                    else:  # a new pair, as usual
                        pid = len(by_off) + len(tab.more)
                        by_off[off] = (v, pid)
                    out.append(_new(Operation, (p, ("append", tab.key, v, pid), off, call, t, op["index"])))
                else:
                    info_sends.append((p, tab, v, off, call, op["index"]))
    if info_sends:
        # An info send somebody read happened, at the offset the poll saw it, and before that poll returned.
        # Bounding its return there is sound (a later linearization point would make the read illegal) and keeps
        # the search from trying it at every step until the end of the history. Unread info sends are dropped.
        # Per (partition, value): the offset of its first read and the earliest return of a read of it. With
        # returns in order and no ok send of the value, that is the first read of a pair with it, noted above.
        if rets_sorted and not any(s[2] in s[1].sent for s in info_sends):
            def hit_of(tab: _Pairs, v: Any) -> tuple | None:
                return tab.first_read.get(v)
        else:
            reads = [o for o in out if o.input[0] == "read"]
            seen = _seen_by_reads(reads, {(s[1].key, s[2]) for s in info_sends})

            def hit_of(tab: _Pairs, v: Any) -> tuple | None:
                return seen.get((tab.key, v))

        for p, tab, v, off, call, ref in info_sends:
            hit = hit_of(tab, v)
            if hit is not None:
                off = hit[0]
                out.append(_new(Operation, (p, ("append", tab.key, v, tab.pid(off, v)), off, call, hit[1], ref)))
    return out


def _seen_by_reads(reads: list[Operation], wanted: set[tuple]) -> dict[tuple, tuple]:
    """(key, value) -> (offset of its first read, earliest return of a read of it), for the wanted ones."""
    want: dict[str, set] = {}
    for k, v in wanted:
        want.setdefault(k, set()).add(v)
    seen: dict[tuple, tuple] = {}
    for o in reads:
        w = want.get(o.input[1])
        if not w:
            continue
        for off, v, _ in o.output:
            if v in w:
                kv = (o.input[1], v)
                prev = seen.get(kv)
                if prev is None or o.ret < prev[1]:
                    seen[kv] = (off if prev is None else prev[0], o.ret)
    return seen


MODELS = {"partition-log": (PARTITION_LOG, log_operations), "committed-offsets": (COMMITTED_OFFSETS, offset_operations)}
