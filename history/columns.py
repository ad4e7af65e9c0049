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
    send completion: ok, info or fail), and the operations that reset a consumer's position tracking."""

    __slots__ = ("n_ops", "p_topic", "p_partition", "p_offset", "p_value", "p_ops",
                 "s_topic", "s_partition", "s_value", "s_offset", "s_ops", "events", "values_all_int")

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
        self.events: list[tuple[int, int, str, object]] = []  # (position, process, f, value): assign, subscribe, crash

    @classmethod
    def collect(cls, ops: Sequence[dict]) -> RecordColumns:
        """Columns of ``ops`` (a run's operations in index order)."""
        c = cls()
        pt, pp, po, pv = c.p_topic.extend, c.p_partition.extend, c.p_offset.extend, c.p_value.extend
        st, sp, sv, so = c.s_topic.append, c.s_partition.append, c.s_value.append, c.s_offset.append
        stx, spx, svx, sox = c.s_topic.extend, c.s_partition.extend, c.s_value.extend, c.s_offset.extend
        p_ops, s_ops, events = c.p_ops.append, c.s_ops.append, c.events.append
        for pos, op in enumerate(ops):
            typ = op["type"]
            if typ == "invoke":
                continue
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
            elif f == "assign" or f == "subscribe":
                if typ != "fail":
                    events((pos, op["process"], f, op["value"]))
            elif f == "crash":
                events((pos, op["process"], f, None))
        c.n_ops = len(ops)
        return c
