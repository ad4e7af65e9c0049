"""Kafka anomaly checker: Jepsen's Kafka analyses over our history contract (see history/schema.py).

Columnar: one Python pass over the operations copies each record's (topic, partition, offset, value) into flat
lists (C-level ``map`` per poll, never a Python statement per record); numpy then answers every question for all
topic-partitions at once - which value was first seen at each offset (the version order), who read and wrote what,
the successive reads and sends of each process - and only the rows it flags become cases, built in Python with
their evidence (key, values, offsets, operations). A value seen at two offsets is one ``duplicate`` case: a read or
send of it stands at the copy it carries, and steps along the version order count only values that are not
duplicated, so the copies make no skip or step back of their own (issue 24). :mod:`reports.checkers_simple` is the
same analysis record by record; the tests hold the two to identical cases, and it is the fallback for what int64
columns cannot hold.

Which anomalies are acceptable under which settings is decided in ONE place: :data:`ACCEPTABLE`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import is_not, itemgetter
from typing import Any

import numpy as np
import pandas as pd

from history.columns import RecordColumns, with_pending
from history.schema import key_of

from .anomalies import ACCEPTABLE, ANOMALIES, CheckResult, _op_ref, acceptable
from .txn import analyze_txns, fold_torn_skips

__all__ = ["ACCEPTABLE", "ANOMALIES", "CheckResult", "acceptable", "analyze", "check"]

def analyze(ops: Sequence[dict], settings: dict | None = None, columns: RecordColumns | None = None) -> CheckResult:
    """Find every Kafka anomaly in one run's operations (index order, as history.read returns them).

    ``columns``: the run's :class:`~history.columns.RecordColumns` if the reader gathered them already (used only
    if they cover exactly ``len(ops)`` operations)."""
    was = gc.isenabled()
    gc.disable()  # the pass allocates many small acyclic objects; cyclic GC passes over them are pure cost
    try:
        try:
            return _Columns(ops, columns).analyze(settings)
        except _DoesNotFit:
            from .checkers_simple import analyze as analyze_simple

            return analyze_simple(ops, settings)
    finally:
        if was:
            gc.enable()


class _DoesNotFit(Exception):
    """An offset, partition or composite code does not fit int64: the record-by-record checker takes the run."""


_OK, _INFO, _FAIL = 0, 1, 2
_SEND_TYPES = {"ok": _OK, "info": _INFO, "fail": _FAIL}
_LIMIT = 1 << 62


def _int64(values: list) -> np.ndarray:
    """Offsets, partitions, processes: ints by the history contract (the reader checks each one)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (OverflowError, TypeError, ValueError):
        raise _DoesNotFit from None


def _fits(*factors: int) -> None:
    n = 1
    for f in factors:
        n *= max(int(f), 1)
    if n >= _LIMIT:
        raise _DoesNotFit


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """For codes numbered in order of first appearance (pd.factorize), the row where each code first appears."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(codes)
    new = np.empty(len(codes), dtype=bool)
    new[0] = True
    np.greater(codes[1:], seen[:-1], out=new[1:])
    return np.flatnonzero(new)


def _factorize_values(values: list, all_int: bool = False) -> tuple[np.ndarray, Callable[[int], Any]]:
    """Codes per value with Python's equality (as dict keys compare), and code -> the value object.
    ``all_int``: the caller knows every value is an int (the reader saw each one's class)."""
    types = {int} if all_int else set(map(type, values))
    codes = uniques = None
    if types <= {int, bool}:
        try:
            codes, uniques = pd.factorize(np.fromiter(values, dtype=np.int64, count=len(values)))
        except (OverflowError, ValueError):
            codes = None
    if codes is None and types <= {int, bool, str}:
        # pandas hashes objects with Python's hash and ==, as a dict does (None and NaN it would merge: not here)
        codes, uniques = pd.factorize(np.array(values, dtype=object))
    if codes is None:  # mixed, None, floats, big ints: exact Python dict semantics, one call per value
        table: dict[Any, int] = {}
        codes = np.fromiter(map(lambda v: table.setdefault(v, len(table)), values), dtype=np.int64,
                            count=len(values))
        objs = list(table)
        return codes, objs.__getitem__
    objs_cache: list = []

    def obj(i: int) -> Any:
        if not objs_cache:
            objs_cache.append(uniques.tolist())
        return objs_cache[0][i]

    return codes.astype(np.int64, copy=False), obj


def _groups(seg: np.ndarray, key: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by (operation, key), each group's rows in record order: (row permutation, group starts).

    Kafka returns a partition's records contiguously, so groups are usually runs already; a key that comes back
    later in the same operation is merged into its first run by a stable sort (as a dict per operation would)."""
    n = len(seg)
    start = np.ones(n, dtype=bool)
    if n > 1:
        start[1:] = (seg[1:] != seg[:-1]) | (key[1:] != key[:-1])
    starts = np.flatnonzero(start)
    perm = None
    if len(starts) > 1:
        g_seg = seg[starts]
        runs_per_seg = np.bincount(g_seg)
        many = runs_per_seg[g_seg] > 2  # a repeated key needs at least three runs in one operation
        if many.any():
            code = np.sort(g_seg[many] * n_keys + key[starts[many]])
            if (code[1:] == code[:-1]).any():  # (a sort, not np.unique: its hashing took seconds at 1M rows)
                perm = np.argsort(seg * n_keys + key, kind="stable")
                s2, k2 = seg[perm], key[perm]
                start = np.ones(n, dtype=bool)
                start[1:] = (s2[1:] != s2[:-1]) | (k2[1:] != k2[:-1])
                starts = np.flatnonzero(start)
    return (np.arange(n) if perm is None else perm), starts


class _Columns:
    """One run as columns. Rows of the poll stream are polled records, rows of the send stream sent records."""

    def __init__(self, ops: Sequence[dict], cols: RecordColumns | None = None) -> None:
        self.ops = ops
        if cols is None or cols.n_ops != len(ops):
            cols = RecordColumns.collect(ops)
        if cols.pending:  # invokes never completed: indeterminate, exactly like info sends and polls
            cols = with_pending(ops, cols)
        self.n_polled = len(cols.p_offset)
        self.t_ops, self.op_time = cols.t_ops, cols.op_time  # txns (reports.txn)
        self._build(cols)

    # ------------------------------------------------------------------ columns

    def _build(self, c: RecordColumns) -> None:
        n_p, n_s = len(c.p_offset), len(c.s_value)
        pseg, sseg, events, soff = c.p_ops, c.s_ops, c.events, c.s_offset
        topics = c.p_topic + c.s_topic
        parts = _int64(c.p_partition + c.s_partition)
        offsets = _int64(c.p_offset)
        values = c.p_value + c.s_value

        # keys (topic-partitions), numbered in first-seen order
        t_uniq = list(set(topics))
        if len(t_uniq) <= 1:  # the usual case: no per-record hashing at all
            t_codes = np.zeros(len(topics), dtype=np.int64)
        else:
            t_uniq.sort()
            t_codes = np.fromiter(map({t: i for i, t in enumerate(t_uniq)}.__getitem__, topics), dtype=np.int64,
                                  count=len(topics))
        del topics
        pmin = int(parts.min()) if len(parts) else 0
        span = (int(parts.max()) - pmin + 1) if len(parts) else 1
        _fits(len(t_uniq), span)
        k_raw = t_codes.astype(np.int64) * span + (parts - pmin)
        k_codes, k_uniq = pd.factorize(k_raw)
        k_codes = k_codes.astype(np.int64, copy=False)
        n_keys = len(k_uniq)
        p_pos = np.repeat(np.array([s[0] for s in pseg], dtype=np.int64), [s[2] for s in pseg]) if pseg else \
            np.zeros(0, dtype=np.int64)
        s_pos = np.repeat(np.array([s[0] for s in sseg], dtype=np.int64), [s[3] for s in sseg]) if sseg else \
            np.zeros(0, dtype=np.int64)
        # first seen = lowest (operation position, row): rows of one operation are contiguous in one stream
        n_rows = len(k_codes)
        _fits(len(self.ops) + 1, n_rows + 1)
        seen = np.full(n_keys, np.iinfo(np.int64).max, dtype=np.int64)
        n_p_rows = len(p_pos)
        if (p_pos[1:] >= p_pos[:-1]).all() and (s_pos[1:] >= s_pos[:-1]).all():
            # Each stream in position order (as gathered): a key's lowest (position, row) in a stream is its
            # first row there. The poll rows' codes are numbered in order of first appearance already; the send
            # rows' are numbered so by a factorize over a few keys. (np.minimum.at over every row cost 0.2 s/1M.)
            rows = [_first_rows(k_codes[:n_p_rows])]
            s_codes, _ = pd.factorize(k_codes[n_p_rows:])
            rows.append(_first_rows(s_codes.astype(np.int64, copy=False)) + n_p_rows)
            rows = np.concatenate(rows)
            at = np.concatenate((p_pos, s_pos))[rows]
            np.minimum.at(seen, k_codes[rows], at * (n_rows + 1) + rows)
        else:
            np.minimum.at(seen, k_codes, np.concatenate((p_pos, s_pos)) * (n_rows + 1) + np.arange(n_rows))
        order = np.argsort(seen)
        rank = np.empty(n_keys, dtype=np.int64)
        rank[order] = np.arange(n_keys)
        k_codes = rank[k_codes]
        k_uniq = k_uniq[order]
        self.key_topic = [t_uniq[int(x) // span] for x in k_uniq]
        self.key_name = [key_of(t_uniq[int(x) // span], int(x) % span + pmin) for x in k_uniq]
        self.n_keys = n_keys

        # (key, value) pairs: "kv" ids; a value stands for itself when no value is shared by two keys
        v_codes, self._vobj = _factorize_values(values, c.values_all_int)
        del values
        n_v = int(v_codes.max()) + 1 if len(v_codes) else 0
        key_of_v = np.zeros(n_v, dtype=np.int64)
        key_of_v[v_codes] = k_codes
        if (key_of_v[v_codes] == k_codes).all():
            kv, self.kv_key, self.kv_val = v_codes, key_of_v, np.arange(n_v)
        else:
            _fits(n_keys, n_v)
            kv, kv_uniq = pd.factorize(k_codes * n_v + v_codes)
            kv = kv.astype(np.int64, copy=False)
            self.kv_key, self.kv_val = kv_uniq // n_v, kv_uniq % n_v
        self.n_kv = len(self.kv_key)

        self.p_kv, self.p_key, self.p_off, self.p_pos = kv[:n_p], k_codes[:n_p], offsets, p_pos
        self.p_seg = np.repeat(np.arange(len(pseg)), [s[2] for s in pseg]) if pseg else np.zeros(0, np.int64)
        self.s_kv, self.s_key, self.s_pos = kv[n_p:], k_codes[n_p:], s_pos
        self.s_seg = np.repeat(np.arange(len(sseg)), [s[3] for s in sseg]) if sseg else np.zeros(0, np.int64)
        self.s_typ = np.array([_SEND_TYPES[s[2]] for s in sseg], dtype=np.int8)[self.s_seg]
        # (C-level passes by identity: an object array compared with None, or list.count(None), compare each
        # int with None through the rich comparison and cost several times more)
        has_off = np.fromiter(map(is_not, soff, repeat(None)), dtype=bool, count=n_s)
        if has_off.all():
            self.s_off = _int64(soff)
        else:
            self.s_off = np.zeros(n_s, dtype=np.int64)
            if has_off.any():
                self.s_off[has_off] = _int64(list(compress(soff, has_off.tolist())))
        self.s_has_off = has_off

        # processes, dense, for per-process successions
        procs = [s[1] for s in pseg] + [s[1] for s in sseg] + [e[1] for e in events]
        pr_codes, _ = pd.factorize(_int64(procs)) if procs else (np.zeros(0, np.int64), None)
        pr_codes = pr_codes.astype(np.int64, copy=False)
        self.n_procs = int(pr_codes.max()) + 1 if len(pr_codes) else 1
        np_, ns_ = len(pseg), len(sseg)
        self.p_proc = pr_codes[:np_][self.p_seg] if np_ else np.zeros(0, np.int64)
        self.s_proc = pr_codes[np_:np_ + ns_][self.s_seg] if ns_ else np.zeros(0, np.int64)
        self.events = [(e[0], int(c), e[2], e[3]) for e, c in zip(events, pr_codes[np_ + ns_:], strict=True)]
        self.n_ops = len(self.ops)
        _fits(self.n_procs, self.n_keys, self.n_ops + 1)

    # ------------------------------------------------------------------ the version order per key

    def _version_order(self) -> None:
        """Jepsen's version order: per key, each offset's first observed value, offsets ranked densely.

        Observed: every polled record and every ok send's offset, in history order; then info sends' offsets,
        in history order, but only for values some poll read (an unread info send may not have happened)."""
        n_kv = self.n_kv
        is_read = np.zeros(n_kv, dtype=bool)
        is_read[self.p_kv] = True
        self.is_read = is_read
        ok_sent = (self.s_typ == _OK) & self.s_has_off
        info_sent = (self.s_typ == _INFO) & self.s_has_off
        info_sent &= is_read[self.s_kv]
        # Polls and ok sends merged in history order; a txn both sends and polls at one position: its sends
        # first (ties: a poll row counts the send rows at its position as before it, a send row not the polls).
        ok_rows = np.flatnonzero(ok_sent)
        info_rows = np.flatnonzero(info_sent)
        n_p = len(self.p_kv)
        s_at = self.s_pos[ok_rows]
        p_rank = np.arange(n_p) + np.searchsorted(s_at, self.p_pos, "right")
        s_rank = np.arange(len(ok_rows)) + np.searchsorted(self.p_pos, s_at)
        n_obs = n_p + len(ok_rows) + len(info_rows)
        o_key = np.empty(n_obs, dtype=np.int64)
        o_off = np.empty(n_obs, dtype=np.int64)
        o_kv = np.empty(n_obs, dtype=np.int64)
        o_pos = np.empty(n_obs, dtype=np.int64)
        for dst, src in ((o_key, (self.p_key, self.s_key)), (o_off, (self.p_off, self.s_off)),
                         (o_kv, (self.p_kv, self.s_kv)), (o_pos, (self.p_pos, self.s_pos))):
            dst[p_rank] = src[0]
            dst[s_rank] = src[1][ok_rows]
            dst[n_p + len(ok_rows):] = src[1][info_rows]
        omin = int(o_off.min()) if n_obs else 0
        ospan = (int(o_off.max()) - omin + 1) if n_obs else 1
        _fits(self.n_keys, ospan)
        ko, ko_uniq = pd.factorize(o_key * ospan + (o_off - omin))
        ko = ko.astype(np.int64, copy=False)
        chosen = o_kv[_first_rows(ko)]  # per (key, offset): the first value observed there
        self.conflicted = o_kv != chosen[ko]
        # dense index of each (key, offset) within its key
        srt = np.argsort(ko_uniq, kind="stable")
        s_key = ko_uniq[srt] // ospan
        key_start = np.searchsorted(s_key, np.arange(self.n_keys + 1))
        dense = np.empty(len(ko_uniq), dtype=np.int64)
        dense[srt] = np.arange(len(ko_uniq)) - key_start[s_key]
        self.key_start = key_start
        self.by_index = chosen[srt]  # per key, its slice key_start[k]:key_start[k+1] is the version order
        self.index_offset = ko_uniq[srt] % ospan + omin
        big = np.iinfo(np.int64).max
        bv = np.full(n_kv, big, dtype=np.int64)
        np.minimum.at(bv, chosen, dense)
        self.dup_chosen = bool(len(chosen)) and int(np.bincount(chosen).max()) > 1
        bv[bv == big] = -1
        self.bv = bv  # value -> first dense index among chosen values (Jepsen's :by-value), -1 if none
        self.p_idx = self.s_idx = self.kept = None
        if not self.conflicted.any() and not self.dup_chosen:
            self.first_index = self.last_index = bv
        else:
            i_obs = dense[ko]
            fi = np.full(n_kv, big, dtype=np.int64)
            np.minimum.at(fi, o_kv, i_obs)
            fi[fi == big] = -1
            li = np.full(n_kv, -1, dtype=np.int64)
            np.maximum.at(li, o_kv, i_obs)
            self.first_index, self.last_index = fi, li
            dup = fi != li
            if dup.any():
                self._places(dup, i_obs, p_rank, s_rank, ok_rows, info_rows, n_p + len(ok_rows))
        self._obs = (o_key, o_off, o_kv, o_pos, ko, dense, chosen)

    def _places(self, dup: np.ndarray, i_obs: np.ndarray, p_rank: np.ndarray, s_rank: np.ndarray,
                ok_rows: np.ndarray, info_rows: np.ndarray, info_at: int) -> None:
        """With duplicates (a value at two or more offsets): a read or send of a duplicated value stands at the
        offset it carries (when that offset is observed: a read's, an ok send's, a read info send's), not at its
        first copy, and gaps count only values that are not duplicated (``kept``: per slot of the version order,
        how many such values come before it). Without that, a reader that read every record would skip the
        copies and go back to them; the duplicate case already reports them."""
        p_idx = self.bv[self.p_kv]
        m = dup[self.p_kv]
        p_idx[m] = i_obs[p_rank[m]]
        s_idx = self.bv[self.s_kv]
        obs = np.full(len(self.s_kv), -1, dtype=np.int64)
        obs[ok_rows] = s_rank
        obs[info_rows] = info_at + np.arange(len(info_rows))
        m = dup[self.s_kv] & (obs >= 0)
        s_idx[m] = i_obs[obs[m]]
        self.p_idx, self.s_idx, self.dup_kv = p_idx, s_idx, dup
        self.kept = np.concatenate(([0], np.cumsum(~dup[self.by_index])))

    # ------------------------------------------------------------------ successions per process

    def _epochs(self, proc: np.ndarray, key: np.ndarray, pos: np.ndarray, polls: bool) -> np.ndarray | None:
        """A number per (process, key, position) that changes exactly when an assign, subscribe or crash of that
        process between two positions dropped the key (for ``polls``, an info poll too: it may have moved the
        position): successive reads/sends pair up only within one epoch."""
        events = self.events if polls else [e for e in self.events if e[2] != "poll"]
        if not events:
            return None
        n1 = self.n_ops + 1
        K = self.n_keys  # noqa: N806
        cache = self.__dict__.setdefault("_resets", {})
        if polls not in cache:
            at, p, f, v = zip(*events, strict=True)
            at = np.array(at, dtype=np.int64)
            p = np.array(p, dtype=np.int64)
            every = np.sort(p * n1 + at)
            by_name = {n: i for i, n in enumerate(self.key_name)}
            by_topic: dict[str, list[int]] = {}
            for i, t in enumerate(self.key_topic):
                by_topic.setdefault(t, []).append(i)
            kept: list[list[int]] = []
            for fe, ve in zip(f, v, strict=True):
                if fe == "assign":
                    kept.append([k for k in map(by_name.get, set(ve["partitions"])) if k is not None])
                elif fe == "subscribe":
                    kept.append([k for t in set(ve["topics"]) for k in by_topic.get(t, ())])
                else:
                    kept.append([])
            n_kept = np.fromiter(map(len, kept), dtype=np.int64, count=len(kept))
            keys = np.fromiter(chain.from_iterable(kept), dtype=np.int64, count=int(n_kept.sum()))
            kept_codes = (np.repeat(p, n_kept) * K + keys) * n1 + np.repeat(at, n_kept)
            cache[polls] = (every, np.sort(kept_codes))
        every, kept_codes = cache[polls]
        return np.searchsorted(every, proc * n1 + pos) - np.searchsorted(kept_codes, (proc * K + key) * n1 + pos)

    def _successions(self, g_proc: np.ndarray, g_key: np.ndarray, g_pos: np.ndarray,
                     polls: bool) -> tuple[np.ndarray, np.ndarray]:
        """(previous group, group) pairs: one process's successive groups of one key within one epoch."""
        if len(g_proc) < 2:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        code = g_proc * self.n_keys + g_key
        srt = np.argsort(code, kind="stable")  # groups are in position order already
        c = code[srt]
        same = c[1:] == c[:-1]
        ep = self._epochs(g_proc, g_key, g_pos, polls)
        if ep is not None:
            e = ep[srt]
            same &= e[1:] == e[:-1]
        idx = np.flatnonzero(same)
        return srt[idx], srt[idx + 1]

    # ------------------------------------------------------------------ evidence helpers

    def ref(self, pos: int | None) -> dict | None:
        return _op_ref(self.ops, None if pos is None else int(pos))

    def val(self, kv: int) -> Any:
        return self._vobj(int(self.kv_val[kv]))

    def first_read_pos(self) -> np.ndarray:
        if not hasattr(self, "_frp"):
            big = np.iinfo(np.int64).max
            rows = np.full(self.n_kv, big, dtype=np.int64)
            np.minimum.at(rows, self.p_kv, np.arange(len(self.p_kv)))
            self._frr = rows  # first reading row: readers' insertion order
            at = np.append(self.p_pos, -1)  # the row past the end stands for "never read"
            self._frp = at[np.minimum(rows, len(self.p_pos))]
        return self._frp

    def reader_ref(self, kv: int) -> dict | None:
        p = int(self.first_read_pos()[kv])
        return self.ref(p) if p >= 0 else None

    def writer_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per kv: the row of its last send (whose type counts) and of its first (the order writers are listed)."""
        if not hasattr(self, "_wr"):
            n = len(self.s_kv)
            last = np.full(self.n_kv, -1, dtype=np.int64)
            np.maximum.at(last, self.s_kv, np.arange(n))
            big = np.iinfo(np.int64).max
            first = np.full(self.n_kv, big, dtype=np.int64)
            np.minimum.at(first, self.s_kv, np.arange(n))
            self._wr = (last, first)
        return self._wr

    def writer_ref(self, kv: int) -> dict | None:
        row = int(self.writer_rows()[0][kv])
        return self.ref(self.s_pos[row]) if row >= 0 else None

    def skipped(self, key: int, i1: int, i2: int) -> list:
        s = self.key_start[key]
        slots = self.by_index[s + i1 + 1: s + i2]
        if self.kept is not None:
            slots = slots[~self.dup_kv[slots]]
        return [self.val(x) for x in slots]

    def steps(self, key: int, i1: np.ndarray, i2: np.ndarray) -> np.ndarray:
        """Forward steps ``i1 -> i2`` along the version order of ``key`` (arrays), duplicated values not counted:
        1 when the step skipped nothing but copies of duplicated values."""
        if self.kept is None:
            return i2 - i1
        s = self.key_start[key]
        return self.kept[s + i2] - self.kept[s + i1 + 1] + 1

    # ------------------------------------------------------------------ the analysis

    def analyze(self, settings: dict | None) -> CheckResult:
        found: dict[str, list[tuple]] = {a: [] for a in ANOMALIES}  # (sort key, case)
        if self.n_kv:
            self._version_order()
            self._log_cases(found)
            self._write_cases(found)
            self._poll_cases(found)
            self._send_cases(found)
            analyze_txns(self, found, settings)
            fold_torn_skips(found)
        anomalies = {a: [c for _k, c in sorted(found[a], key=itemgetter(0))] for a in ANOMALIES}
        stats = {"ops": len(self.ops), "keys": self.n_keys, "polled_records": self.n_polled}
        return CheckResult(anomalies, acceptable(settings), stats, list(self.key_name))

    def _log_cases(self, found: dict) -> None:
        """inconsistent-offsets (one offset, several values) and duplicate (one value, several offsets)."""
        if not self.conflicted.any() and not self.dup_chosen:
            return
        o_key, o_off, o_kv, _o_pos, ko, dense, _chosen = self._obs
        # distinct (ko, kv) in order of first observation: per offset, its values in the order they were seen
        _fits(len(dense), self.n_kv)
        pair, _ = pd.factorize(ko * self.n_kv + o_kv)
        rows = _first_rows(pair.astype(np.int64, copy=False))
        per_off: dict[int, list[int]] = {}
        for r in rows.tolist():
            per_off.setdefault(int(ko[r]), []).append(int(o_kv[r]))
        key_of_ko = {int(ko[r]): (int(o_key[r]), int(o_off[r]), int(dense[ko[r]])) for r in rows.tolist()}
        value_offsets: dict[int, list[tuple[int, int, int]]] = {}  # kv -> [(dense index, offset, place)]
        for k_o, kvs in per_off.items():
            key, off, i = key_of_ko[k_o]
            if len(kvs) > 1:
                vals = [self.val(x) for x in kvs]
                found["inconsistent-offsets"].append(((key, off), {
                    "key": self.key_name[key], "offset": off, "values": vals,
                    "writers": [self.writer_ref(x) for x in kvs],
                    "readers": [self.reader_ref(x) for x in kvs]}))
            for place, x in enumerate(kvs):
                value_offsets.setdefault(x, []).append((i, off, place))
        for x, at in value_offsets.items():
            if len(at) > 1:
                at.sort()
                key = int(self.kv_key[x])
                found["duplicate"].append(((key, at[0][0], at[0][2]), {
                    "key": self.key_name[key], "value": self.val(x), "count": len(at),
                    "offsets": [off for _i, off, _p in at], "writer": self.writer_ref(x),
                    "reader": self.reader_ref(x)}))

    def _write_cases(self, found: dict) -> None:
        """G1a (a failed send read), lost-write (acknowledged, unread, below what was read) and unseen."""
        last, first = self.writer_rows()
        written = last >= 0
        w_typ = np.full(self.n_kv, -1, dtype=np.int8)
        w_typ[written] = self.s_typ[last[written]]
        g1a = np.flatnonzero(self.is_read & (w_typ == _FAIL))
        if len(g1a):
            self.first_read_pos()
            for x in g1a.tolist():
                key = int(self.kv_key[x])
                found["G1a"].append(((key, int(self._frr[x])), {
                    "key": self.key_name[key], "value": self.val(x), "writer": self.writer_ref(x),
                    "reader": self.reader_ref(x)}))
        unread = np.flatnonzero(~self.is_read & (w_typ == _OK))
        if not len(unread):
            return
        fi, li = self.first_index, self.last_index
        read_kv = np.flatnonzero(self.is_read & (fi >= 0))
        bound = np.full(self.n_keys, -1, dtype=np.int64)
        np.maximum.at(bound, self.kv_key[read_kv], fi[read_kv])
        bound_kv: dict[int, int] = {}
        for x in unread.tolist():
            key = int(self.kv_key[x])
            b = int(bound[key])
            i_last = int(li[x])
            order = (key, int(first[x]))
            if i_last >= 0 and i_last <= b:
                if key not in bound_kv:  # the highest read value; ties go to the one read first
                    self.first_read_pos()
                    at = read_kv[(self.kv_key[read_kv] == key) & (fi[read_kv] == b)]
                    bound_kv[key] = int(at[np.argmin(self._frr[at])])
                bk = bound_kv[key]
                found["lost-write"].append((order, {
                    "key": self.key_name[key], "value": self.val(x), "index": int(fi[x]), "max_read_index": b,
                    "max_read_value": self.val(bk), "writer": self.writer_ref(x), "max_read": self.reader_ref(bk)}))
            else:
                found["unseen"].append((order, {
                    "key": self.key_name[key], "value": self.val(x), "index": i_last if i_last >= 0 else None,
                    "max_read_index": b, "writer": self.writer_ref(x)}))

    def _inner(self, found: dict, kv: np.ndarray, idx: np.ndarray, key: np.ndarray, pos: np.ndarray,
               starts: np.ndarray, skip: str, back: str) -> None:
        """Successive values inside one group (a poll's or a batch's records of one key) must be successive
        in the version order (``idx``: each row's place in it)."""
        if len(kv) < 2:
            return
        inner = np.ones(len(kv) - 1, dtype=bool)
        inner[starts[1:] - 1] = False  # the last row of a group pairs with nothing
        d = idx[1:] - idx[:-1]
        bad = np.flatnonzero(inner & (idx[1:] >= 0) & (idx[:-1] >= 0) & (d != 1))
        if self.kept is not None and len(bad):  # a step over duplicated values only is no skip
            fwd = d[bad] > 1
            bad = bad[~fwd | (self.steps(key[bad], idx[bad], idx[bad + 1]) > 1)]
        for r in bad.tolist():
            a, b, dd, k = int(kv[r]), int(kv[r + 1]), int(d[r]), int(key[r])
            case = {"key": self.key_name[k], "values": [self.val(a), self.val(b)], "delta": dd}
            if dd > 1:
                i1 = int(idx[r])
                case["delta"] = int(self.steps(k, i1, i1 + dd))
                case["skipped"] = self.skipped(k, i1, i1 + dd)
                case["op"] = self.ref(pos[r])
                found[skip].append(((k, int(pos[r]), r), case))
            else:
                case["op"] = self.ref(pos[r])
                found[back].append(((k, int(pos[r]), r), case))

    def _across(self, found: dict, kv: np.ndarray, idx: np.ndarray, key: np.ndarray, pos: np.ndarray,
                proc: np.ndarray, starts: np.ndarray, skips: bool, name: Callable[[int], str], polls: bool) -> None:
        """One process's successive groups of a key: the last value of one against the first of the next, in
        the version order (``idx``: each row's place in it); a step back (or in place) is a case, and a step
        forward over a value that is not duplicated too if ``skips``; ``name(delta)`` says which anomaly."""
        if not len(starts):
            return
        ends = np.append(starts[1:], len(kv)) - 1
        g_key, g_pos = key[starts], pos[starts]
        prev, cur = self._successions(proc[starts], g_key, g_pos, polls)
        i1 = idx[ends[prev]]
        i2 = idx[starts[cur]]
        d = i2 - i1
        flag = (i1 >= 0) & (i2 >= 0) & ((d != 1) if skips else (d < 1))
        if skips and self.kept is not None:
            fwd = np.flatnonzero(flag & (d > 1))
            flag[fwd[self.steps(g_key[cur[fwd]], i1[fwd], i2[fwd]) <= 1]] = False
        for j in np.flatnonzero(flag).tolist():
            p, c = int(prev[j]), int(cur[j])
            k, dd = int(g_key[c]), int(d[j])
            a, b = int(kv[ends[p]]), int(kv[starts[c]])
            case = {"key": self.key_name[k], "values": [self.val(a), self.val(b)], "delta": dd}
            if dd > 1:
                case["delta"] = int(self.steps(k, int(i1[j]), int(i2[j])))
                case["skipped"] = self.skipped(k, int(i1[j]), int(i2[j]))
            case["ops"] = [self.ref(g_pos[p]), self.ref(g_pos[c])]
            found[name(dd)].append(((k, int(g_pos[c])), case))

    def poll_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Polled rows grouped by (operation, key): (row permutation, group starts), computed once."""
        if not hasattr(self, "_pgroups"):
            self._pgroups = _groups(self.p_seg, self.p_key, self.n_keys)
        return self._pgroups

    def _poll_cases(self, found: dict) -> None:
        """poll-skip / nonmonotonic-poll across a process's polls; int-* inside one poll."""
        perm, starts = self.poll_groups()
        kv, key, pos, proc = self.p_kv[perm], self.p_key[perm], self.p_pos[perm], self.p_proc[perm]
        idx = self.bv[kv] if self.p_idx is None else self.p_idx[perm]
        self._inner(found, kv, idx, key, pos, starts, "int-poll-skip", "int-nonmonotonic-poll")
        self._across(found, kv, idx, key, pos, proc, starts, True,
                     lambda d: "poll-skip" if d > 1 else "nonmonotonic-poll", polls=True)

    def _send_cases(self, found: dict) -> None:
        """nonmonotonic-send across a process's sends; int-* inside one batch. Failed sends took no place."""
        live = np.flatnonzero(self.s_typ != _FAIL)
        perm, starts = _groups(self.s_seg[live], self.s_key[live], self.n_keys)
        rows = live[perm]
        kv, key, pos, proc = self.s_kv[rows], self.s_key[rows], self.s_pos[rows], self.s_proc[rows]
        idx = self.bv[kv] if self.s_idx is None else self.s_idx[rows]
        self._inner(found, kv, idx, key, pos, starts, "int-send-skip", "int-nonmonotonic-send")
        # a later send landing anywhere before an earlier one (or at it) is a case; gaps are other producers'
        self._across(found, kv, idx, key, pos, proc, starts, False, lambda d: "nonmonotonic-send", polls=False)


def check(ops: Iterable[dict], settings: dict | None = None) -> CheckResult:
    """Convenience wrapper accepting any iterable of operations."""
    return analyze(ops if isinstance(ops, Sequence) else list(ops), settings)
