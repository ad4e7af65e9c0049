"""The typed path: a whole JSONL file of one run decoded by msgspec into typed structs, checked a column at a time.

Why: parsing every line into dicts (orjson) and checking them one Python statement at a time cost ~4 s per
million operations. msgspec decodes straight into the structs below, enforcing most of the contract itself (exact
classes: a float is no int; integers of any size kept exact), and the rest - index and time order,
invoke/completion pairing, the shape each ``f`` needs - is checked on whole columns with numpy. The checker's
columns (:class:`~history.columns.RecordColumns`) are gathered from the structs in the same pass, and the structs
are kept: they are what the linearizability extraction reads (:class:`Op`; ``History.typed_ops()``; dicts from
the other paths are converted by :func:`to_typed`). The operation dicts (``History.ops``) are not built here: the
run keeps the raw lines and parses them (as the other paths would) only when something asks for them;
:meth:`History.op_view` serves single operations (evidence) without that. A check builds none.

All or nothing, like the fast path's doubt: :func:`read_typed` accepts only files it certainly accepts (one run,
a header on the first line or none, every line an operation the exact path accepts), and returns None for anything
else - a corrupt line, a second run, a blank line, a doubtful shape - so the other paths read the file from the
start and every error, warning and ``skip_corrupt`` decision stays theirs.
"""

from __future__ import annotations

import gc
import gzip
import operator
import sys
from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np
from msgspec import UNSET, Struct, UnsetType

from .columns import RecordColumns
from .schema import KNOWN_FS, HistoryError, validate_header

_CHUNK = 1 << 20  # small enough that a chunk's structs are still in cache when gathered

_Scalar = int | str | float | bool | None  # (as history.schema: bool is an int there)


class Record(Struct, gc=False):
    """A record of a batch send or a poll; ``key`` and anything else are not checked, so not decoded."""

    topic: str
    partition: int
    value: _Scalar
    offset: int | None = None


class SendOp(Struct, tag_field="f", tag="send", gc=False):
    """A txn's ``send`` micro-operation: a record. Its fields are required here, so msgspec checks every send of
    every txn (invokes included) while it decodes, and the gathering reads only the completed ones."""

    f: ClassVar[str] = "send"  # (the tag, as an attribute too: code reads m.f as it reads the dicts' m["f"])
    topic: str
    partition: int
    value: _Scalar
    offset: int | None = None


class PollOp(Struct, tag_field="f", tag="poll", gc=False, omit_defaults=True):
    """A txn's ``poll`` micro-operation: the records it read (needed in an ok txn only)."""

    f: ClassVar[str] = "poll"
    records: list[Record] | UnsetType = UNSET


MicroOp = SendOp | PollOp  # a txn's micro-operation, told apart by its ``f`` (msgspec's tagged union)


class TxnOffsets(Struct, gc=False):
    """A txn's ``offsets``: the consumer offsets sent with it (send_offsets_to_transaction)."""

    group: str
    offsets: dict[str, int]


class Value(Struct, gc=False, omit_defaults=True):
    """Every field any ``f`` checks, all optional: which ones must be there is checked per ``f``. ``offsets`` is
    a commit's map or a txn's :class:`TxnOffsets` (one decoder for both: their classes are checked per ``f``)."""

    records: list[Record] | UnsetType = UNSET
    topic: str | UnsetType = UNSET
    partition: int | UnsetType = UNSET
    value: _Scalar | UnsetType = UNSET
    offset: int | None = None
    partitions: list[str] | UnsetType = UNSET
    topics: list | UnsetType = UNSET
    group: str | UnsetType = UNSET
    offsets: dict[str, Any] | UnsetType = UNSET
    positions: dict[str, int] | UnsetType = UNSET
    txn_id: str | UnsetType = UNSET
    ops: list[SendOp | PollOp] | UnsetType = UNSET
    abort: bool | UnsetType = UNSET


class Op(Struct, gc=False):
    """An operation as the checkers read it: attributes, not a dict (``value`` None where null or not read)."""

    run_id: str
    index: int
    time_ns: int
    process: int
    type: Literal["invoke", "ok", "fail", "info"]
    f: str  # (in a file the typed path reads: one of KNOWN_FS, a shared literal; see _Decoders)
    # None where null (a crash's); missing: all UNSET. Reading a field of None raises AttributeError: doubt.
    value: Value | None = msgspec.field(default_factory=Value)
    header: UnsetType = UNSET  # a line with a header is a header line: msgspec refuses it here


class _Header(Struct):
    run_id: str
    header: dict


_DECODER = msgspec.json.Decoder(Op)
_F = Literal[tuple(sorted(KNOWN_FS))]  # (an unknown f: the other paths decide what it means)


class _Decoders:
    """Decoders of one run whose run id, f and topics are literals, learned as the file is read.

    Why: msgspec then hands out one shared str object per literal instead of a new string per operation and
    record, so hashing and comparing them later (the run-id and f checks here, the checker's keys) is nearly free;
    about 0.5 s per million operations. The run id is checked on every line by the decoder itself. A chunk with a
    topic not seen before fails validation: it is decoded once generically, its topics are added, and it is decoded
    again. A chunk that fails for any other reason is a doubt."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.topics: set[str] = set()
        self.decoder: msgspec.json.Decoder | None = None

    def decode(self, chunk: bytes) -> list[Op]:
        if self.decoder is None:
            self.decoder = self._build()
        try:
            return self.decoder.decode_lines(chunk)
        except msgspec.ValidationError:
            new = _topics(_DECODER.decode_lines(chunk)) - self.topics
            _need(new)
            self.topics |= new
            self.decoder = self._build()
            return self.decoder.decode_lines(chunk)

    def _build(self) -> msgspec.json.Decoder:
        topic = Literal[tuple(sorted(self.topics)) or ("",)]
        rec = msgspec.defstruct("Record", [("topic", topic)], bases=(Record,), gc=False)
        send = msgspec.defstruct("SendOp", [("topic", topic)], bases=(SendOp,), gc=False, tag_field="f",
                                 tag="send")
        poll = msgspec.defstruct("PollOp", [("records", list[rec] | UnsetType, UNSET)], bases=(PollOp,), gc=False,
                                 omit_defaults=True, tag_field="f", tag="poll")
        val = msgspec.defstruct("Value", [("records", list[rec] | UnsetType, UNSET),
                                          ("topic", topic | UnsetType, UNSET),
                                          ("ops", list[send | poll] | UnsetType, UNSET)],
                                bases=(Value,), gc=False, omit_defaults=True)
        op = msgspec.defstruct("Op", [("run_id", Literal[self.run_id]), ("f", _F),
                                      ("value", val | None, msgspec.field(default_factory=val))],
                               bases=(Op,), gc=False)
        return msgspec.json.Decoder(op)


def _topics(ops: list[Op]) -> set[str]:
    out = set()
    for op in ops:
        v = op.value
        if v is not None:
            if v.topic is not UNSET:
                out.add(v.topic)
            if v.records is not UNSET:
                out.update(r.topic for r in v.records)
            if v.ops is not UNSET:
                for m in v.ops:
                    if m.f == "send":
                        out.add(m.topic)
                    elif m.records is not UNSET:
                        out.update(r.topic for r in m.records)
    return out
_HEADER = msgspec.json.Decoder(_Header)
_ERRORS: tuple = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError, TypeError,
                  AttributeError, OverflowError, OSError, EOFError, RecursionError)


_TYPE_CODE = {"invoke": 0, "ok": 1, "fail": 2, "info": 3}
_get_value = attrgetter("value")
_get_records = attrgetter("records")
_TOPIC, _PARTITION, _OFFSET = attrgetter("topic"), attrgetter("partition"), attrgetter("offset")
_TXN_ID, _OPS, _MOP_F, _SEND = attrgetter("txn_id"), attrgetter("ops"), attrgetter("f"), "send"
_OFFSETS_KEYS, _GROUP, _OFFSETS = {"group", "offsets"}, itemgetter("group"), itemgetter("offsets")


# What the linearizability extraction (reports.extract) reads of each f; other operations keep only their
# process, type, time and index there.
EXTRACTED = frozenset(("send", "poll", "commit", "fetch_offsets", "txn"))


def to_typed(ops: Sequence[Any]) -> list[Op]:
    """Operations as :class:`Op` structs: dicts (a run read by the other paths, or built in memory) converted in
    one call; a list of structs as it is. The values of operations the extraction does not read are dropped (a
    nemesis may carry anything there). A dict that breaks the contract raises :class:`HistoryError`."""
    if not ops or isinstance(ops[0], Op):
        return ops if isinstance(ops, list) else list(ops)
    plain = [op if op.get("f") in EXTRACTED else {**op, "value": None} for op in ops]
    try:
        return msgspec.convert(plain, list[Op])
    except msgspec.ValidationError as e:
        raise HistoryError(f"operation breaks the contract: {e}") from None


class _Doubt(Exception):
    pass


def _need(cond: Any) -> None:
    if not cond:
        raise _Doubt


def _chunks(path: str) -> list[bytes]:
    """The file's bytes in blocks of whole lines (the last one may lack its line end)."""
    out: list[bytes] = []
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as fh:  # noqa: SIM115
        tail = b""
        while chunk := fh.read(_CHUNK):
            if tail:
                chunk = tail + chunk
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                tail = chunk
                continue
            out.append(chunk[:cut])
            tail = chunk[cut:]
        if tail:
            out.append(tail)
    return out


def read_typed(path: str, young_gc: bool = False) -> tuple[str, dict | None, list[bytes], list[int],
                                                          RecordColumns, list[Op]] | None:
    """``(run_id, header body or None, chunks of operation lines, operations per chunk, columns, operations)``
    of a one-run file this path certainly accepts, else None (see the module docstring). The operations are the
    typed structs the linearizability extraction reads. ``young_gc``: the caller paused the collector; collect
    the youngest generation after each chunk."""
    if sys.getrecursionlimit() > 1024:
        return None  # (msgspec's depth limit is the recursion limit; orjson's is 1024, and it reads the lines later)
    try:
        return _read(path, young_gc)
    except (_Doubt, *_ERRORS):
        return None


def _read(path: str, young_gc: bool) -> tuple:
    chunks = _chunks(path)
    _need(chunks)
    header = None
    first = chunks[0]
    end = first.find(b"\n") + 1 or len(first)
    if first.startswith(b'{"run_id"') and b'"header"' in first[:end]:
        h = _HEADER.decode(first[:end])
        header = (h.run_id, validate_header({"run_id": h.run_id, "header": h.header}))
        chunks[0] = first[end:]
        if not chunks[0]:
            del chunks[0]
    _need(chunks)
    if header is not None:
        rid = header[0]
    else:
        first = chunks[0]
        rid = _DECODER.decode(first[:first.find(b"\n") + 1 or len(first)]).run_id
    decoders = _Decoders(rid)
    counts: list[int] = []
    typed: list[Op] = []
    g = _Gather()
    if young_gc:
        # The lists that will hold the run (its structs, its columns: millions of items) are made old while
        # they are empty. Young ones, each chunk's collection would move them to generation 1, and the first
        # collection after the pause would walk every item they hold: 0.8 s of a 1M-op read.
        gc.collect(1)
    for c in chunks:
        # Lines must be exactly the operations, as the other paths split them: no \r (text mode's line end), no
        # blank line (decode_lines skips it: the count tells), no two values on one line (the count again).
        # msgspec refuses what orjson refuses: lone surrogates, NaN, nesting deeper than the recursion limit.
        _need(b"\r" not in c)
        got = decoders.decode(c)
        _need(len(got) == c.count(b"\n") + (not c.endswith(b"\n")))
        g.add(got)  # while the chunk's structs are still in cache
        counts.append(len(got))
        typed += got
        if young_gc:  # the chunk's new tuples, while in cache (see history.io.gc_paused)
            gc.collect(0)
    _need(g.n)
    return rid, None if header is None else header[1], chunks, counts, g.finish(), typed


def _int64(values: list) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=len(values))  # OverflowError beyond int64: the other paths


_get = {name: attrgetter(name) for name in ("index", "time_ns", "process", "type", "f", "group",
                                             "offsets", "partitions", "topics", "positions")}


def _pick(seq: list, rows: np.ndarray) -> list:
    return list(map(seq.__getitem__, rows.tolist()))


class _Gather:
    """The checks of history.io's fast path, a chunk of operations at a time, and the checker's columns; the
    checks across operations (order, pairing) on whole columns at the end."""

    def __init__(self) -> None:
        self.n = 0
        self.arrays: list[tuple[np.ndarray, ...]] = []  # per chunk: index, time_ns, process, type, f codes
        self.f_code: dict[str, int] = {}
        self.cols = RecordColumns()
        self.events: list[tuple] = []

    def code(self, f_l: list[str]) -> np.ndarray:
        code = self.f_code
        for name in set(f_l).difference(code):
            code[name] = len(code)
        return np.fromiter(map(code.__getitem__, f_l), dtype=np.int64, count=len(f_l))

    def add(self, ops: list) -> None:
        base, n = self.n, len(ops)
        procs_l = list(map(_get["process"], ops))
        typ_l = list(map(_get["type"], ops))
        typ = np.fromiter(map(_TYPE_CODE.__getitem__, typ_l), dtype=np.int8, count=n)
        fc = self.code(list(map(_get["f"], ops)))
        self.arrays.append((_int64(list(map(_get["index"], ops))), _int64(list(map(_get["time_ns"], ops))),
                            _int64(procs_l), typ, fc))
        vals = list(map(_get_value, ops))
        cols, events, code = self.cols, self.events, self.f_code

        def of(name: str) -> np.ndarray | None:
            c = code.get(name)
            if c is None:
                return None
            sel = fc == c
            return sel if sel.any() else None

        # A field each f needs is read from every value of that f (AttributeError on a null value) and checked
        # for UNSET (missing); msgspec checked its class.
        is_send = of("send")
        is_txn = of("txn")
        if is_txn is not None:
            self._txns(ops, vals, typ, procs_l, fc, base, is_send, of("poll"))
            is_send = None  # (sends and polls of this chunk gathered there, with the txns', in position order)
        if is_send is not None:
            sv = _pick(vals, np.flatnonzero(is_send))
            recs = list(map(_get_records, sv))
            n_single = recs.count(UNSET)
            if n_single:
                single = sv if n_single == len(sv) else list(compress(sv, map(operator.is_, recs, repeat(UNSET))))
                _need(UNSET not in map(_TOPIC, single) and UNSET not in map(_PARTITION, single)
                      and UNSET not in map(_get_value, single))
            if n_single < len(sv):
                _need(0 not in map(len, (r for r in recs if r is not UNSET)))
            done = np.flatnonzero(is_send & (typ != 0))
            dv = _pick(vals, done)
            if n_single == len(sv):  # no batch: each value is its one record
                allr = groups = dv
                lens: Any = [1] * len(dv)
            else:
                groups = [(v,) if r is UNSET else r for v, r in zip(dv, map(_get_records, dv), strict=True)]
                allr = list(chain.from_iterable(groups))
                lens = map(len, groups)
            cols.s_topic += map(_TOPIC, allr)
            cols.s_partition += map(_PARTITION, allr)
            cols.s_value += map(_get_value, allr)
            cols.s_offset += map(_OFFSET, allr)
            cols.s_ops += zip((done + base).tolist(), _pick(procs_l, done), _pick(typ_l, done), lens,
                              strict=True)

        is_poll = of("poll") if is_txn is None else None
        if is_poll is not None:
            ok_polls = np.flatnonzero(is_poll & (typ == 1))
            pv = _pick(vals, ok_polls)
            recs = list(map(_get_records, pv))
            _need(UNSET not in recs)
            positions = list(map(_get["positions"], pv))
            if positions.count(UNSET) < len(positions):
                for pos_map in positions:
                    if pos_map is not UNSET:
                        _need(all("/" in k and o >= 0 for k, o in pos_map.items()))
            allr = list(chain.from_iterable(recs))
            offsets = list(map(_OFFSET, allr))
            _need(None not in offsets)
            cols.p_offset += offsets
            cols.p_topic += map(_TOPIC, allr)
            cols.p_partition += map(_PARTITION, allr)
            cols.p_value += map(_get_value, allr)
            lens = np.fromiter(map(len, recs), dtype=np.int64, count=len(recs))
            nz = np.flatnonzero(lens)
            at = ok_polls[nz]
            cols.p_ops += zip((at + base).tolist(), _pick(procs_l, at), lens[nz].tolist(), strict=True)
            for pos in np.flatnonzero(is_poll & (typ == 3)).tolist():
                events.append((base + pos, procs_l[pos], "poll", None))

        for name in ("commit", "fetch_offsets"):
            sel = of(name)
            if sel is None:
                continue
            _need(UNSET not in map(_get["group"], _pick(vals, np.flatnonzero(sel))))
            need = np.flatnonzero(sel if name == "commit" else sel & (typ == 1))
            offs = list(map(_get["offsets"], _pick(vals, need)))
            _need(UNSET not in offs)
            _need(all("/" in k for k in set(chain.from_iterable(offs))))  # (msgspec shares the key objects)
            _need(all(o is None or o.__class__ is int for d in offs for o in d.values()))

        for name in ("assign", "subscribe"):
            sel = of(name)
            if sel is None:
                continue
            got = list(map(_get["partitions" if name == "assign" else "topics"], _pick(vals, np.flatnonzero(sel))))
            _need(UNSET not in got)
            if name == "assign":
                _need(all(map(str.__contains__, chain.from_iterable(got), repeat("/"))))
            for pos in np.flatnonzero(sel & ((typ == 1) | (typ == 3))).tolist():
                events.append((base + pos, procs_l[pos], name, msgspec.to_builtins(vals[pos])))
        sel = of("crash")
        if sel is not None:
            for pos in np.flatnonzero(sel & (typ != 0)).tolist():
                events.append((base + pos, procs_l[pos], "crash", None))
        self.n += n

    def _txns(self, ops: list, vals: list, typ: np.ndarray, procs_l: list, fc: np.ndarray, base: int,
              is_send: np.ndarray | None, is_poll: np.ndarray | None) -> None:
        """A chunk with txns: their checks (history.schema.check_txn), and the chunk's sends and polls gathered
        with the txns' (a txn's sends are a batch, an ok txn's reads one poll) in position order. Whole lists
        at a time (C-level maps, numpy), as the rest of this path: a Python statement per txn cost 3 s/1M ops."""
        cols, events = self.cols, self.events
        t_rows = np.flatnonzero(fc == self.f_code["txn"])
        tv = _pick(vals, t_rows)
        _need(UNSET not in map(_TXN_ID, tv))
        mls = list(map(_OPS, tv))
        _need(UNSET not in mls)
        _need(0 not in map(len, mls))
        offs = list(map(_get["offsets"], tv))
        if offs.count(UNSET) < len(offs):  # each {"group": str, "offsets": {"t/p": int}}: whole lists at a time
            offs = [o for o in offs if o is not UNSET]
            _need(all(map(operator.eq, map(dict.keys, offs), repeat(_OFFSETS_KEYS))))
            _need(set(map(type, map(_GROUP, offs))) == {str})
            inner = list(map(_OFFSETS, offs))
            _need(set(map(type, inner)) == {dict})
            _need(all(map(str.__contains__, chain.from_iterable(inner), repeat("/"))))
            _need(set(map(type, chain.from_iterable(map(dict.values, inner)))) <= {int})
        # Every micro-op was checked by msgspec (a send's fields are required, a poll's records typed); only the
        # completed txns' micro-ops are gathered: an invoke's are read again only if it never completes.
        done_sel = typ[t_rows] != 0
        t_rows = t_rows[done_sel]
        mls = list(compress(mls, done_sel.tolist()))
        lens = np.fromiter(map(len, mls), dtype=np.int64, count=len(mls))
        flat = list(chain.from_iterable(mls))
        is_s = np.fromiter(map(_SEND.__eq__, map(_MOP_F, flat)), dtype=bool, count=len(flat))
        m_row = np.repeat(t_rows, lens)  # chunk row of each micro-op
        m_typ = typ[m_row]
        m_poll_ok = ~is_s & (m_typ == 1)
        p_mops = list(compress(flat, m_poll_ok.tolist()))
        p_lists = list(map(_get_records, p_mops))
        _need(UNSET not in p_lists)
        type_names = ("invoke", "ok", "fail", "info")
        # sends: the plain ones' records and the txns' send micro-ops, in position order
        recs: list = []
        rows: list[np.ndarray] = []
        if is_send is not None:
            ps = np.flatnonzero(is_send & (typ != 0))
            sv = _pick(vals, ps)
            groups = [(v,) if v.records is UNSET else v.records for v in sv]
            for v, g in zip(sv, groups, strict=True):
                if g is not v.records:
                    _need(v.topic is not UNSET and v.partition is not UNSET and v.value is not UNSET)
                else:
                    _need(g)
            recs += chain.from_iterable(groups)
            rows.append(np.repeat(ps, np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))))
        recs += compress(flat, is_s.tolist())
        rows.append(m_row[is_s])
        self._stream(recs, np.concatenate(rows) if rows else np.zeros(0, np.int64), base, procs_l, typ,
                     type_names, sends=True)
        # polls: the plain ok polls' records and the ok txns' polled records, in position order
        recs = []
        rows = []
        if is_poll is not None:
            pp = np.flatnonzero(is_poll & (typ == 1))
            pv = _pick(vals, pp)
            got = list(map(_get_records, pv))
            _need(UNSET not in got)
            for pos_map in map(_get["positions"], pv):
                if pos_map is not UNSET:
                    _need(all("/" in k and o >= 0 for k, o in pos_map.items()))
            recs += chain.from_iterable(got)
            rows.append(np.repeat(pp, np.fromiter(map(len, got), dtype=np.int64, count=len(got))))
            for pos in np.flatnonzero(is_poll & (typ == 3)).tolist():
                events.append((base + pos, procs_l[pos], "poll", None))
        recs += chain.from_iterable(p_lists)
        rows.append(np.repeat(m_row[m_poll_ok], np.fromiter(map(len, p_lists), dtype=np.int64,
                                                             count=len(p_lists))))
        self._stream(recs, np.concatenate(rows), base, procs_l, typ, type_names, sends=False)
        # a txn that polled and did not commit resets its consumer's tracking
        for pos in np.unique(m_row[~is_s & ((m_typ == 2) | (m_typ == 3))]).tolist():
            events.append((base + pos, procs_l[pos], "poll", None))
        cols.t_ops += zip((t_rows + base).tolist(), _pick(procs_l, t_rows),
                          [type_names[x] for x in typ[t_rows].tolist()], repeat(-1))  # (invokes: in finish)

    def _stream(self, recs: list, rows: np.ndarray, base: int, procs_l: list, typ: np.ndarray,
                type_names: tuple, sends: bool) -> None:
        """Records of one stream (sends or polls) with the chunk row of each, appended in row order."""
        if not len(rows):
            return
        if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():
            order = np.argsort(rows, kind="stable")
            rows = rows[order]
            recs = _pick(recs, order)
        # (rows sorted: runs and their lengths by a diff; np.unique hashed them, most of this method's time)
        new = np.ones(len(rows), dtype=bool)
        new[1:] = rows[1:] != rows[:-1]
        at = np.flatnonzero(new)
        u, counts = rows[at], np.diff(np.append(at, len(rows)))
        cols = self.cols
        if sends:
            cols.s_topic += map(_TOPIC, recs)
            cols.s_partition += map(_PARTITION, recs)
            cols.s_value += map(_get_value, recs)
            cols.s_offset += map(_OFFSET, recs)
            cols.s_ops += zip((u + base).tolist(), _pick(procs_l, u), [type_names[x] for x in typ[u].tolist()],
                              counts.tolist(), strict=True)
        else:
            offsets = list(map(_OFFSET, recs))
            _need(None not in offsets)
            cols.p_offset += offsets
            cols.p_topic += map(_TOPIC, recs)
            cols.p_partition += map(_PARTITION, recs)
            cols.p_value += map(_get_value, recs)
            cols.p_ops += zip((u + base).tolist(), _pick(procs_l, u), counts.tolist(), strict=True)

    def finish(self) -> RecordColumns:
        """Index and time order, invoke/completion pairing; the columns."""
        index, time_ns, procs, typ, fc = (np.concatenate(a) for a in zip(*self.arrays, strict=True))
        _need(index[0] >= 0 and time_ns[0] >= -(1 << 62))
        _need((index[1:] > index[:-1]).all() and (time_ns[1:] >= time_ns[:-1]).all())
        # Per process (the nemesis aside), invoke and completion alternate, starting with an invoke, and a
        # completion has its invoke's f.
        rows = np.flatnonzero(procs != -1)
        order = rows[np.argsort(procs[rows], kind="stable")]
        pending: list[int] = []
        if len(order):
            ps, inv, fs = procs[order], typ[order] == 0, fc[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = ps[1:] != ps[:-1]
            _need(inv[first].all())
            later = ~first[1:]
            _need(not (later & (inv[1:] == inv[:-1])).any())
            _need(not (later & ~inv[1:] & (fs[1:] != fs[:-1])).any())
            last = np.ones(len(order), dtype=bool)
            last[:-1] = first[1:]
            pending = sorted(order[last & inv].tolist())  # invokes without a completion: indeterminate
        cols = self.cols
        cols.n_ops = self.n
        cols.events = sorted(self.events, key=itemgetter(0))
        cols.pending = pending
        if cols.t_ops or ("txn" in self.f_code and pending):
            cols.op_time = time_ns
            if cols.t_ops:
                invoke_of = np.full(self.n, -1, dtype=np.int64)
                if len(order) > 1:
                    done = ~inv[1:] & (ps[1:] == ps[:-1])
                    invoke_of[order[1:][done]] = order[:-1][done]
                at = invoke_of[[t[0] for t in cols.t_ops]].tolist()
                cols.t_ops = [(t[0], t[1], t[2], i) for t, i in zip(cols.t_ops, at, strict=True)]
        return cols
