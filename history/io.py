"""Validated reading and writing of histories as JSON Lines and Parquet (one schema; see history.schema).

Every reader validates as it goes: a corrupt or truncated line raises :class:`HistoryError` naming the file and
line, so a checker never sees malformed data. ``skip_corrupt=True`` instead skips such lines with a
``CorruptLineWarning`` (and drops completions whose invoke was skipped, so pairing stays sound).

A JSONL file of one well-formed run is read on the typed path first (history.typed: msgspec structs, checks on
whole columns); its ``History.ops`` dicts are parsed from the kept lines only when asked for (``op_view()``
serves single operations). Any doubt there, and the fast path below, then the exact path, read the file.
"""

from __future__ import annotations

import gc
import glob
import gzip
import io
import json
import os
import re
import warnings
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import accumulate, compress, groupby, repeat
from operator import itemgetter
from typing import Any

try:  # orjson parses history lines several times faster; the standard library is the fallback
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where orjson is absent
    from json import loads as _loads

from .columns import _OFFSET, _PARTITION, _TOPIC, _VALUE, RecordColumns, _offset_or_none
from .schema import (
    COMPLETIONS,
    METADATA_FS,
    NEMESIS_PROCESS,
    TYPES,
    HistoryError,
    dumps,
    validate_header,
    validate_op,
)
from .typed import Op, read_typed, to_typed

# orjson reads an integer beyond 64 bits as a float (10**40 and 10**40 + 1 become the same value, a false
# duplicate). Text with a run of 20 digits (every such integer has one) is parsed by the standard library, which
# keeps integers exact; NaN and Infinity, which it would accept and orjson does not, are refused as orjson does.
# A block of lines is tested for such a run at once (digits mapped to "0" by bytes.translate, then one substring
# search: about 0.7 GB/s, where a regular expression managed 67 MB/s); a single line by a regular expression.
_BIG_INT = re.compile(r"\d{20}")
_DIGITS = bytes(48 if 48 <= i <= 57 else 120 for i in range(256))  # digit -> "0", anything else -> "x"
_DIGIT_RUN = b"0" * 20


def _big_ints(texts: list) -> bool:
    """Whether any of ``texts`` (str) has a run of 20 digits."""
    return _DIGIT_RUN in "\n".join(texts).encode("utf-8", "surrogatepass").translate(_DIGITS)


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


def _loads_exact(text: str | bytes) -> Any:
    """``_loads`` with integers of any size kept exact."""
    if _BIG_INT.search(text) is None:
        return _loads(text)
    return json.loads(text, parse_constant=_no_constant)





class CorruptLineWarning(UserWarning):
    """A corrupt line was skipped because the caller asked for ``skip_corrupt``."""


class IndeterminateWarning(UserWarning):
    """After a skipped line, an operation was left without its completion: it is indeterminate, like ``info``."""


@dataclass
class History:
    """One run: its header fields and its operations in index order.

    ``columns``: the run's records as :class:`~history.columns.RecordColumns`, gathered by the reader in the same
    pass that validated them (None when a block of the run took the exact path, or for runs built in memory).
    They describe ``ops`` as read: code that edits operations in place must set ``columns`` to None (a checker
    given columns uses them only if they cover exactly ``len(ops)`` operations)."""

    run_id: str
    ops: list[dict] = field(default_factory=list)
    target: str = "unknown"
    nemesis: str | None = None
    settings: dict = field(default_factory=dict)
    columns: RecordColumns | None = field(default=None, repr=False, compare=False)
    # Lines (Parquet: rows) of the input skipped with ``skip_corrupt`` that may have held this run's operations:
    # its own, and those whose run could not be told. A checker proves nothing from the absence of an operation
    # then (reports.anomalies.RESTS_ON_ABSENCE).
    skipped_lines: list[int] = field(default_factory=list, compare=False)

    def header_line(self) -> dict:
        body: dict[str, Any] = {"target": self.target, "settings": self.settings}
        if self.nemesis is not None:
            body["nemesis"] = self.nemesis
        return {"run_id": self.run_id, "header": body}

    def typed_ops(self) -> list[Op]:
        """The operations as typed structs (history.typed), what the linearizability extraction reads: the ones the
        typed path decoded (until ``ops`` is set), else ``ops`` converted, every time (they may have been edited)."""
        typed = self.__dict__.get("_typed")
        return to_typed(self.ops) if typed is None else typed

    def op_view(self) -> Sequence[dict]:
        """The operations as a sequence that builds only the ones asked for (``ops`` builds them all): what a
        checker given ``columns`` needs (the count, and single operations for evidence)."""
        lazy = self.__dict__.get("_lazy")
        return self.ops if lazy is None else lazy


class _LazyOps(Sequence):
    """A run's operations kept as the raw JSONL lines the typed path read (history.typed): parsed all at once
    into ``History.ops`` when something asks for that list, one at a time for :meth:`History.op_view`.
    The lines are the ones the other paths would have parsed, by the same parser, so the dicts are theirs."""

    def __init__(self, chunks: list[bytes], counts: list[int]) -> None:
        self.chunks = chunks
        self.starts = [0, *accumulate(counts)]
        self.split: dict[int, list[bytes]] = {}

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, i):  # noqa: ANN001, ANN204 - as list's
        if not isinstance(i, int):
            return self.materialize()[i]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("operation index out of range")
        k = bisect_right(self.starts, i) - 1
        lines = self.split.get(k)
        if lines is None:
            lines = self.split[k] = self.chunks[k].split(b"\n")
        return _loads_exact(lines[i - self.starts[k]].decode("utf-8"))

    def __iter__(self) -> Iterator[dict]:
        return iter(self.materialize())

    def materialize(self, young_gc: bool = False) -> list[dict]:
        """Every operation, parsed; ``young_gc``: collect the youngest generation after each chunk (the caller
        paused the collector, see gc_paused)."""
        out: list[dict] = []
        for chunk in self.chunks:
            lines = chunk.split(b"\n")
            if not lines[-1]:
                lines.pop()
            if _DIGIT_RUN in chunk.translate(_DIGITS):
                out += [_loads_exact(x.decode("utf-8")) for x in lines]
            else:
                out += map(_loads, lines)
            if young_gc:
                _young_gc()
        return out


def _get_ops(self: History) -> list[dict]:
    lazy = self.__dict__.get("_lazy")
    if lazy is not None:
        with gc_paused() as ours:
            self.__dict__["_ops"] = lazy.materialize(ours)
        self.__dict__["_lazy"] = None
    return self.__dict__["_ops"]


def _set_ops(self: History, ops: list[dict]) -> None:
    self.__dict__["_ops"] = ops
    self.__dict__["_lazy"] = None
    self.__dict__["_typed"] = None


# ``ops`` is a property so that a run read on the typed path builds its operation dicts only when asked
History.ops = property(_get_ops, _set_ops, doc="The run's operations (dicts) in index order.")  # type: ignore[assignment]


_TYPES = frozenset(TYPES)
_OP_COLUMNS = ("run_id", "index", "time_ns", "process", "type", "f", "value")
_SCALAR_CLASSES = frozenset((str, int, float, bool, type(None)))
_BIG_FLOAT = 9.2e18  # a float this large may be an integer beyond 64 bits that orjson could not hold


def _plainly_valid(op: Any) -> bool:
    """True only for an operation :func:`validate_op` certainly accepts: the sends and polls that make up most
    of a history, checked flat (subscripts, no call per record) with exact classes. Anything else, or anything
    doubtful, returns False and goes to :func:`validate_op`, which accepts it or gives the reason."""
    if op.__class__ is not dict:
        return False
    try:
        if (op["run_id"].__class__ is not str or op["index"].__class__ is not int
                or op["time_ns"].__class__ is not int or op["process"].__class__ is not int):
            return False
        typ = op["type"]
        f = op["f"]
        if typ.__class__ is not str or typ not in _TYPES or f.__class__ is not str:
            return False
        if f == "poll":
            if typ != "ok":
                return True  # a poll invoke or an unsuccessful poll carries nothing the contract checks
            v = op["value"]
            recs = v["records"]
            if recs.__class__ is not list or "positions" in v:
                return False
            for r in recs:
                if (r.__class__ is not dict or r["topic"].__class__ is not str
                        or r["partition"].__class__ is not int or r["offset"].__class__ is not int
                        or r["value"].__class__ not in _SCALAR_CLASSES):
                    return False
            return True
        if f == "send":
            r = op["value"]
            if r.__class__ is not dict or "records" in r:
                return False
            off = r.get("offset")
            return (r["topic"].__class__ is str and r["partition"].__class__ is int
                    and (off is None or off.__class__ is int) and r["value"].__class__ in _SCALAR_CLASSES)
    except (KeyError, TypeError):
        return False
    return False


class _RunBuilder:
    """Per-run cross-line checks: increasing index, monotonic time, invoke/complete pairing."""

    __slots__ = ("hist", "last_index", "last_time", "in_flight", "cols")

    def __init__(self, hist: History) -> None:
        self.hist = hist
        self.last_index = -1
        self.last_time = -(1 << 62)
        self.in_flight: dict[int, str] = {}
        self.cols: RecordColumns | None = RecordColumns(values_all_int=True)  # None once the exact path added ops

    def add(self, op: dict, lenient: bool = False) -> None:
        """Append ``op`` after the cross-line checks. ``lenient`` (a corrupt line was skipped before, so a
        completion may be missing): an invoke on a process with one in flight leaves that one without a
        completion, which makes it indeterminate, like ``info``, instead of rejecting every later operation of
        the process."""
        self.cols = None  # the exact path does not gather columns: the checker gathers its own for this run
        idx, t = op["index"], op["time_ns"]
        if idx <= self.last_index:
            raise HistoryError(f"index {idx} does not increase (previous {self.last_index})")
        if t < self.last_time:
            raise HistoryError(f"time_ns {t} goes backwards (previous {self.last_time})")
        p, typ, f = op["process"], op["type"], op["f"]
        if p != NEMESIS_PROCESS:
            if typ == "invoke":
                if p in self.in_flight:
                    if not lenient:
                        raise HistoryError(f"process {p} invokes {f} while {self.in_flight[p]} is in flight")
                    warnings.warn(f"process {p}: {self.in_flight[p]} left without a completion (indeterminate)",
                                  IndeterminateWarning, stacklevel=4)
                self.in_flight[p] = f
            else:
                pending = self.in_flight.pop(p, None)
                if pending is None:
                    raise HistoryError(f"{typ} {f} on process {p} without an invoke")
                if pending != f:
                    raise HistoryError(f"{typ} {f} on process {p} completes an invoke of {pending}")
        self.last_index, self.last_time = idx, t
        self.hist.ops.append(op)


def _last_invokes(ops: list[dict], in_flight: dict[int, str]) -> list[int]:
    """Positions of the invokes still in flight at the end of a run (each its process's last operation), found
    from the end backwards: usually a few operations from the end, at worst one pass."""
    want = set(in_flight)
    want.discard(NEMESIS_PROCESS)
    out = []
    pos = len(ops)
    while want and pos:
        pos -= 1
        p = ops[pos]["process"]
        if p in want:
            want.discard(p)
            out.append(pos)
    return sorted(out)


def _header_fields(hist: History, body: dict) -> None:
    hist.target = body.get("target") or "unknown"
    hist.nemesis = body.get("nemesis")
    hist.settings = dict(body.get("settings") or {})


# ---------------------------------------------------------------- fast path
#
# Readers take JSONL input in blocks of lines and try each block on a fast path first: the lines parsed in one
# C-level map, then one tight loop per run that checks each operation flat, with exact classes, and does the run
# builder's work (index and time order, invoke/completion pairing) in local variables. The fast path accepts a
# subset of what the exact path accepts and builds the very same runs. On anything it does not certainly accept
# (a corrupt line, a doubtful shape, a pairing it cannot follow) it takes the block back and the exact path (one
# line at a time, as before) reads that block, starting from the state the fast path reached, which is the state
# the exact path would have reached on those lines. So every error and warning (message, line number,
# ``skip_corrupt`` behaviour) is the exact path's, and a corrupt line costs only its block. Parquet tables go the
# same way in blocks of rows, except that any doubt sends the whole table to the exact path.
# tests/history/test_fast_path.py holds the two paths to giving the same answers.

_FAST = True  # tests switch the fast path off to get the exact path's answers for comparison
_BLOCK_LINES = 512  # lines the fast path takes at a time (parsed objects still in cache when checked; a block
# it gives up on is what the exact path redoes)
_BLOCK_BYTES = 1 << 22  # JSONL files are read in blocks of whole lines, so memory stays small


class _Doubt(Exception):
    """The fast path does not certainly accept its input; the exact path decides."""


# What the fast path may raise on input it does not accept (a missing key, a subscript of a non-dict, a corrupt
# line, a bad header, undecodable bytes, an unreadable file): each one only means "let the exact path decide".
_GIVE_UP = (_Doubt, KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError,
            OSError, EOFError)

_dict_has = dict.__contains__

# The keys the fast path looks up, parsed by the same parser as the lines. orjson hands out one cached str object
# per key name, so lookups with these very objects match by identity and skip comparing characters; where a
# parser does not cache (the standard library), they are merely equal strings and lookups work as usual.
_KEY_NAMES = ("run_id", "index", "time_ns", "process", "type", "f", "value", "records", "topic", "partition",
              "offset", "group", "offsets", "partitions", "topics", "positions")
_KEY_TEMPLATE = "{" + ",".join(f'"{k}":0' for k in _KEY_NAMES) + "}"


def _parsed_keys() -> tuple[str, ...]:
    keys = tuple(_loads(_KEY_TEMPLATE))
    return keys if keys == _KEY_NAMES else _KEY_NAMES


@contextmanager
def gc_paused() -> Iterator[bool]:
    """Pause the cyclic garbage collector's own collections while runs are built or checked; yields whether it did
    (not if the caller had switched the collector off).

    Left alone, the collector walks the young objects every few hundred new containers (cheap: they are still
    in cache) and, ever more often as they pile up, the older generations, which means walking the growing runs
    again and again. Instead the readers collect the youngest generation themselves after each block of lines
    (:func:`_young_gc`), while the block's objects are still in cache, and the older collections wait until the
    read is over. Runs hold no reference cycles; reference counting frees everything as usual."""
    if not gc.isenabled():
        yield False
        return
    gc.disable()
    try:
        yield True
    finally:
        gc.enable()


def _young_gc() -> None:
    gc.collect(0)


class _Runs:
    """The runs of one input as they are built (run id -> :class:`_RunBuilder`, in order of first appearance:
    the exact path's state), and what the fast path needs to take back a block it gave up on."""

    def __init__(self) -> None:
        self.builders: dict[str, _RunBuilder] = {}
        self.keys = _parsed_keys()
        self._saved: dict[str, tuple | None] = {}  # this block's runs as they were before it (None: new)

    def histories(self) -> list[History]:
        out = []
        for rb in self.builders.values():
            h = rb.hist
            if rb.cols is not None:
                rb.cols.n_ops = len(h.ops)
                rb.cols.pending = _last_invokes(h.ops, rb.in_flight)
                h.columns = rb.cols
            out.append(h)
        return out

    def begin(self) -> None:
        self._saved = {}

    def rollback(self) -> None:
        for rid, saved in self._saved.items():
            if saved is None:
                del self.builders[rid]
                continue
            rb = self.builders[rid]
            h = rb.hist
            rb.last_index, rb.last_time, rb.in_flight, n, h.target, h.nemesis, h.settings = saved
            del h.ops[n:]
            rb.cols = None  # partly gathered: the checker gathers its own for this run
        self._saved = {}

    def state(self, rid: Any) -> _RunBuilder:
        """The builder of run ``rid`` (created if new), remembering how it was before this block."""
        rb = self.builders.get(rid)
        if rb is None:
            if rid.__class__ is not str:
                raise _Doubt
            rb = self.builders[rid] = _RunBuilder(History(rid))
            self._saved[rid] = None
        elif rid not in self._saved:
            h = rb.hist
            self._saved[rid] = (rb.last_index, rb.last_time, dict(rb.in_flight), len(h.ops), h.target, h.nemesis,
                                h.settings)
        return rb

    def add_objects(self, objs: list) -> None:
        """Parsed lines in file order: headers and operations."""
        flags = list(map(_dict_has, objs, repeat("header")))  # TypeError for anything but an object
        if not any(flags):
            if objs:
                self.add_ops(objs)
            return
        start = 0
        for k in compress(range(len(objs)), flags):
            if start < k:
                self.add_ops(objs[start:k])
            hdr = objs[k]
            body = validate_header(hdr)  # a HistoryError is a ValueError: the exact path gives the reason
            _header_fields(self.state(hdr["run_id"]).hist, body)
            start = k + 1
        if start < len(objs):
            self.add_ops(objs[start:])

    def add_ops(self, ops: list) -> None:
        """Operations (objects without a ``header`` key) in file order, taken in stretches of one run each."""
        rids = list(map(itemgetter(self.keys[0]), ops))
        first = rids[0]
        if rids.count(first) == len(rids):
            _plain_run(ops, self.state(first), self.keys)
            return
        k = 0
        for rid, group in groupby(rids):
            m = len(list(group))
            _plain_run(ops[k:k + m], self.state(rid), self.keys)
            k += m


def _plain_run(ops: list, rb: _RunBuilder, keys: tuple[str, ...]) -> None:
    """Check operations of one run (each a dict with that ``run_id``) as validate_op and _RunBuilder.add would,
    accepting only what they certainly accept, and append them to the run; raise on anything else.

    Exact classes throughout (a bool is not an int, a subclass is not its base): stricter than validate_op's
    isinstance checks where they differ, never looser. One loop of plain subscripts and comparisons with no call
    per operation or record, because this is where a reader spends its time once the lines are parsed."""
    _int, _str, _dict, _list, _type, scalars = int, str, dict, list, type, _SCALAR_CLASSES
    _float, big = float, _BIG_FLOAT
    (_, k_index, k_time, k_process, k_type, k_f, k_value, k_records, k_topic, k_partition, k_offset, k_group,
     k_offsets, k_partitions, k_topics, k_positions) = keys
    last_i, last_t, in_flight = rb.last_index, rb.last_time, rb.in_flight
    pending = in_flight.pop
    # The checker's columns (history.columns), gathered here while each record is at hand: C-level maps per
    # operation, nothing per record but the value's class, which the checks below look at anyway.
    cols = rb.cols
    gather = cols is not None
    all_int = True
    if gather:
        pt, pp, po, pv, p_ops = (cols.p_topic.extend, cols.p_partition.extend, cols.p_offset.extend,
                                 cols.p_value.extend, cols.p_ops.append)
        st, sp, sv, so, s_ops = (cols.s_topic.append, cols.s_partition.append, cols.s_value.append,
                                 cols.s_offset.append, cols.s_ops.append)
        stx, spx, svx, sox = cols.s_topic.extend, cols.s_partition.extend, cols.s_value.extend, cols.s_offset.extend
        events = cols.events.append
    for pos, op in enumerate(ops, len(rb.hist.ops)):
        i = op[k_index]
        t = op[k_time]
        p = op[k_process]
        typ = op[k_type]
        f = op[k_f]
        if _type(i) is not _int or _type(t) is not _int or _type(p) is not _int or i <= last_i or t < last_t:
            raise _Doubt
        last_i = i
        last_t = t
        if typ == "invoke":
            if p != -1:  # NEMESIS_PROCESS: outside the invoke/completion protocol
                if p in in_flight:
                    raise _Doubt
                in_flight[p] = f
        elif typ == "ok" or typ == "info" or typ == "fail":
            if p != -1 and pending(p, None) != f:
                raise _Doubt
        else:
            raise _Doubt
        # Records: r[...] raises TypeError unless r is an object (a dict: parsed JSON has no other mapping).
        if f == "send":
            v = op[k_value]
            if _type(v) is not _dict:
                raise _Doubt
            if k_records not in v:
                if (_type(v[k_topic]) is not _str or _type(v[k_partition]) is not _int
                        or _type(v[k_value]) not in scalars
                        or (k_offset in v and v[k_offset] is not None and _type(v[k_offset]) is not _int)):
                    raise _Doubt
                if _type(v[k_value]) is _float and not -big < v[k_value] < big:
                    raise _Doubt
                if gather and typ != "invoke":
                    st(v[k_topic])
                    sp(v[k_partition])
                    sv(v[k_value])
                    so(v.get(k_offset))
                    s_ops((pos, p, typ, 1))
                    if _type(v[k_value]) is not _int:
                        all_int = False
                continue
            recs = v[k_records]
            if _type(recs) is not _list or not recs:
                raise _Doubt
            for r in recs:
                if (_type(r[k_topic]) is not _str or _type(r[k_partition]) is not _int
                        or _type(r[k_value]) not in scalars
                        or (k_offset in r and r[k_offset] is not None and _type(r[k_offset]) is not _int)):
                    raise _Doubt
                if _type(r[k_value]) is not _int:
                    all_int = False
                    if _type(r[k_value]) is _float and not -big < r[k_value] < big:
                        raise _Doubt
            if gather and typ != "invoke":
                stx(map(_TOPIC, recs))
                spx(map(_PARTITION, recs))
                svx(map(_VALUE, recs))
                sox(map(_offset_or_none, recs))
                s_ops((pos, p, typ, len(recs)))
        elif f == "poll":
            if typ == "ok":
                v = op[k_value]
                recs = v[k_records]
                if _type(recs) is not _list:
                    raise _Doubt
                if k_positions in v:
                    positions = v[k_positions]
                    if _type(positions) is not _dict:
                        raise _Doubt
                    for k, o in positions.items():
                        if "/" not in k or _type(o) is not _int or o < 0:
                            raise _Doubt
                for r in recs:
                    if (_type(r[k_topic]) is not _str or _type(r[k_partition]) is not _int
                            or _type(r[k_offset]) is not _int):
                        raise _Doubt
                    if _type(r[k_value]) is not _int:
                        if _type(r[k_value]) not in scalars or (
                                _type(r[k_value]) is _float and not -big < r[k_value] < big):
                            raise _Doubt
                        all_int = False
                if gather and recs:
                    pt(map(_TOPIC, recs))
                    pp(map(_PARTITION, recs))
                    po(map(_OFFSET, recs))
                    pv(map(_VALUE, recs))
                    p_ops((pos, p, len(recs)))
            elif typ == "info" and gather:  # may have moved the consumer's position (history.columns)
                events((pos, p, f, None))
        elif f == "commit" or f == "fetch_offsets":
            v = op[k_value]
            if _type(v) is not _dict or _type(v[k_group]) is not _str:
                raise _Doubt
            if f == "commit" or typ == "ok":
                offs = v[k_offsets]
                if _type(offs) is not _dict:
                    raise _Doubt
                for k, o in offs.items():
                    if "/" not in k or (o is not None and _type(o) is not _int):
                        raise _Doubt
        elif f == "assign":
            parts = op[k_value][k_partitions]
            if _type(parts) is not _list:
                raise _Doubt
            for k in parts:
                if _type(k) is not _str or "/" not in k:
                    raise _Doubt
            if gather and typ != "invoke" and typ != "fail":
                events((pos, p, f, op[k_value]))
        elif f == "subscribe":
            if _type(op[k_value][k_topics]) is not _list:
                raise _Doubt
            if gather and typ != "invoke" and typ != "fail":
                events((pos, p, f, op[k_value]))
        elif f == "crash":
            if gather and typ != "invoke":
                events((pos, p, f, None))
        elif f == "txn":  # its micro-operations are checked on the exact path (history.schema.check_txn)
            raise _Doubt
        elif f in METADATA_FS:  # checked on the exact path too (history.schema.check_metadata)
            raise _Doubt
        elif _type(f) is not _str or not f:
            raise _Doubt
    rb.last_index, rb.last_time = last_i, last_t
    rb.hist.ops.extend(ops)
    if gather and not all_int:
        cols.values_all_int = False


class _LineReader:
    """JSON Lines -> runs: blocks of lines on the fast path, any block it gives up on on the exact path."""

    def __init__(self, path: str | None, skip_corrupt: bool, young_gc: bool = False) -> None:
        self.path = path
        self.skip_corrupt = skip_corrupt
        self.young_gc = young_gc  # collect the youngest generation after each block (see gc_paused)
        self.runs = _Runs()
        self.skipped_invokes: set[tuple[str, int]] = set()
        self.skipped = False  # a line was skipped (skip_corrupt): pairing is lenient from then on
        self.skipped_lines: list[tuple[str | None, int]] = []  # (run id, or None if unknown; line number)
        self.lineno = 0  # lines read so far

    def histories(self) -> list[History]:
        return _with_skipped(self.runs.histories(), self.skipped_lines)

    def feed(self, lines: list, *, fast: bool = True) -> None:
        """The next lines of the input; ``fast=False`` starts with a block the fast path already gave up on."""
        base, n, pos = self.lineno, len(lines), 0
        while pos < n:
            end = min(pos + _BLOCK_LINES, n)
            block = lines[pos:end] if pos or end < n else lines
            # The fast path knows nothing of completions to drop after a corrupt invoke: none may be pending.
            if not (fast and _FAST and not self.skipped_invokes and self._fast(block)):
                self.exact(enumerate(block, base + pos + 1))
            if self.young_gc:
                _young_gc()
            fast = True
            pos = end
        self.lineno = base + n

    def fast_prefix(self, lines: list) -> int:
        """Take lines on the fast path only, until a block it gives up on; returns how many it took."""
        n, pos = len(lines), 0
        while pos < n:
            end = min(pos + _BLOCK_LINES, n)
            if not self._fast(lines[pos:end] if pos or end < n else lines):
                break
            if self.young_gc:
                _young_gc()
            pos = end
        self.lineno += pos
        return pos

    def _fast(self, block: list) -> bool:
        runs = self.runs
        runs.begin()
        try:
            # The exact path parses each line stripped of whitespace and skips blank lines. Unstripped lines
            # parse to the same values or fail: both parsers allow only JSON whitespace around a value, which
            # str.strip removes too, and a value neither starts nor ends with whitespace. A line that fails
            # (e.g. one of spaces only) gives the block to the exact path.
            if "" in block:
                block = [x for x in block if x]
            runs.add_objects(list(map(_loads_exact if _big_ints(block) else _loads, block)))
        except _GIVE_UP:
            runs.rollback()
            return False
        return True

    def exact(self, numbered: Iterable[tuple[int, str]], *, stream: bool = False) -> None:
        """The exact path: one line at a time, every error named with its line. For a ``stream`` (the whole
        input, not a block) it also collects the youngest generation every block's worth of lines."""
        path, skip_corrupt, skipped_invokes = self.path, self.skip_corrupt, self.skipped_invokes
        runs = self.runs.builders
        collect = stream and self.young_gc
        for lineno, raw in numbered:
            if collect and not lineno % _BLOCK_LINES:
                _young_gc()
            line = raw.strip()
            if not line:
                continue
            try:
                try:
                    obj = _loads_exact(line)
                except json.JSONDecodeError as e:
                    raise HistoryError(f"corrupt or truncated JSON ({e.msg} at column {e.colno})") from None
                except RecursionError:
                    raise HistoryError("JSON nested too deeply") from None
                except ValueError as e:  # e.g. an integer beyond the interpreter's digit limit
                    raise HistoryError(f"unreadable JSON ({e})") from None
                if isinstance(obj, dict) and "header" in obj:
                    body = validate_header(obj)
                    rb = runs.get(obj["run_id"])
                    if rb is None:
                        rb = runs[obj["run_id"]] = _RunBuilder(History(obj["run_id"]))
                    _header_fields(rb.hist, body)
                    continue
                op = obj if _plainly_valid(obj) else validate_op(obj)
                rid = op["run_id"]
                rb = runs.get(rid)
                if rb is None:
                    rb = runs[rid] = _RunBuilder(History(rid))
                if skip_corrupt and op["type"] in COMPLETIONS and (rid, op["process"]) in skipped_invokes:
                    skipped_invokes.discard((rid, op["process"]))
                    self.skipped_lines.append((rid, lineno))
                    warnings.warn(
                        f"{path or 'history'}:{lineno}: dropped completion whose invoke was corrupt",
                        CorruptLineWarning,
                        stacklevel=2,
                    )
                    continue
                rb.add(op, lenient=self.skipped)
            except HistoryError as e:
                if not skip_corrupt:
                    raise HistoryError(e.reason, line=lineno, path=path) from None
                warnings.warn(f"{path or 'history'}:{lineno}: skipped: {e.reason}", CorruptLineWarning, stacklevel=2)
                self.skipped = True
                rid = None
                try:  # remember a skipped invoke so its completion is dropped too
                    o = _loads_exact(line)
                    if isinstance(o, dict):
                        rid = o.get("run_id") if isinstance(o.get("run_id"), str) else None
                        if o.get("type") == "invoke":
                            skipped_invokes.add((o.get("run_id"), o.get("process")))
                except (json.JSONDecodeError, TypeError, RecursionError, ValueError):
                    pass
                self.skipped_lines.append((rid, lineno))


def _with_skipped(runs: list[History], skipped: list[tuple[str | None, int]]) -> list[History]:
    """Give each run the skipped lines that were its own or whose run could not be told."""
    for h in runs:
        h.skipped_lines = sorted(n for rid, n in skipped if rid is None or rid == h.run_id)
    return runs


def iter_lines_validated(
    lines: Iterable[str], *, path: str | None = None, skip_corrupt: bool = False
) -> list[History]:
    """Parse JSONL text lines into runs, validating each line and the pairing across lines."""
    with gc_paused() as ours:
        reader = _LineReader(path, skip_corrupt, young_gc=ours)
        if isinstance(lines, list):
            reader.feed(lines)
        else:  # a stream (e.g. a file): one line at a time, as it comes
            reader.exact(enumerate(lines, 1), stream=True)
        return reader.histories()


def _open_text(path: str) -> io.TextIOBase:
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115


def _text_lines(data: bytes) -> list[str]:
    """Lines of whole-line UTF-8 ``data`` as iterating over the file in text mode yields them (up to the line
    end, which stripping removes): lines end at ``\\n`` or ``\\r\\n``; a lone ``\\r`` (also a line end in text
    mode) is left to the exact path."""
    text = data.decode("utf-8")
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        raise _Doubt
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    return lines


def _jsonl_blocks(path: str) -> Iterator[list[str]]:
    """A JSONL file's lines in blocks of whole lines; raises on anything unreadable or undecodable."""
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as fh:  # noqa: SIM115
        tail: list[bytes] = []  # the start of a line that goes on in the next chunk
        while chunk := fh.read(_BLOCK_BYTES):
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                tail.append(chunk)
                continue
            yield _text_lines(b"".join([*tail, chunk[:cut]]) if tail else chunk[:cut])
            tail = [chunk[cut:]] if cut < len(chunk) else []
        if tail:
            yield _text_lines(b"".join(tail))


def _read_jsonl_fast(path: str, skip_corrupt: bool, young_gc: bool) -> list[History] | None:
    """The fast path over a JSONL file, or None if the exact path must read it from the start.

    The exact path streams the file in text mode and reports undecodable bytes (or a broken gzip stream) when its
    read-ahead gets to them, which may be before or after it judged (and maybe rejected) the lines just before
    them. So the exact path may take over here only once the rest of the file is known to be readable and
    decodable: it is read first, and anything wrong with it means starting over on the exact path, before any
    line has been judged there (and any warning given)."""
    reader = _LineReader(path, skip_corrupt, young_gc)
    blocks = _jsonl_blocks(path)
    try:
        for lines in blocks:
            taken = reader.fast_prefix(lines)
            if taken < len(lines):
                rest = [lines[taken:], *blocks]
                break
        else:
            return reader.histories()
    except _GIVE_UP:
        return None
    finally:
        blocks.close()
    fast = False  # the first block of the rest is one the fast path gave up on
    for lines in rest:
        reader.feed(lines, fast=fast)
        fast = True
    return reader.histories()


def _typed_history(rid: str, body: dict | None, chunks: list[bytes], counts: list[int],
                   cols: RecordColumns, typed: list[Op]) -> History:
    h = History(rid)
    if body is not None:
        _header_fields(h, body)
    h.__dict__["_lazy"] = _LazyOps(chunks, counts)  # (no reference back to h: no cycle to wait for the GC)
    h.columns = cols
    h.__dict__["_typed"] = typed
    return h


def read_jsonl(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read every run in a JSONL (optionally .gz) file."""
    with gc_paused() as ours:
        if _FAST:
            typed = read_typed(path, ours)
            if typed is not None:
                return [_typed_history(*typed)]
            runs = _read_jsonl_fast(path, skip_corrupt, ours)
            if runs is not None:
                return runs
        try:
            with _open_text(path) as fh:
                return iter_lines_validated(fh, path=path, skip_corrupt=skip_corrupt)
        except UnicodeDecodeError as e:
            raise HistoryError(f"not UTF-8 text ({e.reason})", path=path) from None
        except (EOFError, gzip.BadGzipFile, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise HistoryError("no such file", path=path) from None
            raise HistoryError(f"cannot read: {e}", path=path) from None


def write_jsonl(histories: History | Iterable[History], path: str) -> None:
    """Write runs as JSONL: a header line, then one line per operation."""
    hs = [histories] if isinstance(histories, History) else list(histories)
    opener = gzip.open(path, "wt", encoding="utf-8") if path.endswith(".gz") else open(path, "w", encoding="utf-8")
    with opener as fh:
        for h in hs:
            fh.write(dumps(h.header_line()) + "\n")
            for op in h.ops:
                fh.write(dumps(op) + "\n")


# ---------------------------------------------------------------- Parquet

def _arrow_schema():  # noqa: ANN202 - pyarrow is imported lazily
    import pyarrow as pa

    return pa.schema(
        [
            ("run_id", pa.string()),
            ("index", pa.int64()),
            ("time_ns", pa.int64()),
            ("process", pa.int64()),
            ("type", pa.string()),
            ("f", pa.string()),
            ("value", pa.string()),
            ("target", pa.string()),
            ("nemesis", pa.string()),
            ("settings", pa.string()),
        ]
    )


def to_arrow(histories: Iterable[History]):  # noqa: ANN201
    """Runs as one Arrow table with the Parquet schema (``value`` and ``settings`` as JSON text)."""
    import pyarrow as pa

    cols: dict[str, list] = {n: [] for n in _arrow_schema().names}
    for h in histories:
        settings = dumps(h.settings)
        for op in h.ops:
            cols["run_id"].append(op["run_id"])
            cols["index"].append(op["index"])
            cols["time_ns"].append(op["time_ns"])
            cols["process"].append(op["process"])
            cols["type"].append(op["type"])
            cols["f"].append(op["f"])
            cols["value"].append(dumps(op.get("value")))
            cols["target"].append(h.target)
            cols["nemesis"].append(h.nemesis)
            cols["settings"].append(settings)
    return pa.table(cols, schema=_arrow_schema())


def write_parquet(histories: History | Iterable[History], path: str) -> None:
    """Write runs to one Parquet file."""
    import pyarrow.parquet as pq

    hs = [histories] if isinstance(histories, History) else list(histories)
    pq.write_table(to_arrow(hs), path)


def from_arrow(table, *, path: str | None = None, skip_corrupt: bool = False) -> list[History]:  # noqa: ANN001
    """Validate an Arrow table with the Parquet schema into runs; errors name the row (1-based)."""
    missing = [c for c in _OP_COLUMNS if c not in table.column_names]
    if missing:
        raise HistoryError(f"Parquet file lacks columns {missing}", path=path)
    with gc_paused() as ours:
        if _FAST:
            try:
                return _fast_arrow(table, ours)
            except _GIVE_UP:
                pass
        return _from_arrow_exact(table, path=path, skip_corrupt=skip_corrupt)


def _fast_arrow(table, young_gc: bool) -> list[History]:  # noqa: ANN001
    """The fast path over an Arrow table: whole columns converted at once, then values parsed, operations built
    and checked as JSONL lines are, a block of rows at a time. Header fields come from each run's first row, as
    in the exact path. Any doubt: the exact path reads the whole table."""
    rids, idxs, times, procs, typs, fs, raws = (table.column(c).to_pylist() for c in _OP_COLUMNS)
    runs = _Runs()
    k0, k1, k2, k3, k4, k5, k6 = runs.keys[:7]
    for b in range(0, len(rids), _BLOCK_LINES):
        e = b + _BLOCK_LINES
        block = raws[b:e]
        if None in block:
            vals = [None if r is None else _loads_exact(r) for r in block]
        else:
            vals = list(map(_loads_exact if _big_ints(block) else _loads, block))
        runs.add_ops([{k0: r, k1: i, k2: t, k3: p, k4: ty, k5: f, k6: v} for r, i, t, p, ty, f, v in zip(
            rids[b:e], idxs[b:e], times[b:e], procs[b:e], typs[b:e], fs[b:e], vals, strict=True)])
        if young_gc:
            _young_gc()
    names = table.column_names
    out = runs.histories()
    for h in out:
        i = rids.index(h.run_id)
        h.target = (table.column("target")[i].as_py() if "target" in names else None) or "unknown"
        h.nemesis = table.column("nemesis")[i].as_py() if "nemesis" in names else None
        settings = table.column("settings")[i].as_py() if "settings" in names else None
        if settings:
            h.settings = json.loads(settings)
    return out


def _from_arrow_exact(table, *, path: str | None, skip_corrupt: bool) -> list[History]:  # noqa: ANN001
    """The exact path: one row at a time, every error named with its row."""
    d = table.to_pydict()
    n = table.num_rows
    runs: dict[str, _RunBuilder] = {}
    order: list[str] = []
    targets = d.get("target") or [None] * n
    nemeses = d.get("nemesis") or [None] * n
    settings = d.get("settings") or [None] * n
    skipped: list[tuple[str | None, int]] = []
    for i in range(n):
        try:
            raw = d["value"][i]
            try:
                value = _loads_exact(raw) if raw is not None else None
            except json.JSONDecodeError as e:
                raise HistoryError(f"value is corrupt JSON ({e.msg})") from None
            except RecursionError:
                raise HistoryError("value is JSON nested too deeply") from None
            op = {
                "run_id": d["run_id"][i],
                "index": d["index"][i],
                "time_ns": d["time_ns"][i],
                "process": d["process"][i],
                "type": d["type"][i],
                "f": d["f"][i],
                "value": value,
            }
            if not _plainly_valid(op):
                validate_op(op)
            rb = runs.get(op["run_id"])
            if rb is None:
                h = History(op["run_id"], target=targets[i] or "unknown", nemesis=nemeses[i])
                if settings[i]:
                    h.settings = json.loads(settings[i])
                rb = runs[op["run_id"]] = _RunBuilder(h)
                order.append(op["run_id"])
            rb.add(op)
        except (HistoryError, json.JSONDecodeError) as e:
            reason = e.reason if isinstance(e, HistoryError) else str(e)
            if not skip_corrupt:
                raise HistoryError(reason, line=i + 1, path=path) from None
            warnings.warn(f"{path or 'parquet'}: row {i + 1} skipped: {reason}", CorruptLineWarning, stacklevel=3)
            rid = d["run_id"][i]
            skipped.append((rid if isinstance(rid, str) else None, i + 1))
    return _with_skipped([runs[r].hist for r in order], skipped)


def read_parquet(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read every run in a Parquet file written with :func:`write_parquet`'s schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise HistoryError("no such file", path=path) from None
    except (pa.ArrowException, OSError) as e:
        raise HistoryError(f"not a readable Parquet file: {e}", path=path) from None
    return from_arrow(table, path=path, skip_corrupt=skip_corrupt)


def is_parquet_name(path: str) -> bool:
    return path.endswith((".parquet", ".pq"))


def read(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read a history file by extension: ``.parquet``/``.pq`` or JSON Lines (``.jsonl``, ``.jsonl.gz``)."""
    if is_parquet_name(path):
        return read_parquet(path, skip_corrupt=skip_corrupt)
    return read_jsonl(path, skip_corrupt=skip_corrupt)


def read_bytes(data: bytes, name: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read a history file's content (as Spark's binaryFile source hands it over); ``name`` picks the format."""
    if is_parquet_name(name):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as e:
            raise HistoryError(f"not a readable Parquet file: {e}", path=name) from None
        return from_arrow(table, path=name, skip_corrupt=skip_corrupt)
    if name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, OSError) as e:
            raise HistoryError(f"cannot read: {e}", path=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HistoryError(f"not UTF-8 text ({e.reason})", path=name) from None
    return iter_lines_validated(text.splitlines(), path=name, skip_corrupt=skip_corrupt)


HISTORY_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".pq")


def expand_paths(spec: str) -> list[str]:
    """A directory (its history files, recursively), a glob, or a file -> sorted file paths."""
    if os.path.isdir(spec):
        out = []
        for root, _dirs, files in os.walk(spec):
            out += [os.path.join(root, f) for f in files if f.endswith(HISTORY_SUFFIXES)]
        return sorted(out)
    if any(c in spec for c in "*?["):
        return sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
    return [spec] if os.path.isfile(spec) else []


def iter_histories(paths: Iterable[str], *, skip_corrupt: bool = False) -> Iterator[History]:
    for p in paths:
        yield from read(p, skip_corrupt=skip_corrupt)
