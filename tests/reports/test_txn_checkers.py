"""The transactional checkers (reports.txn, reports.cycles) on Jepsen's own cases and on a corpus of generated
transactional histories: clean ones (aborts on purpose, info and never-completed txns, consume-transform-produce)
raise nothing; each injected anomaly is found, and only by the checker meant for it."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from history import History, read_jsonl, write_jsonl
from reports import synth
from reports.analysis import check_history, run_checks
from reports.checkers import analyze
from reports.cycles import shortest_cycles, strongly_connected

SEEDS = (0, 1, 2)


def _ops(steps: list[tuple]) -> list[dict]:
    return [{"run_id": "j", "index": i, "time_ns": i * 10, "process": p, "type": typ, "f": f, "value": v}
            for i, (p, typ, f, v) in enumerate(steps)]


def _s(v: str, k: int, off: int | None = None) -> dict:
    m = {"f": "send", "topic": "x", "partition": k, "key": None, "value": v}
    return m if off is None else {**m, "offset": off}


def _r(v: str, k: int, off: int) -> dict:
    return {"topic": "x", "partition": k, "offset": off, "key": None, "value": v}


def _t(*mops: dict) -> dict:
    return {"txn_id": "t", "ops": list(mops)}


# ---------------------------------------------------------------- Jepsen's tests (jepsen/test/jepsen/tests/kafka_test.clj)

def test_jepsen_g1c_pure_wr() -> None:
    """g1c-pure-wr-test: t1 and t2 each read the other's write."""
    res = analyze(_ops([(0, "invoke", "txn", _t(_s("a", 0), {"f": "poll"})),
                        (1, "invoke", "txn", _t(_s("b", 1), {"f": "poll"})),
                        (0, "ok", "txn", _t(_s("a", 0, 0), {"f": "poll", "records": [_r("b", 1, 0)]})),
                        (1, "ok", "txn", _t(_s("b", 1, 0), {"f": "poll", "records": [_r("a", 0, 0)]}))]))
    assert res.found == {"G1c"}
    case = res.anomalies["G1c"][0]
    assert case["length"] == 2 and [op["index"] for op in case["cycle"]] == [2, 3]
    assert [(s["type"], s["key"], s["value"]) for s in case["steps"]] == [("wr", "x/0", "a"), ("wr", "x/1", "b")]


def test_jepsen_g0_only_with_ww_deps_and_acceptable() -> None:
    """g0-test: two txns write x and y in opposite orders; Jepsen allows G0 (writes are never isolated)."""
    ops = _ops([(0, "invoke", "txn", _t(_s("a", 0), _s("a", 1))), (1, "invoke", "txn", _t(_s("b", 0), _s("b", 1))),
                (0, "ok", "txn", _t(_s("a", 0, 0), _s("a", 1, 1))), (1, "ok", "txn", _t(_s("b", 0, 1), _s("b", 1, 0))),
                (2, "invoke", "poll", {}),
                (2, "ok", "poll", {"records": [_r("a", 0, 0), _r("b", 0, 1), _r("b", 1, 0), _r("a", 1, 1)]})])
    assert analyze(ops).found == frozenset()
    res = analyze(ops, {"ww_deps": True})
    assert res.found == {"G0"} and res.valid
    assert [(s["type"], s["key"]) for s in res.anomalies["G0"][0]["steps"]] == [("ww", "x/0"), ("ww", "x/1")]


def test_jepsen_g1c_with_ww_edges_is_not_reported() -> None:
    """g1c-ww-wr-test: t1 -wr-> t2 -ww-> t1. Normal in Kafka (Jepsen allows G1c under :ww-deps): not reported;
    only pure write-read cycles are G1c here."""
    ops = _ops([(0, "invoke", "txn", _t(_s("a", 0), _s("c", 1))), (1, "invoke", "txn", _t({"f": "poll"}, _s("b", 1))),
                (0, "ok", "txn", _t(_s("a", 0, 0), _s("c", 1, 2))),
                (1, "ok", "txn", _t({"f": "poll", "records": [_r("a", 0, 0)]}, _s("b", 1, 1))),
                (2, "invoke", "poll", {}), (2, "ok", "poll", {"records": [_r("b", 1, 1), _r("c", 1, 2)]})])
    assert analyze(ops, {"ww_deps": True}).found == frozenset()


def test_jepsen_precommitted_read() -> None:
    res = analyze(_ops([(0, "invoke", "txn", _t(_s("a", 0), {"f": "poll"})),
                        (0, "ok", "txn", _t(_s("a", 0, 0), {"f": "poll", "records": [_r("a", 0, 0)]}))]))
    assert res.found == {"precommitted-read"}
    assert res.anomalies["precommitted-read"][0]["why"] == "the transaction read its own write"


def test_read_before_the_writer_was_invoked_is_precommitted() -> None:
    res = analyze(_ops([(1, "invoke", "poll", {}), (1, "ok", "poll", {"records": [_r("a", 0, 0)]}),
                        (0, "invoke", "txn", _t(_s("a", 0))), (0, "ok", "txn", _t(_s("a", 0, 0)))]))
    assert res.found == {"precommitted-read"}
    assert "before the writing transaction was invoked" in res.anomalies["precommitted-read"][0]["why"]


def test_indeterminate_txns_are_neither_committed_nor_aborted() -> None:
    """A read of an info txn's value is no aborted read; an info txn seen in part is not torn."""
    res = analyze(_ops([(0, "invoke", "txn", _t(_s("a", 0), _s("b", 0))), (0, "info", "txn", _t(_s("a", 0), _s("b", 0))),
                        (2, "invoke", "send", {"topic": "x", "partition": 0, "key": None, "value": "c"}),
                        (2, "ok", "send", {"topic": "x", "partition": 0, "key": None, "value": "c", "offset": 2}),
                        (1, "invoke", "poll", {}), (1, "ok", "poll", {"records": [_r("a", 0, 0), _r("c", 0, 2)]})]))
    assert not res.found & {"G1a", "torn", "precommitted-read", "G1c"}


# ---------------------------------------------------------------- the corpus

def _clean(seed: int) -> History:
    return synth.generate_txn(f"txn-{seed}", seed=seed, n_ops=2500)


@pytest.mark.parametrize("seed", SEEDS)
def test_clean_transactional_histories_raise_nothing(seed: int) -> None:
    h = _clean(seed)
    types = {(op["f"], op["type"]) for op in h.ops}
    assert {("txn", "ok"), ("txn", "fail"), ("txn", "info")} <= types  # committed, aborted, unknown
    assert any(op["f"] == "txn" and op["type"] == "ok" and "offsets" in op["value"] for op in h.ops)  # c-t-p
    assert h.ops[-1]["f"] == "poll"
    assert analyze(h.ops, h.settings).found == frozenset()
    assert analyze(h.ops, {**h.settings, "ww_deps": True}).found == frozenset()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", synth.TXN_SCENARIOS)
def test_each_injected_anomaly_is_found_by_its_checker_only(kind: str, seed: int) -> None:
    h = synth.with_txn_anomaly(_clean(seed), kind)
    res = analyze(h.ops, h.settings)
    assert res.found == {kind}, res.counts
    assert res.bad == (frozenset() if kind == "G0" else {kind})
    case = res.anomalies[kind][0]
    assert case["key"].startswith(synth.TXN_ANOMALY_TOPIC + "/")  # the partition the scenario wrote


def test_corpus_from_files_on_the_typed_path_and_whole_verdicts(tmp_path) -> None:  # noqa: ANN001
    """Written and read back (the typed path: msgspec), checked as the CLI checks (with linearizability): the
    clean run is valid, every injected one invalid for its anomaly alone (G0: found, acceptable)."""
    base = _clean(7)
    for kind in (None, *synth.TXN_SCENARIOS):
        h = base if kind is None else synth.with_txn_anomaly(base, kind)
        p = str(tmp_path / f"{kind}.jsonl")
        write_jsonl(h, p)
        (run,) = read_jsonl(p)
        assert run.columns is not None and run.columns.t_ops, "read on the typed path"
        v = check_history(run, budget_s=5)
        # the log model knows an aborted txn's records are never appended: the aborted read is illegal there too
        assert v.lin == {"partition-log": "illegal" if kind == "G1a" else "ok", "committed-offsets": "ok"}
        assert v.bad == ([] if kind in (None, "G0") else [kind]), (kind, v)
        assert set(v.anomaly_counts) == (set() if kind is None else {kind})


def test_skipped_lines_do_not_make_txn_anomalies_unprovable(tmp_path) -> None:  # noqa: ANN001
    """None of the txn anomalies rests on the absence of an operation: each stands in a file with a skipped line."""
    h = synth.with_txn_anomaly(_clean(3), "torn")
    p = tmp_path / "torn.jsonl"
    write_jsonl(h, str(p))
    lines = p.read_text().splitlines()
    lines.insert(5, "{corrupt")
    p.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (run,) = read_jsonl(str(p), skip_corrupt=True)
    res, _lin = run_checks(run, budget_s=5)
    assert run.skipped_lines and "torn" in res.bad


# ---------------------------------------------------------------- cycle search

def test_cycle_search_needs_no_recursion_and_finds_the_shortest_in_small_components() -> None:
    n = 200_000
    src = np.append(np.arange(n - 1), [n - 1, 9, 12])
    dst = np.append(np.arange(1, n), [0, 0, 11])
    limit = sys.getrecursionlimit()
    comps, _adj = strongly_connected(n, src, dst)
    assert len(comps) == 1 and len(comps[0]) == n and sys.getrecursionlimit() == limit
    # two small components: a 3-cycle with a chord making a 2-cycle, and a 4-cycle; a DAG part trimmed away
    s = np.array([0, 1, 2, 1, 10, 11, 12, 13, 20, 21])
    d = np.array([1, 2, 0, 0, 11, 12, 13, 10, 21, 22])
    assert shortest_cycles(30, s, d) == [[0, 1, 0], [10, 11, 12, 13, 10]]


def test_anomaly_cards_say_what_happened() -> None:
    """The first line of each card (run page and Spark report): who read what of whom, the cycle's edges."""
    from reports.txn import describe

    h = synth.with_txn_anomaly(synth.generate_txn("cards", seed=1, n_ops=200), "G1c")
    case = analyze(h.ops, h.settings).anomalies["G1c"][0]
    line = describe("G1c", case)
    assert line.startswith("cycle: op ") and "-wr anomt/0 'C1'->" in line and "-wr anomt/1 'C2'->" in line
    h = synth.with_txn_anomaly(synth.generate_txn("cards", seed=1, n_ops=200), "torn")
    line = describe("torn", analyze(h.ops, h.settings).anomalies["torn"][0])
    assert "read anomt/0@0 'T1' of committed op" in line and "but not anomt/0@1 'T2'" in line


def test_pruning_by_history_order_keeps_every_cycle() -> None:
    """prune_by_order never drops an edge of a cycle (random graphs, against Tarjan on the whole graph)."""
    from reports.cycles import prune_by_order

    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        m = int(rng.integers(1, 60))
        s, d = rng.integers(0, n, m), rng.integers(0, n, m)
        whole, _adj = strongly_connected(n, s, d)
        in_cycle = {v for comp in whole for v in comp}
        on = {(a, b) for a, b in zip(s.tolist(), d.tolist(), strict=True) if a in in_cycle and b in in_cycle
              and any(a in c and b in c for c in whole)}
        keep = prune_by_order(s, d)
        kept = {(a, b) for a, b, k in zip(s.tolist(), d.tolist(), keep.tolist(), strict=True) if k}
        assert on <= kept
        pruned, _adj = strongly_connected(n, s[keep], d[keep])
        assert pruned == whole


def test_torn_found_where_the_group_counts_balance_a_skip() -> None:
    """The torn search only pairs readers whose partition groups do not add up (reports.txn._readers_with_gaps):
    a reader that skipped T2 but read T1 twice, or read U at an offset other than its own, still has its torn
    read found (counts alone would balance in the first case)."""
    t = synth.TXN_ANOMALY_TOPIC

    def rec(v: str, off: int) -> dict:
        return {"topic": t, "partition": 0, "offset": off, "key": None, "value": v}

    for reads in ([rec("T1", 0), rec("T1", 0), rec("U", 3)],      # a record twice, T2 (offset 1) skipped
                  [rec("T1", 0), rec("U", 2)]):                    # U read at 2, sent at 3
        h = synth.with_txn_anomaly(_clean(3), "torn")
        torn_poll = next(op for op in h.ops if op["f"] == "poll" and op["type"] == "ok" and op["process"] == 201)
        torn_poll["value"]["records"] = reads
        res = analyze(h.ops, h.settings)
        assert [c["missing"][0]["value"] for c in res.anomalies["torn"]] == ["T2"], (reads, res.anomalies["torn"])


# ---------------------------------------------------------------- the record-by-record fallback

def test_record_by_record_checker_checks_txns_as_batches_and_polls_and_says_what_it_does_not_check() -> None:
    """reports.checkers_simple (the fallback for offsets outside int64) gathers a txn as the columnar checker does
    (its sends a batch of its outcome, an ok txn's reads one poll): the same queue cases (G1a: a read of an aborted
    txn's write), keys and stats; the transactional analyses it does not do are named in ``stats["not_checked"]``
    with a warning, never passed over in silence. (Before, it skipped txn operations: no G1a, no word.)"""
    from reports import checkers_simple
    from reports.anomalies import ANOMALIES
    from reports.checkers import _Columns
    from reports.txn import TXN_ANOMALIES

    for kind in (None, "G1a", "G1c"):
        h = _clean(3) if kind is None else synth.with_txn_anomaly(_clean(3), kind)
        fast = _Columns(h.ops).analyze(h.settings)
        with pytest.warns(checkers_simple.NotCheckedWarning, match="not checked"):
            slow = checkers_simple.analyze(h.ops, h.settings)
        stats = dict(slow.stats)
        assert sorted(stats.pop("not_checked")) == sorted(TXN_ANOMALIES)
        assert stats == fast.stats and slow.keys == fast.keys
        for a in ANOMALIES:
            if a not in TXN_ANOMALIES:
                assert slow.anomalies[a] == fast.anomalies[a], a
        assert slow.found == (fast.found - set(TXN_ANOMALIES))


def test_offsets_outside_int64_fall_back_and_the_txn_analyses_are_reported_not_checked() -> None:
    """A txn history with an offset beyond int64 goes to the record-by-record checker: a read of an aborted
    txn's write is still G1a, and the result says the transactional analyses were not checked."""
    big = 1 << 70
    ops = _ops([(0, "invoke", "txn", _t(_s("a", 0))), (0, "fail", "txn", {**_t(_s("a", 0, big)), "abort": True}),
                (1, "invoke", "poll", {}), (1, "ok", "poll", {"records": [_r("a", 0, big)]})])
    with pytest.warns(UserWarning, match="not checked"):
        res = analyze(ops)
    assert res.found == {"G1a"} and not res.valid
    assert "G1c" in res.stats["not_checked"]
