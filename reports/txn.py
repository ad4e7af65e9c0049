"""The transactional analyses (Jepsen's Kafka checker, jepsen/tests/kafka.clj): precommitted reads, torn
(intermediate) reads, and cycles of write-read (G1c) and write-write (G0) dependencies between operations.

They run on the columns of :mod:`reports.checkers` (one row per sent and per polled record, each carrying the
position of its operation; a ``txn`` is one operation with its sends and its reads, history/schema.py) and the
version order built there (per partition, the values in log order). ``G1a`` (aborted read) needs nothing more: a
failed txn's sends are failed sends, so the queue checker's ``G1a`` is Jepsen's aborted read.

Definitions (Jepsen's names; "committed" = an ``ok`` txn; ``info`` and never-completed txns are neither committed
nor aborted, so no anomaly here rests on their outcome):

- ``precommitted-read``: a value was read before its writing transaction could have committed. Jepsen's case
  (``precommitted-read-cases``): a transaction read a value it wrote itself - Kafka's read_committed consumers
  never see records of an open transaction, not even their own. Ours adds the other provable case: the read
  completed before the writing transaction was invoked.
- ``torn`` (Jepsen's "intermediate read", point 7 of the namespace docstring, which Jepsen leaves open): an
  operation R read some of a committed transaction T's records, and T has another record in a partition at an
  offset inside the range R read there (between the lowest and highest offset R read of that partition), which R
  did not read. A read_committed fetch returns every committed record of the range it covers (the LSO passes a
  transaction's record only once its marker is written), so T was seen in part. The same read skipped a record,
  so its ``int-poll-skip`` case is folded into the ``torn`` case (one anomaly, one report).
- ``G1c`` (Adya; Jepsen's ``g1c-pure-wr-test``): a cycle of write-read edges between committed operations. An
  edge W -> R: R read a value W wrote (Jepsen's ``wr-graph``: every value read, not only the last). Under
  read_committed, R reading W's value means W committed before R did, so a cycle is impossible: circular
  information flow (Jepsen found it in Redpanda).
- ``G0``: a cycle of write-write edges. W1 -> W2: W2 wrote the value right after W1's in a partition's version
  order (Jepsen's ``ww-graph``). Built only when the run's settings ask for it (``ww_deps``, Jepsen's
  ``:ww-deps``), and always acceptable: "G0 is always allowed, since writes are never isolated" (Jepsen's
  ``allowed-error-types``) - open transactions append in any interleaving. Cycles that need both ww and wr
  edges are not reported: with ww edges they are normal in Kafka (Jepsen allows ``G1c`` under ``:ww-deps``);
  a pure-wr cycle is always ``G1c``.

Each cycle is found as Elle finds them (reports.cycles): strongly connected components, then one shortest cycle
per component, reported with its operations and, per edge, the value that makes it (minimal evidence).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .cycles import _trim, prune_by_order, shortest_cycles

_OK, _INFO, _FAIL = 0, 1, 2  # (as reports.checkers' send types)
TXN_ANOMALIES = ("precommitted-read", "torn", "G1c", "G0")


def _unique(codes: np.ndarray, counts: bool = False) -> tuple[np.ndarray, ...]:
    """``np.unique(codes, return_index=True[, return_counts=True])`` for codes that are nearly sorted already
    (history order): a stable sort (timsort: near-linear on such input) and a diff, where np.unique's hashing
    took seconds."""
    order = np.argsort(codes, kind="stable")
    srt = codes[order]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = srt[1:] != srt[:-1]
    if not counts:
        return srt[new], order[new]
    at = np.flatnonzero(new)
    return srt[new], order[new], np.diff(np.append(at, len(srt)))


def _member(sorted_u: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.isin(x, sorted_u)`` for sorted unique ``sorted_u``."""
    if not len(sorted_u):
        return np.zeros(len(x), dtype=bool)
    j = np.minimum(np.searchsorted(sorted_u, x), len(sorted_u) - 1)
    return sorted_u[j] == x


def analyze_txns(c: Any, found: dict[str, list[tuple]], settings: dict | None) -> None:
    """Add the transactional cases of the run in columns ``c`` (a ``reports.checkers._Columns`` after its
    version order) to ``found`` (anomaly -> [(sort key, case)])."""
    if not c.t_ops:
        return
    t_pos = np.array([t[0] for t in c.t_ops], dtype=np.int64)
    t_typ = [t[2] for t in c.t_ops]
    t_inv = np.array([t[3] for t in c.t_ops], dtype=np.int64)
    last, _first = c.writer_rows()
    has_w = last >= 0
    w_pos = np.full(c.n_kv, -1, dtype=np.int64)  # per value: the position of its (last) writer
    w_pos[has_w] = c.s_pos[last[has_w]]
    w_typ = np.full(c.n_kv, -1, dtype=np.int8)
    w_typ[has_w] = c.s_typ[last[has_w]]
    r_w = w_pos[c.p_kv]  # per polled row: its value's writer
    r_wt = w_typ[c.p_kv]
    _precommitted(c, found, t_pos, t_inv, r_w, r_wt)
    _torn(c, found, t_pos, np.array([t == "ok" for t in t_typ], dtype=bool), r_w, r_wt)
    _wr_cycles(c, found, r_w, r_wt)
    if (settings or {}).get("ww_deps"):
        _ww_cycles(c, found, w_pos, w_typ)


def _precommitted(c: Any, found: dict, t_pos: np.ndarray, t_inv: np.ndarray, r_w: np.ndarray,
                  r_wt: np.ndarray) -> None:
    own = np.flatnonzero(r_w == c.p_pos)  # a txn read its own write (polled rows come only from ok reads)
    early = np.zeros(0, dtype=np.int64)
    if c.op_time is not None:
        times = np.asarray(c.op_time, dtype=np.int64)
        inv_at = np.full(c.n_ops + 1, -1, dtype=np.int64)  # position -> its txn's invoke (the last slot: none)
        inv_at[t_pos] = t_inv  # (-1 where its invoke is unknown: no claim)
        inv = np.where(r_wt != _FAIL, inv_at[r_w], -1)  # (r_w = -1, no writer: the last slot)
        by_txn = inv >= 0
        early = np.flatnonzero(by_txn & (inv >= 0) & (times[c.p_pos] < times[np.maximum(inv, 0)]))
    seen: set[tuple[int, int]] = set()
    for rows, why in ((own, "the transaction read its own write"),
                      (early, "the read completed before the writing transaction was invoked")):
        for r in rows.tolist():
            kv, pos = int(c.p_kv[r]), int(c.p_pos[r])
            if (pos, kv) in seen:
                continue
            seen.add((pos, kv))
            key = int(c.p_key[r])
            found["precommitted-read"].append(((key, pos, r), {
                "key": c.key_name[key], "value": c.val(kv), "offset": int(c.p_off[r]), "why": why,
                "writer": c.ref(int(r_w[r])), "reader": c.ref(pos)}))


def _torn(c: Any, found: dict, t_pos: np.ndarray, t_ok: np.ndarray, r_w: np.ndarray, r_wt: np.ndarray) -> None:
    """Readers that saw part of a committed txn and skipped the rest inside a range they read."""
    # committed txns with two or more records at known offsets (a txn of one record cannot be seen in part)
    is_committed = np.zeros(c.n_ops + 1, dtype=bool)  # per position (the last slot: no writer, -1)
    is_committed[t_pos[t_ok]] = True
    s_rows = np.flatnonzero(c.s_has_off & (c.s_typ == _OK))
    s_rows = s_rows[is_committed[c.s_pos[s_rows]]]
    if not len(s_rows) or not len(c.p_kv):
        return
    s_at = c.s_pos[s_rows]
    first = np.ones(len(s_at), dtype=bool)
    first[1:] = s_at[1:] != s_at[:-1]
    starts_at = np.flatnonzero(first)
    cnt = np.diff(np.append(starts_at, len(s_at)))
    multi = s_at[starts_at[cnt > 1]]
    if not len(multi):
        return
    is_multi = np.zeros(c.n_ops + 1, dtype=bool)
    is_multi[multi] = True
    s_rows = s_rows[is_multi[s_at]]
    s_at = c.s_pos[s_rows]
    # (reader, txn) pairs: a reader read a value such a txn (other than itself) wrote
    rows = np.flatnonzero(is_multi[r_w])
    rows = rows[(r_w[rows] != c.p_pos[rows]) & (r_wt[rows] == _OK)]
    if not len(rows):
        return
    perm, starts = c.poll_groups()
    rows = rows[_readers_with_gaps(c, perm, starts, s_rows, is_multi, r_w, r_wt)[c.p_pos[rows]]]
    if not len(rows):
        return
    n1 = c.n_ops + 1
    read_codes, first_read = _unique(c.p_pos[rows] * c.n_kv + c.p_kv[rows])  # (every read of these txns' values)
    once = rows[np.sort(first_read)]  # a value read twice counts once: the reader read n_read distinct records
    pair, _i, n_read = _unique(c.p_pos[once] * n1 + r_w[once], counts=True)
    writers = pair % n1
    lo = np.searchsorted(s_at, writers, "left")
    cnt = np.searchsorted(s_at, writers, "right") - lo
    part = n_read < cnt  # a reader that read every record of the txn saw it whole (values are unique)
    pair, writers, lo, cnt = pair[part], writers[part], lo[part], cnt[part]
    if not len(pair):
        return
    readers = pair // n1
    rep = np.repeat(np.arange(len(pair)), cnt)
    within = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    srow = s_rows[lo[rep] + within]
    rd, key, off, kv = readers[rep], c.s_key[srow], c.s_off[srow], c.s_kv[srow]
    # each reader's offset range per partition: its records of a partition are one group (reports.checkers)
    g_code = c.p_pos[perm[starts]] * c.n_keys + c.p_key[perm[starts]]
    offs = c.p_off[perm]
    mn, mx = np.minimum.reduceat(offs, starts), np.maximum.reduceat(offs, starts)
    g_order = np.argsort(g_code, kind="stable")
    g_code, mn, mx = g_code[g_order], mn[g_order], mx[g_order]
    q = rd * c.n_keys + key
    j = np.minimum(np.searchsorted(g_code, q), len(g_code) - 1)
    covered = (g_code[j] == q) & (mn[j] <= off) & (off <= mx[j])
    cand = np.flatnonzero(covered)
    if not len(cand):
        return
    bad = cand[~_member(read_codes, rd[cand] * c.n_kv + kv[cand])]
    cases: dict[tuple[int, int], dict] = {}
    for b in bad.tolist():
        r, w = int(rd[b]), int(writers[rep[b]])
        case = cases.get((r, w))
        if case is None:
            seen_rows = rows[(c.p_pos[rows] == r) & (r_w[rows] == w)]
            case = cases[(r, w)] = {
                "key": c.key_name[int(key[b])], "missing": [], "read": [
                    {"key": c.key_name[int(c.p_key[x])], "offset": int(c.p_off[x]), "value": c.val(int(c.p_kv[x]))}
                    for x in seen_rows.tolist()],
                "writer": c.ref(w), "reader": c.ref(r)}
            found["torn"].append(((int(key[b]), r, w), case))
        case["missing"].append({"key": c.key_name[int(key[b])], "offset": int(off[b]), "value": c.val(int(kv[b])),
                                "read_range": [int(mn[j[b]]), int(mx[j[b]])]})


def _readers_with_gaps(c: Any, perm: np.ndarray, starts: np.ndarray, s_rows: np.ndarray, is_multi: np.ndarray,
                       r_w: np.ndarray, r_wt: np.ndarray) -> np.ndarray:
    """Per position: whether that reader has a group (its records of one partition) that may have skipped a
    record of a committed multi-record txn inside the offset range it read. A group is clean when it read
    each such record of that range exactly once at its sent offset: as many such records lie in the range
    (``s_rows``: their sends, by partition and offset) as the group read (strictly increasing offsets: no
    record twice). Only readers with an unclean group can have a torn read; counting is a few array passes,
    where pairing every (reader, txn) with every record of the txn was most of the check's time."""
    n_groups = len(starts)
    offs = c.p_off[perm]
    g_key = c.p_key[perm[starts]]
    mn, mx = np.minimum.reduceat(offs, starts), np.maximum.reduceat(offs, starts)
    big = int(max(int(mx.max()) if n_groups else 0, int(c.s_off[s_rows].max()) if len(s_rows) else 0)) + 2
    codes = np.sort(c.s_key[s_rows] * big + c.s_off[s_rows])
    in_range = (np.searchsorted(codes, g_key * big + mx, "right") - np.searchsorted(codes, g_key * big + mn, "left"))
    # the rows each group read that are such records at their sent offset
    last, _first = c.writer_rows()
    kv = c.p_kv[perm]
    w_row = last[kv]
    match = is_multi[r_w[perm]] & (r_wt[perm] == _OK) & (w_row >= 0)
    match &= c.s_has_off[np.maximum(w_row, 0)] & (c.s_off[np.maximum(w_row, 0)] == offs)
    got = np.add.reduceat(match.astype(np.int64), starts) if n_groups else np.zeros(0, np.int64)
    inc = np.ones(len(perm), dtype=bool)
    if len(perm) > 1:
        inc[1:] = offs[1:] > offs[:-1]
    inc[starts] = True
    strict = np.logical_and.reduceat(inc, starts) if n_groups else np.zeros(0, bool)
    unclean = (got != in_range) | ~strict
    out = np.zeros(c.n_ops + 1, dtype=bool)
    out[c.p_pos[perm[starts[unclean]]]] = True
    return out


def _cycles(c: Any, found: dict, name: str, src: np.ndarray, dst: np.ndarray, why: np.ndarray, kind: str) -> None:
    """Shortest cycles per strongly connected component of the graph ``src -> dst`` (operation positions);
    ``why[i]``: the value row (a polled row for wr, a kv pair for ww) that makes edge i."""
    keep = prune_by_order(src, dst)  # (positions are history order)
    src, dst, why = src[keep], dst[keep], why[keep]
    if not len(src):
        return
    n = int(max(src.max(), dst.max())) + 1
    s2, d2 = _trim(n, src, dst)
    if not len(s2):
        return
    live = np.zeros(n, dtype=bool)  # vertices the trimming kept: edges between them are its edges
    live[s2] = True
    live[d2] = True
    keep = live[src] & live[dst]
    src, dst, why = src[keep], dst[keep], why[keep]
    nodes, idx = np.unique(np.concatenate((src, dst)), return_inverse=True)
    s, d = idx[: len(src)], idx[len(src):]
    edge_at = {}
    for i, (a, b) in enumerate(zip(s.tolist(), d.tolist(), strict=True)):
        edge_at.setdefault((a, b), i)
    for cyc in shortest_cycles(len(nodes), s, d):
        steps = []
        for a, b in zip(cyc, cyc[1:], strict=False):
            i = edge_at[(a, b)]
            if kind == "wr":
                r = int(why[i])
                steps.append({"type": "wr", "key": c.key_name[int(c.p_key[r])], "value": c.val(int(c.p_kv[r])),
                              "offset": int(c.p_off[r]), "from": int(nodes[a]), "to": int(nodes[b])})
            else:
                v1, v2 = int(why[i][0]), int(why[i][1])
                steps.append({"type": "ww", "key": c.key_name[int(c.kv_key[v1])], "value": c.val(v1),
                              "value'": c.val(v2), "from": int(nodes[a]), "to": int(nodes[b])})
        ops = [c.ref(int(nodes[v])) for v in cyc[:-1]]
        first_key = int(c.p_key[int(why[edge_at[(cyc[0], cyc[1])]])]) if kind == "wr" else \
            int(c.kv_key[int(why[edge_at[(cyc[0], cyc[1])]][0])])
        found[name].append(((first_key, int(nodes[cyc[0]])), {
            "key": c.key_name[first_key], "length": len(cyc) - 1, "cycle": ops, "steps": steps}))


def _wr_cycles(c: Any, found: dict, r_w: np.ndarray, r_wt: np.ndarray) -> None:
    """G1c: write-read edges between committed operations (ok writer, ok reader: polled rows are ok reads)."""
    rows = np.flatnonzero((r_wt == _OK) & (r_w >= 0) & (r_w != c.p_pos))
    if not len(rows):
        return
    n1 = c.n_ops + 1
    _u, first = _unique(c.p_pos[rows] * n1 + r_w[rows])
    rows = rows[first]
    _cycles(c, found, "G1c", r_w[rows], c.p_pos[rows], rows, "wr")


def _ww_cycles(c: Any, found: dict, w_pos: np.ndarray, w_typ: np.ndarray) -> None:
    """G0: write-write edges from each partition's version order, between committed writers."""
    by = c.by_index
    if len(by) < 2:
        return
    a, b = by[:-1], by[1:]
    same_key = np.ones(len(a), dtype=bool)
    inner = c.key_start[1:-1]
    same_key[inner[(inner > 0) & (inner < len(by))] - 1] = False
    ok = same_key & (w_typ[a] == _OK) & (w_typ[b] == _OK) & (w_pos[a] != w_pos[b])
    a, b = a[ok], b[ok]
    if not len(a):
        return
    n1 = c.n_ops + 1
    _u, first = _unique(w_pos[b] * n1 + w_pos[a])
    a, b = a[first], b[first]
    _cycles(c, found, "G0", w_pos[a], w_pos[b], np.stack((a, b), axis=1), "ww")


def fold_torn_skips(found: dict[str, list[tuple]]) -> None:
    """Drop the ``int-poll-skip`` cases a ``torn`` case explains (same read, same partition, every skipped value
    one of the transaction's missing records): one anomaly, one report."""
    if not found.get("torn") or not found.get("int-poll-skip"):
        return
    missing: dict[tuple[int, str], set] = {}
    for _k, case in found["torn"]:
        r = case["reader"]["index"]
        for m in case["missing"]:
            missing.setdefault((r, m["key"]), set()).add(_hashable(m["value"]))
    keep = []
    for item in found["int-poll-skip"]:
        case = item[1]
        got = missing.get((case["op"]["index"], case["key"]))
        if got is None or not all(_hashable(v) in got for v in case.get("skipped", ())):
            keep.append(item)
    found["int-poll-skip"] = keep


def _hashable(v: Any) -> Any:
    return v if isinstance(v, str | int | float | type(None)) else repr(v)


def _who(op: dict | None) -> str:
    if not op:
        return "?"
    v = op.get("value") or {}
    tid = v.get("txn_id") if isinstance(v, dict) else None
    return f"op {op['index']} ({op['f']} {op['type']}, process {op['process']}{', ' + tid if tid else ''})"


def describe(anomaly: str, case: dict) -> str | None:
    """One line a person reads first on an anomaly card (the case's JSON follows it); None for the queue
    checker's anomalies, whose cases speak for themselves."""
    if anomaly in ("G1c", "G0"):
        cyc = case.get("cycle") or []
        parts = []
        for op, step in zip(cyc, case.get("steps") or [], strict=False):
            later = step.get("value'")
            what = f"{step['key']} {step['value']!r}" + (f" < {later!r}" if step["type"] == "ww" else "")
            parts.append(f"{_who(op)} -{step['type']} {what}->")
        return "cycle: " + " ".join(parts) + (f" {_who(cyc[0])}" if cyc else "")
    if anomaly == "torn":
        miss = ", ".join(f"{m['key']}@{m['offset']} {m['value']!r}" for m in case.get("missing", []))
        seen = ", ".join(f"{r['key']}@{r['offset']} {r['value']!r}" for r in case.get("read", []))
        return (f"{_who(case.get('reader'))} read {seen} of committed {_who(case.get('writer'))} but not {miss}, "
                "inside the offsets it read")
    if anomaly == "precommitted-read":
        return (f"{_who(case.get('reader'))} read {case['key']}@{case['offset']} {case['value']!r} written by "
                f"{_who(case.get('writer'))}: {case['why']}")
    if anomaly == "G1a":
        return (f"{_who(case.get('reader'))} read {case['key']} {case['value']!r} written by "
                f"{_who(case.get('writer'))}, which failed (aborted)")
    return None
