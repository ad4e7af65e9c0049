"""The straightforward anomaly checker: one pass over every record in Python, dicts per topic-partition.

It is the executable definition the fast, columnar checker in :mod:`reports.checkers` is tested against (the
tests compare their cases one by one on generated histories), and that checker's fallback for the rare history
whose offsets or sizes do not fit its int64 columns. Slower (about 0.5M ops/s here), but every rule is one
readable line.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Sequence
from itertools import islice
from operator import itemgetter, sub
from typing import Any

from history.columns import pending_invokes

from .anomalies import ANOMALIES, CheckResult, _op_ref, acceptable
from .txn import TXN_ANOMALIES

# What this checker says of a run with txns (it is the fallback for offsets outside int64): their sends and reads
# are checked as the queue checker's batches and polls, the transactional analyses are not.
NOT_CHECKED = ("not checked by the record-by-record checker (the fallback for offsets or sizes outside int64): "
               "the transactional analyses (precommitted-read, torn, G1c, G0) run on int64 columns only; the "
               "txns' sends and reads were checked as batches and polls (G1a, lost-write, duplicate, ...)")


class NotCheckedWarning(UserWarning):
    """A run had operations whose analyses this checker does not do (reported in ``stats["not_checked"]``)."""

_MISSING = object()
_PREV_VALUE = itemgetter(1)
_CUR_VALUE = itemgetter(4)


class _Key:
    """Everything the pass collects about one topic-partition (also the hashable handle the pass keys on)."""

    __slots__ = ("name", "topic", "log", "conflicts", "writers", "readers", "polls", "poll_pairs", "send_pairs",
                 "batches", "info_offsets", "failed", "log_first")

    def __init__(self, topic: str, partition: int) -> None:
        self.name = f"{topic}/{partition}"
        self.topic = topic
        self.log: dict[int, Any] = {}  # offset -> first value observed there
        self.conflicts: dict[int, list] = {}  # offset -> all values when more than one
        self.writers: dict[Any, tuple[int, str]] = {}  # value -> (op position, completion type)
        self.readers: dict[Any, int] = {}  # value -> first ok poll (position) that read it
        # (values' offsets ride along: a duplicated value's place is the copy that was read or sent)
        self.polls: list[tuple] = []  # (position, values, offsets) for polls with >= 2 records of this key
        self.poll_pairs: list[tuple] = []  # (prev pos, prev last value, its offset, pos, first value, its offset)
        self.send_pairs: list[tuple] = []  # (prev pos, prev value, prev send, pos, value, send)
        self.batches: list[tuple] = []  # (position, values, sends) for batches with >= 2 sends to this key
        self.info_offsets: list[tuple[int, Any]] = []  # offsets reported by info sends (used only if read)
        self.failed: list = []  # values of failed sends (G1a candidates)
        self.log_first = self.log.setdefault  # bound once: the hot loop calls it per record

    def observe(self, off: int, v: Any) -> None:
        prev = self.log.get(off, _MISSING)
        if prev is _MISSING:
            self.log[off] = v
        elif prev != v:
            vs = self.conflicts.get(off)
            if vs is None:
                self.conflicts[off] = [prev, v]
            elif v not in vs:
                vs.append(v)


def analyze(ops: Sequence[dict], settings: dict | None = None) -> CheckResult:
    """Find every Kafka anomaly in one run's operations (index order), record by record."""
    was = gc.isenabled()
    gc.disable()  # the pass allocates many small acyclic objects; cyclic GC passes over them are pure cost
    try:
        return _analyze(ops, settings)
    finally:
        if was:
            gc.enable()


def _analyze(ops: Sequence[dict], settings: dict | None) -> CheckResult:
    # Hot loop: keys are found through topic -> partition dicts (no tuple built and hashed per record), the
    # per-key state object is itself the key of the per-process tables, and dict methods are bound once per key
    # switch rather than looked up per record.
    by_topic: dict[str, dict[int, _Key]] = {}
    order: list[_Key] = []  # keys in first-seen order (the order cases are reported in)
    last_read: dict[int, dict[_Key, tuple]] = {}  # process -> key -> (pos, last value)
    last_send: dict[int, dict[_Key, tuple]] = {}
    n_records = 0

    def new_key(t: str, pt: int) -> _Key:
        parts = by_topic.get(t)
        if parts is None:
            parts = by_topic[t] = {}
        ks = parts[pt] = _Key(t, pt)
        order.append(ks)
        return ks

    def read_records(pos: int, p: int, recs: list) -> None:
        """An ok poll's records (or an ok txn's: every record its polls read)."""
        nonlocal n_records
        n_records += len(recs)
        # One pass; Kafka returns each partition's records contiguously, so switch key only on a change.
        groups: dict[_Key, list] = {}
        offs: dict[_Key, list] = {}
        cur_t = cur_p = None
        for r in recs:
            t = r["topic"]
            pt = r["partition"]
            if pt != cur_p or t != cur_t:
                cur_t, cur_p = t, pt
                parts = by_topic.get(t)
                ks = parts.get(pt) if parts is not None else None
                if ks is None:
                    ks = new_key(t, pt)
                vals = groups.get(ks)
                if vals is None:
                    vals = groups[ks] = []
                    offs[ks] = []
                log_first = ks.log_first
                readers = ks.readers
                add = vals.append
                add_off = offs[ks].append
            v = r["value"]
            off = r["offset"]
            prev = log_first(off, v)
            if prev is not v and prev != v:
                ks.observe(off, v)
            if v not in readers:
                readers[v] = pos
            add(v)
            add_off(off)
        lr = last_read.get(p)
        if lr is None:
            lr = last_read[p] = {}
        for ks, vals in groups.items():
            o = offs[ks]
            if len(vals) > 1:
                ks.polls.append((pos, vals, o))
            prev = lr.get(ks)
            if prev is not None:
                ks.poll_pairs.append((prev[0], prev[1], prev[2], pos, vals[0], o[0]))
            lr[ks] = (pos, vals[-1], o[-1])

    def send_records(pos: int, p: int, typ: str, recs: list) -> None:
        """A batch send's records (or a txn's sends: a batch with the txn's outcome)."""
        ls = None
        if typ != "fail":
            ls = last_send.get(p)
            if ls is None:
                ls = last_send[p] = {}
        batch: dict[_Key, list] | None = {} if len(recs) > 1 else None
        for r in recs:
            t = r["topic"]
            pt = r["partition"]
            v = r["value"]
            parts = by_topic.get(t)
            ks = parts.get(pt) if parts is not None else None
            if ks is None:
                ks = new_key(t, pt)
            ks.writers[v] = (pos, typ)
            if typ == "fail":
                ks.failed.append(v)
                continue
            off = r.get("offset")
            if off is not None:
                if typ == "ok":
                    ks.observe(off, v)
                else:
                    ks.info_offsets.append((off, v))
            sent = (off, typ)
            if batch is not None:
                batch.setdefault(ks, []).append((v, sent))
            prev = ls.get(ks)
            if prev is not None and prev[0] != pos:  # pairs inside one batch are internal, checked below
                ks.send_pairs.append((prev[0], prev[1], prev[2], pos, v, sent))
            ls[ks] = (pos, v, sent)
        if batch:
            for ks, sent in batch.items():
                if len(sent) > 1:
                    ks.batches.append((pos, [x[0] for x in sent], [x[1] for x in sent]))

    # invokes never completed are indeterminate, exactly like info completions: treated as one at the invoke
    pending = {pos for pos in pending_invokes(ops) if ops[pos]["f"] in ("send", "poll", "txn")}
    n_txns = 0
    for pos, op in enumerate(ops):
        typ = op["type"]
        if typ == "invoke":
            if pos not in pending:
                continue
            typ = "info"
        f = op["f"]
        if f == "poll":
            if typ != "ok":
                if typ == "info":  # it may have moved the position, to where we cannot tell: start afresh
                    last_read.pop(op["process"], None)
                continue  # a failed poll did not happen and moved nothing
            recs = op["value"]["records"]
            if recs:
                read_records(pos, op["process"], recs)
        elif f == "send":
            value = op["value"]
            if "records" not in value:  # the common case: one record, inline
                t = value["topic"]
                pt = value["partition"]
                v = value["value"]
                parts = by_topic.get(t)
                ks = parts.get(pt) if parts is not None else None
                if ks is None:
                    ks = new_key(t, pt)
                ks.writers[v] = (pos, typ)
                if typ == "fail":
                    ks.failed.append(v)
                    continue
                off = value.get("offset")
                if off is not None:
                    if typ == "ok":
                        prev = ks.log_first(off, v)
                        if prev is not v and prev != v:
                            ks.observe(off, v)
                    else:
                        ks.info_offsets.append((off, v))
                p = op["process"]
                ls = last_send.get(p)
                if ls is None:
                    ls = last_send[p] = {}
                sent = (off, typ)
                prev = ls.get(ks)
                if prev is not None:
                    ks.send_pairs.append((prev[0], prev[1], prev[2], pos, v, sent))
                ls[ks] = (pos, v, sent)
                continue
            send_records(pos, op["process"], typ, value["records"])
        elif f == "txn":
            # As the columnar checker gathers a txn (history.columns): its sends a batch of the txn's outcome,
            # an ok txn's polled records one poll after them (its partitions first seen in record order, polled
            # ones first), and a txn that polled and did not commit resets its consumer's poll tracking.
            n_txns += 1
            p = op["process"]
            mops = op["value"]["ops"]
            sends = [m for m in mops if m["f"] == "send"]
            polls = [m for m in mops if m["f"] == "poll"]
            recs = [r for m in polls for r in m["records"]] if typ == "ok" else []
            for r in recs:
                parts = by_topic.get(r["topic"])
                if parts is None or r["partition"] not in parts:
                    new_key(r["topic"], r["partition"])
            if sends:
                send_records(pos, p, typ, sends)
            if recs:
                read_records(pos, p, recs)
            elif polls and typ != "ok":
                last_read.pop(p, None)
        elif f == "assign" or f == "subscribe":
            if typ == "fail":
                continue
            v = op["value"]
            p = op["process"]
            for table in (last_read, last_send):
                cur = table.get(p)
                if not cur:
                    continue
                if f == "assign":
                    keep = set(v["partitions"])
                    table[p] = {ks: x for ks, x in cur.items() if ks.name in keep}
                else:
                    topics = set(v["topics"])
                    table[p] = {ks: x for ks, x in cur.items() if ks.topic in topics}
        elif f == "crash":
            p = op["process"]
            last_read.pop(p, None)
            last_send.pop(p, None)

    anomalies: dict[str, list[dict]] = {a: [] for a in ANOMALIES}
    for ks in order:
        _analyze_key(ks.name, ks, anomalies, ops)
    stats = {"ops": len(ops), "keys": len(order), "polled_records": n_records}
    if n_txns:
        stats["not_checked"] = {a: NOT_CHECKED for a in TXN_ANOMALIES}
        warnings.warn(f"{n_txns} txn operations: {NOT_CHECKED}", NotCheckedWarning, stacklevel=3)
    return CheckResult(anomalies, acceptable(settings), stats, [ks.name for ks in order])


def _analyze_key(key: str, ks: _Key, out: dict[str, list[dict]], ops: Sequence[dict]) -> None:
    # Each finder first asks a C-level question (all deltas 1? any value unread?) that a clean key answers with
    # "nothing here", and only then walks its data in Python to build cases.
    readers = ks.readers
    writers = ks.writers
    # Info sends count towards the version order only if someone read their value (they must have happened).
    for off, v in ks.info_offsets:
        if v in readers:
            ks.observe(off, v)
    log = ks.log
    offsets = sorted(log)
    n = len(offsets)
    by_index: list = list(map(log.__getitem__, offsets))
    # value -> dense index, from the one value chosen per offset (Jepsen's :by-value): the first index wins.
    by_value: dict[Any, int] = dict(zip(reversed(by_index), range(n - 1, -1, -1), strict=True))
    conflicts = ks.conflicts
    if not conflicts and len(by_value) == n:
        # One value per offset and one offset per value: every map below is by_value, and nothing is duplicated.
        first_index = last_index = by_value
        value_offsets: dict[Any, list[int]] = {}
    else:
        first_index = {}  # every value -> first dense index it appears at
        last_index = {}  # every value -> last dense index it appears at
        value_offsets = {}
        for i, off in enumerate(offsets):
            v = by_index[i]
            vs = conflicts.get(off) or (v,)
            for x in vs:
                if x not in first_index:
                    first_index[x] = i
                last_index[x] = i
                lst = value_offsets.get(x)
                if lst is None:
                    value_offsets[x] = [off]
                else:
                    lst.append(off)

    # inconsistent-offsets: one offset, several values.
    for off in sorted(conflicts):
        vals = conflicts[off]
        out["inconsistent-offsets"].append(
            {"key": key, "offset": off, "values": list(vals),
             "writers": [_op_ref(ops, writers[x][0]) if x in writers else None for x in vals],
             "readers": [_op_ref(ops, readers.get(x)) for x in vals]}
        )
    # duplicate: one value, several offsets.
    for v, offs in value_offsets.items():
        if len(offs) > 1:
            out["duplicate"].append(
                {"key": key, "value": v, "count": len(offs), "offsets": offs,
                 "writer": _op_ref(ops, writers[v][0]) if v in writers else None,
                 "reader": _op_ref(ops, readers.get(v))}
            )
    # G1a: an ok poll read a value whose send failed.
    # (only values whose last send failed can be cases; ks.failed lists every value a failed send wrote)
    if any(v in readers and writers[v][1] == "fail" for v in ks.failed):
        for v, rpos in readers.items():
            w = writers.get(v)
            if w is not None and w[1] == "fail":
                out["G1a"].append({"key": key, "value": v, "writer": _op_ref(ops, w[0]),
                                   "reader": _op_ref(ops, rpos)})
    # lost-write / unseen.
    bound = -1
    bound_value = None
    if readers:
        idx = list(map(first_index.get, readers))
        if None in idx:
            for v in readers:
                i = first_index.get(v)
                if i is not None and i > bound:
                    bound, bound_value = i, v
        else:
            bound = max(idx)
            bound_value = next(islice(readers, idx.index(bound), None))
    unread = writers.keys() - readers.keys()
    if unread:
        for v in [v for v in writers if v in unread]:
            wpos, wtyp = writers[v]
            if wtyp != "ok":
                continue  # info sends never read may not have happened; failed ones did not
            li = last_index.get(v)
            if li is not None and li <= bound:
                out["lost-write"].append(
                    {"key": key, "value": v, "index": first_index[v], "max_read_index": bound,
                     "max_read_value": bound_value, "writer": _op_ref(ops, wpos),
                     "max_read": _op_ref(ops, readers.get(bound_value))}
                )
            else:
                out["unseen"].append({"key": key, "value": v, "index": li, "max_read_index": bound,
                                      "writer": _op_ref(ops, wpos)})

    bv = by_value.get
    # A value seen at two or more offsets (a duplicate) has a place per copy: a read or send of it stands at the
    # offset it carries (a read's, an ok send's, an info send's whose value was read), and a gap in the version
    # order that holds only copies of duplicated values skips nothing new. The duplicate case reports them once;
    # only Jepsen's value-at-first-offset place would make a reader that read every record skip or go back.
    dups = {x for x, offs in value_offsets.items() if len(offs) > 1}
    if dups:
        at_offset = {off: i for i, off in enumerate(offsets)}.get
        kept = [0]  # kept[j]: values of the order before index j that are not duplicated
        for x in by_index:
            kept.append(kept[-1] + (x not in dups))

        def place(v: Any, off: Any) -> int | None:
            if v in dups and off is not None:
                i = at_offset(off)
                if i is not None:
                    return i
            return bv(v)

        def sent_place(v: Any, sent: tuple) -> int | None:
            off, typ = sent
            return place(v, off if typ == "ok" or v in readers else None)

        def skipped(i1: int, i2: int) -> list:
            return [x for x in by_index[i1 + 1: i2] if x not in dups]

        def steps(i1: int, i2: int) -> int:
            """A forward step counted without duplicated values (1 when it skipped nothing new)."""
            return kept[i2] - kept[i1 + 1] + 1
    else:
        def place(v: Any, off: Any) -> int | None:
            return bv(v)

        def sent_place(v: Any, sent: tuple) -> int | None:
            return bv(v)

        def skipped(i1: int, i2: int) -> list:
            return by_index[i1 + 1: i2]

        def steps(i1: int, i2: int) -> int:
            return i2 - i1

    # poll-skip / nonmonotonic-poll across one process's successive polls.
    pairs = ks.poll_pairs
    if pairs and (dups or not _all_steps_are(1, pairs, bv)):
        for ppos, pv, poff, cpos, cv, coff in pairs:
            i1 = place(pv, poff)
            i2 = place(cv, coff)
            if i1 is None or i2 is None or i2 - i1 == 1:
                continue
            if i2 > i1:
                d = steps(i1, i2)
                if d > 1:
                    out["poll-skip"].append({"key": key, "values": [pv, cv], "delta": d,
                                             "skipped": skipped(i1, i2),
                                             "ops": [_op_ref(ops, ppos), _op_ref(ops, cpos)]})
            else:
                out["nonmonotonic-poll"].append({"key": key, "values": [pv, cv], "delta": i2 - i1,
                                                 "ops": [_op_ref(ops, ppos), _op_ref(ops, cpos)]})
    # int-poll-skip / int-nonmonotonic-poll inside one poll.
    for pos, vals, offs in ks.polls:
        idx = list(map(place, vals, offs))
        i0 = idx[0]
        if i0 is not None and None not in idx and idx == list(range(i0, i0 + len(idx))):
            continue  # the common case: consecutive values of the version order
        for a, b, i1, i2 in zip(vals, vals[1:], idx, idx[1:], strict=False):
            if i1 is None or i2 is None or i2 - i1 == 1:
                continue
            if i2 > i1:
                d = steps(i1, i2)
                if d > 1:
                    out["int-poll-skip"].append({"key": key, "values": [a, b], "delta": d,
                                                 "skipped": skipped(i1, i2), "op": _op_ref(ops, pos)})
            else:
                out["int-nonmonotonic-poll"].append({"key": key, "values": [a, b], "delta": i2 - i1,
                                                     "op": _op_ref(ops, pos)})
    # nonmonotonic-send across one process's successive sends.
    pairs = ks.send_pairs
    if pairs and (dups or not _all_steps_at_least(1, pairs, bv)):
        for ppos, pv, psent, cpos, cv, csent in pairs:
            i1 = sent_place(pv, psent)
            i2 = sent_place(cv, csent)
            if i1 is not None and i2 is not None and i2 - i1 < 1:
                out["nonmonotonic-send"].append({"key": key, "values": [pv, cv], "delta": i2 - i1,
                                                 "ops": [_op_ref(ops, ppos), _op_ref(ops, cpos)]})
    # int-nonmonotonic-send / int-send-skip inside one batch.
    for pos, vals, sents in ks.batches:
        idx = list(map(sent_place, vals, sents))
        for a, b, i1, i2 in zip(vals, vals[1:], idx, idx[1:], strict=False):
            if i1 is None or i2 is None or i2 - i1 == 1:
                continue
            if i2 > i1:
                d = steps(i1, i2)
                if d > 1:
                    out["int-send-skip"].append({"key": key, "values": [a, b], "delta": d,
                                                 "skipped": skipped(i1, i2), "op": _op_ref(ops, pos)})
            else:
                out["int-nonmonotonic-send"].append({"key": key, "values": [a, b], "delta": i2 - i1,
                                                     "op": _op_ref(ops, pos)})


def _pair_steps(pairs: list[tuple], index_of: Callable) -> list[int] | None:
    """Index steps (current - previous) of (prev pos, prev value, pos, value) pairs, or None if a value has no
    index (then the caller's exact loop decides)."""
    before = list(map(index_of, map(_PREV_VALUE, pairs)))
    after = list(map(index_of, map(_CUR_VALUE, pairs)))
    if None in before or None in after:
        return None
    return list(map(sub, after, before))


def _all_steps_are(step: int, pairs: list[tuple], index_of: Callable) -> bool:
    """True when every pair moved exactly ``step`` along the version order (no case can come from them)."""
    steps = _pair_steps(pairs, index_of)
    return steps is not None and steps.count(step) == len(steps)


def _all_steps_at_least(step: int, pairs: list[tuple], index_of: Callable) -> bool:
    """True when every pair moved at least ``step`` along the version order (no case can come from them)."""
    steps = _pair_steps(pairs, index_of)
    return steps is not None and min(steps) >= step
