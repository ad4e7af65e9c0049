"""From a history (the contract in history/schema.py) to the operations the linearizability models check.

``log_operations``: every partition's appends (sends) and reads (polls), paired invoke -> completion, for
:data:`reports.models.PARTITION_LOG`. ``offset_operations``: commits and offset fetches per (group,
topic-partition), for :data:`reports.models.COMMITTED_OFFSETS`. The models themselves (pure step functions and
their compiled kernels) live in :mod:`reports.models`.

Both read operations as :class:`history.typed.Op` structs (attributes, not dict keys): a run read on the typed
path hands over the structs it decoded (``History.typed_ops()``), so no operation dict is built for a check;
dicts are converted in one call first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from history.schema import key_of
from history.typed import Op, to_typed

from .linearizability import INF, Operation

_new = tuple.__new__  # Operation(...) without the Python-level NamedTuple __new__: _new(Operation, (fields))


def offset_operations(ops: Sequence[Op] | Sequence[dict], settings: dict | None = None) -> list[Operation]:
    """Commits (writes) and offset fetches (reads) per (group, topic-partition). (``settings``, the run's header
    settings, are taken for symmetry with :func:`log_operations`; nothing here depends on them.)

    An info commit whose offset no fetch ever returned is dropped: no read depends on it, so the history is
    linearizable with it (placed last) iff it is without it; keeping it would make the search try it everywhere.
    """
    # One pass; info commits are kept in place and those no fetch returned are removed at the end. Keys and
    # fetch inputs are built once per (group, partition), not per operation. Pairing: a completion's call is the
    # time of its process's previous operation if that was an invoke (else its own), as a map of pending
    # invokes popped by every completion gives; only commits and fetches need it here.
    ops = to_typed(ops)
    gks: dict[str, dict[str, tuple]] = {}  # group -> partition -> ((g, p), ("fetch", (g, p)), {fetched offsets})
    last: dict[int, Op] = {}  # process -> its latest operation
    out: list[Operation] = []
    info: list[tuple[int, tuple, Any]] = []  # (position in out, entry, offset) of info commits
    for op in ops:
        p = op.process
        f = op.f
        if f == "commit" or f == "fetch_offsets":
            typ = op.type
            if typ != "invoke" and typ != "fail" and (f == "commit" or typ == "ok"):
                prev = last.get(p)
                t = op.time_ns
                call = prev.time_ns if prev is not None and prev.type == "invoke" else t
                v = op.value
                g = v.group
                tab = gks.get(g)
                if tab is None:
                    tab = gks[g] = {}
                ref = op.index
                if f == "commit":
                    ok = typ == "ok"
                    ret = t if ok else INF
                    for k, o in v.offsets.items():
                        e = tab.get(k)
                        if e is None:
                            gk = (g, k)
                            e = tab[k] = (gk, ("fetch", gk), set())
                        if not ok:
                            info.append((len(out), e, o))
                        out.append(_new(Operation, (p, ("commit", e[0], o), None, call, ret, ref)))
                else:
                    for k, o in v.offsets.items():
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
        self.read_input = ("read", key)  # a read without a fetch position
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


def acks_all(settings: dict | None) -> bool:
    """Whether a run's acknowledged sends were acknowledged with ``acks=all`` (header setting ``acks``: -1 or
    "all"; a run that does not say is taken to, as Kafka producers default to it since 3.0)."""
    acks = (settings or {}).get("acks", -1)
    return acks in (-1, "-1", "all")


def log_operations(ops: Sequence[Op] | Sequence[dict], settings: dict | None = None) -> list[Operation]:
    """Appends and reads of every partition, paired invoke -> completion.

    A send invoked and never completed is treated exactly as an info send (it may have happened at any time
    after its invoke). A poll with ``positions`` gives, per listed partition, a read ``("read", key, position)``
    whose output may be empty (nothing at or after the position); other reads are ``("read", key)``. In a run
    whose header ``settings`` say acks other than all, an empty positioned read is dropped: an acks=1
    acknowledgement is no evidence the record was visible (see :mod:`reports.models`)."""
    ops = to_typed(ops)
    empty_reads = acks_all(settings)
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

    calls: dict[int, Op] = {}  # process -> its invoke in flight
    out: list[Operation] = []
    info_sends: list[tuple] = []
    last_ret = -INF
    rets_sorted = True  # the reads' returns never go backwards (as the contract's times do not)

    def indeterminate(inv: Op) -> None:
        """A send invoke that never completed: an info send (kept below only if some poll read it)."""
        if inv.f == "txn":
            for m in inv.value.ops:
                if m.f == "send":
                    info_sends.append((inv.process, table((m.topic, m.partition)), m.value, None, inv.time_ns,
                                       inv.index))
            return
        if inv.f != "send":
            return
        sv = inv.value
        for r in sv.records if sv.records is not UNSET else (sv,):
            tab = table((r.topic, r.partition))
            info_sends.append((inv.process, tab, r.value, None, inv.time_ns, inv.index))

    for op in ops:
        typ = op.type
        if typ == "invoke":
            prev = calls.get(op.process)
            if prev is not None:
                indeterminate(prev)
            calls[op.process] = op
            continue
        t = op.time_ns
        p = op.process
        inv = calls.pop(p, None)
        call = t if inv is None else inv.time_ns
        f = op.f
        if f == "poll":
            if typ != "ok":
                continue
            pv = op.value
            recs = pv.records
            if pv.positions is not UNSET:
                if t < last_ret:
                    rets_sorted = False
                last_ret = t
                _positioned_reads(pv, p, call, t, op.index, table, out, empty_reads)
                continue
            if not recs:
                continue
            if t < last_ret:
                rets_sorted = False
            last_ret = t
            # Records come grouped by partition, and mostly from one.
            r = recs[0]
            t0, pn0 = r.topic, r.partition
            tab = tables.get((t0, pn0)) or table((t0, pn0))
            by_off = tab.by_off
            prs: list = []
            groups = None  # {partition's pairs: its records' triples} once a second partition shows up
            for r in recs:
                if r.partition != pn0 or r.topic != t0:
                    if groups is None:
                        groups = {tab: prs}
                    t0, pn0 = r.topic, r.partition
                    tab = tables.get((t0, pn0)) or table((t0, pn0))
                    by_off = tab.by_off
                    prs = groups.get(tab)
                    if prs is None:
                        prs = groups[tab] = []
                off = r.offset
                v = r.value
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
                out.append(_new(Operation, (p, tab.read_input, tuple(prs), call, t, op.index)))
            else:
                for tab, prs in groups.items():
                    out.append(_new(Operation, (p, tab.read_input, tuple(prs), call, t, op.index)))
        elif f == "txn":
            # A transaction's records become visible to read_committed at its commit, and later still while an
            # earlier open transaction holds the last stable offset back: no bound from its completion holds.
            # Its sends are appends that happened at some time after its invoke - info sends (kept if read) -
            # unless it certainly did not commit. (Its polls are not modelled here.)
            if typ == "fail":
                continue
            for m in op.value.ops:
                if m.f == "send":
                    tp = (m.topic, m.partition)
                    info_sends.append((p, tables.get(tp) or table(tp), m.value, m.offset, call, op.index))
        elif f == "send":
            if typ == "fail":
                continue
            sv = op.value
            for r in sv.records if sv.records is not UNSET else (sv,):
                tp = (r.topic, r.partition)
                tab = tables.get(tp) or table(tp)
                v = r.value
                off = r.offset
                if off is not None and typ == "ok":
                    tab.sent.add(v)
                    by_off = tab.by_off
                    if off in by_off:
                        pid = tab.pid(off, v)
                    else:  # a new pair, as usual
                        pid = len(by_off) + len(tab.more)
                        by_off[off] = (v, pid)
                    out.append(_new(Operation, (p, ("append", tab.key, v, pid), off, call, t, op.index)))
                else:
                    info_sends.append((p, tab, v, off, call, op.index))
    calls.pop(-1, None)
    for inv in calls.values():  # invokes the run ended on
        indeterminate(inv)
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


def _positioned_reads(pv: Any, p: int, call: Any, t: Any, ref: int, table: Any, out: list[Operation],
                      empty_reads: bool) -> None:
    """The reads of a poll that recorded its fetch positions: one per partition read, and (``empty_reads``) one
    per partition listed that read nothing."""
    groups: dict[Any, list] = {}
    for r in pv.records:
        tab = table((r.topic, r.partition))
        prs = groups.get(tab)
        if prs is None:
            prs = groups[tab] = []
        off, v = r.offset, r.value
        e = tab.by_off.get(off)
        prs.append((off, v, e[1] if e is not None and (e[0] is v or e[0] == v) else tab.read_pid(off, v, t)))
    positions = {}
    for k, pos in pv.positions.items():
        topic, _, part = k.rpartition("/")
        tab = table((topic, int(part)))
        positions[tab] = pos
        groups.setdefault(tab, [])
    for tab, prs in groups.items():
        if not prs and not empty_reads:
            continue
        pos = positions.get(tab)
        inp = tab.read_input if pos is None else ("read", tab.key, pos)
        out.append(_new(Operation, (p, inp, tuple(prs), call, t, ref)))


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
