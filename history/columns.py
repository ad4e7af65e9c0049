"""A run's records as flat columns, gathered in one traversal of its operations.

Checkers that look at every record (:mod:`reports.checkers`) want columns - every polled offset, every value -
rather than a dict per record. :meth:`RecordColumns.collect` gathers them in one pass over the operations, with
C-level ``map`` per operation (never a Python statement per record). Positions are indexes into the run's list of
operations, so evidence can point back at the operation itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

_TOPIC = itemgetter("topic")
_PARTITION = itemgetter("partition")
_OFFSET = itemgetter("offset")
_VALUE = itemgetter("value")


def _offset_or_none(r: dict) -> int | None:
    return r.get("offset")


class RecordColumns:
    """Polled records (``p_*``, one row per record of an ok poll), sent records (``s_*``, one row per record of a
    send completion: ok, info or fail), and the operations that reset a consumer's position tracking (``events``:
    assign, subscribe and crash, and info polls, which may have moved the position without saying where to)."""

    __slots__ = ("n_ops", "p_topic", "p_partition", "p_offset", "p_value", "p_ops",
                 "s_topic", "s_partition", "s_value", "s_offset", "s_ops", "events", "values_all_int", "pending",
                 "t_ops", "op_time")

    def __init__(self, values_all_int: bool = False) -> None:
        self.n_ops = 0
        # True only when whoever gathered them looked at every value's class (the reader does) and it was int
        self.values_all_int = values_all_int
        self.p_topic: list[str] = []
        self.p_partition: list[int] = []
        self.p_offset: list[int] = []
        self.p_value: list = []
        self.p_ops: list[tuple[int, int, int]] = []  # (position, process, records) per ok poll with records
        self.s_topic: list[str] = []
        self.s_partition: list[int] = []
        self.s_value: list = []
        self.s_offset: list[int | None] = []  # None when the completion gave no offset
        self.s_ops: list[tuple[int, int, str, int]] = []  # (position, process, type, records) per send completion
        # (position, process, f, value): assign, subscribe, crash, and info polls (which reset poll tracking only)
        self.events: list[tuple[int, int, str, object]] = []
        # positions of invokes that never got a completion: indeterminate, exactly like info (history/schema.py)
        self.pending: list[int] = []
        # (position, process, type, position of its invoke) per txn completion; its sends are in s_* (a batch of
        # the txn's outcome), the records an ok txn polled in p_* (one poll), both at the completion's position
        self.t_ops: list[tuple[int, int, str, int]] = []
        # time_ns per operation (None when whoever gathered the columns did not keep them: runs without txns)
        self.op_time: Sequence[int] | None = None

    @classmethod
    def collect(cls, ops: Sequence[dict]) -> RecordColumns:
        """Columns of ``ops`` (a run's operations in index order)."""
        c = cls()
        pt, pp, po, pv = c.p_topic.extend, c.p_partition.extend, c.p_offset.extend, c.p_value.extend
        st, sp, sv, so = c.s_topic.append, c.s_partition.append, c.s_value.append, c.s_offset.append
        stx, spx, svx, sox = c.s_topic.extend, c.s_partition.extend, c.s_value.extend, c.s_offset.extend
        p_ops, s_ops, events = c.p_ops.append, c.s_ops.append, c.events.append
        in_flight: dict[int, int] = {}  # process -> position of its invoke
        pending = c.pending.append
        for pos, op in enumerate(ops):
            typ = op["type"]
            if typ == "invoke":
                prev = in_flight.get(op["process"])
                if prev is not None:  # the earlier invoke never completed (possible after skipped lines)
                    pending(prev)
                in_flight[op["process"]] = pos
                continue
            invoked = in_flight.pop(op["process"], pos)
            f = op["f"]
            if f == "poll":
                if typ == "ok":
                    recs = op["value"]["records"]
                    if recs:
                        pt(map(_TOPIC, recs))
                        pp(map(_PARTITION, recs))
                        po(map(_OFFSET, recs))
                        pv(map(_VALUE, recs))
                        p_ops((pos, op["process"], len(recs)))
                elif typ == "info":  # it may have moved the consumer's position: resets its poll tracking
                    events((pos, op["process"], f, None))
            elif f == "send":
                v = op["value"]
                if "records" not in v:
                    st(v["topic"])
                    sp(v["partition"])
                    sv(v["value"])
                    so(v.get("offset"))
                    s_ops((pos, op["process"], typ, 1))
                else:
                    recs = v["records"]
                    stx(map(_TOPIC, recs))
                    spx(map(_PARTITION, recs))
                    svx(map(_VALUE, recs))
                    sox(map(_offset_or_none, recs))
                    s_ops((pos, op["process"], typ, len(recs)))
            elif f == "txn":
                v = op["value"]
                sends = [m for m in v["ops"] if m["f"] == "send"]
                if sends:
                    stx(map(_TOPIC, sends))
                    spx(map(_PARTITION, sends))
                    svx(map(_VALUE, sends))
                    sox(map(_offset_or_none, sends))
                    s_ops((pos, op["process"], typ, len(sends)))
                polls = [m for m in v["ops"] if m["f"] == "poll"]
                if typ == "ok":
                    recs = [r for m in polls for r in m["records"]]
                    if recs:
                        pt(map(_TOPIC, recs))
                        pp(map(_PARTITION, recs))
                        po(map(_OFFSET, recs))
                        pv(map(_VALUE, recs))
                        p_ops((pos, op["process"], len(recs)))
                elif polls:  # a txn that polled and did not commit: its consumer was rewound (or may have been)
                    events((pos, op["process"], "poll", None))
                c.t_ops.append((pos, op["process"], typ, invoked))
            elif f == "assign" or f == "subscribe":
                if typ != "fail":
                    events((pos, op["process"], f, op["value"]))
            elif f == "crash":
                events((pos, op["process"], f, None))
        c.n_ops = len(ops)
        if c.t_ops or any(ops[p]["f"] == "txn" for p in in_flight.values()):
            c.op_time = [op["time_ns"] for op in ops]
        in_flight.pop(-1, None)  # nemesis events are outside the invoke/completion protocol
        c.pending.extend(in_flight.values())
        c.pending.sort()
        return c


def pending_invokes(ops: Sequence[dict]) -> list[int]:
    """Positions of the invokes that never got a completion (a later invoke of the same process, or the end of
    the run, came first): indeterminate operations, exactly like ``info``."""
    in_flight: dict[int, int] = {}
    out: list[int] = []
    for pos, op in enumerate(ops):
        p = op["process"]
        if op["type"] == "invoke":
            prev = in_flight.get(p)
            if prev is not None:
                out.append(prev)
            in_flight[p] = pos
        else:
            in_flight.pop(p, None)
    in_flight.pop(-1, None)
    out.extend(in_flight.values())
    out.sort()
    return out


def with_pending(ops: Sequence[dict], c: RecordColumns) -> RecordColumns:
    """``c`` with the invokes in ``c.pending`` treated as ``info`` completions at their positions (a copy; ``c``
    is left alone): sends as info sends, polls as info polls (events that reset the process's poll tracking)."""
    polls = [(pos, ops[pos]["process"], "poll", None) for pos in c.pending if ops[pos]["f"] == "poll"
             or (ops[pos]["f"] == "txn" and any(m["f"] == "poll" for m in ops[pos]["value"]["ops"]))]
    txns = [(pos, ops[pos]["process"], "info", pos) for pos in c.pending if ops[pos]["f"] == "txn"]
    new = with_pending_sends(ops, c)
    if polls or txns:
        if new is c:
            new = _copy(c)
        new.events = sorted(c.events + polls, key=itemgetter(0))
        new.t_ops = sorted(c.t_ops + txns)
        if new.op_time is None:
            new.op_time = [op["time_ns"] for op in ops]
    return new


def _copy(c: RecordColumns) -> RecordColumns:
    new = RecordColumns(c.values_all_int)
    for name in RecordColumns.__slots__:
        setattr(new, name, getattr(c, name))
    return new


def with_pending_sends(ops: Sequence[dict], c: RecordColumns) -> RecordColumns:
    """``c`` with every send invoke in ``c.pending`` added as an ``info`` send at its position (a copy; ``c`` is
    left alone). Cheap when they are at the end of the run, as when the run ended or clients crashed."""
    adds = [pos for pos in c.pending if ops[pos]["f"] == "send"
            or (ops[pos]["f"] == "txn" and any(m["f"] == "send" for m in ops[pos]["value"]["ops"]))]
    if not adds:
        return c
    new = _copy(c)
    new.s_topic, new.s_partition, new.s_value, new.s_offset, new.s_ops = (
        list(c.s_topic), list(c.s_partition), list(c.s_value), list(c.s_offset), list(c.s_ops))
    from bisect import bisect_left
    from itertools import accumulate

    if c.s_ops and adds[0] < c.s_ops[-1][0]:
        at = [e[0] for e in c.s_ops]
        rows = [0, *accumulate(e[3] for e in c.s_ops)]
    else:
        at = rows = None
    for pos in reversed(adds):  # from the end, so earlier insertion points stay valid
        op = ops[pos]
        v = op["value"]
        if op["f"] == "txn":
            recs = [m for m in v["ops"] if m["f"] == "send"]
        else:
            recs = v["records"] if "records" in v else [v]
        if at is None:
            k, row = len(new.s_ops), len(new.s_topic)
        else:
            k = bisect_left(at, pos)
            row = rows[k]
        new.s_topic[row:row] = list(map(_TOPIC, recs))
        new.s_partition[row:row] = list(map(_PARTITION, recs))
        new.s_value[row:row] = list(map(_VALUE, recs))
        new.s_offset[row:row] = [None] * len(recs)
        new.s_ops[k:k] = [(pos, op["process"], "info", len(recs))]
        if new.values_all_int and any(x.__class__ is not int for x in map(_VALUE, recs)):
            new.values_all_int = False
    return new

