"""The typed path (history.typed: msgspec structs, checks on whole columns, operation dicts built lazily) against
the exact path: the same runs, errors and warnings, the same checker columns and verdicts; and it hands every file
it does not certainly accept to the other paths."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_path import _apply, _exact_only, _mutation, _outcome

import history.io as hio
from history import History, read
from history.columns import RecordColumns
from history.schema import dumps
from history.typed import read_typed
from reports import synth
from reports.checkers import analyze


def _run(seed: int = 1, n_ops: int = 300) -> History:
    """A run the typed path accepts: sends (single and batch), polls (some with positions), commits, offset
    fetches, assign, subscribe, crashes with null values, info and fail completions, invokes left in flight."""
    h = synth.with_anomaly(synth.generate("r", seed=seed, n_ops=n_ops, processes=4, partitions=3, p_info=0.05),
                           "int-send-skip")
    t = h.ops[-1]["time_ns"]

    def add(process: int, typ: str, f: str, value: object) -> None:
        nonlocal t
        t += 10
        h.ops.append({"run_id": "r", "index": len(h.ops), "time_ns": t, "process": process, "type": typ, "f": f,
                      "value": value})

    add(-1, "info", "nemesis", {"fault": "pause", "nodes": [1, 2]})
    add(7, "invoke", "subscribe", {"topics": ["t"]})
    add(7, "ok", "subscribe", {"topics": ["t"]})
    add(7, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]})
    add(7, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": None, "t/1": 3}})
    add(7, "invoke", "send", {"topic": "t", "partition": 0, "key": None, "value": 1.5})
    add(7, "ok", "send", {"topic": "t", "partition": 0, "key": None, "value": 1.5, "offset": 9})
    add(7, "invoke", "send", {"topic": "t", "partition": 1, "key": "k", "value": 10**30})
    add(7, "info", "send", {"topic": "t", "partition": 1, "key": "k", "value": 10**30})
    add(7, "invoke", "poll", {"max_records": 5})
    add(7, "ok", "poll", {"records": [{"topic": "t", "partition": 1, "offset": 4, "key": "k", "value": "s"},
                                      {"topic": "t", "partition": 1, "offset": 5, "key": "k", "value": 10**30}],
                          "positions": {"t/1": 4}})
    add(7, "invoke", "poll", {})
    add(7, "info", "poll", {})
    add(7, "invoke", "crash", None)
    add(7, "info", "crash", None)
    add(8, "invoke", "commit", {"group": "g", "offsets": {"t/0": 1}})
    add(9, "invoke", "send", {"topic": "t", "partition": 2, "key": None, "value": "left"})
    return h


def _lines(h: History) -> list[str]:
    return [dumps(h.header_line())] + [dumps(op) for op in h.ops]


def _same_columns_and_verdict(got: History, h: History) -> None:
    """The typed path's columns are the ones gathered from the dicts, and the checker says the same."""
    ref = RecordColumns.collect(h.ops)
    for name in RecordColumns.__slots__:
        if name != "values_all_int":
            assert getattr(got.columns, name) == getattr(ref, name), name
    assert analyze(got.op_view(), got.settings, got.columns) == analyze(h.ops, h.settings)


def _write(tmp_path, lines: list[str], name: str = "h.jsonl") -> str:  # noqa: ANN001
    p = tmp_path / name
    p.write_bytes(("\n".join(lines) + "\n").encode())
    return str(p)


def test_a_well_formed_run_takes_the_typed_path_and_reads_as_the_exact_path(tmp_path):
    h = _run()
    path = _write(tmp_path, _lines(h))
    assert read_typed(path) is not None
    (got,) = read(path)
    assert got.__dict__["_lazy"] is not None  # nothing parsed into dicts yet
    view = got.op_view()
    assert len(view) == len(h.ops)
    assert [view[i] for i in (0, 17, -1)] == [h.ops[0], h.ops[17], h.ops[-1]]
    assert got.__dict__["_lazy"] is not None
    _same_columns_and_verdict(got, h)
    assert (got.run_id, got.target, got.settings, got.ops) == (h.run_id, h.target, h.settings, h.ops)
    with _exact_only():
        (exact,) = read(path)
    assert dumps(exact.ops) == dumps(got.ops) and exact == got


def test_big_integers_stay_exact_in_columns_and_operations(tmp_path):
    h = _run(n_ops=50)
    path = _write(tmp_path, _lines(h))
    (got,) = read(path)
    assert 10**30 in got.columns.p_value and 10**30 + 1 not in got.columns.p_value
    assert got.__dict__["_lazy"] is not None
    assert got.op_view()[-7]["value"]["records"][1]["value"] == 10**30
    assert got.ops[-7]["value"]["records"][1]["value"] == 10**30
    assert got.ops[-10]["value"]["value"] == 10**30


@pytest.mark.parametrize("change", [
    "blank line", "crlf", "second run", "header later", "index beyond int64", "bool value", "unknown f",
    "null send value", "poll offset missing", "lone surrogate", "deep nesting", "two values on a line",
    "time backwards", "unpaired completion", "bad position", "assign key", "empty file"])
def test_anything_doubtful_goes_to_the_other_paths(tmp_path, change):
    lines = _lines(_run(n_ops=60))
    op = json.loads(lines[5])
    if change == "blank line":
        lines.insert(4, "")
    elif change == "crlf":
        lines = [x + "\r" for x in lines]
    elif change == "second run":
        lines[7] = lines[7].replace('"run_id":"r"', '"run_id":"r2"')
    elif change == "header later":
        lines.insert(9, lines.pop(0))
    elif change == "index beyond int64":
        op["index"] = 10**20
        lines[5] = dumps(op)
    elif change == "bool value":
        lines.append(lines[-1].replace('"value":"left"', '"value":true').replace(
            f'"index":{len(lines) - 2}', f'"index":{len(lines) - 1}'))
    elif change == "unknown f":
        lines[-1] = lines[-1].replace('"f":"send"', '"f":"check"')
    elif change == "null send value":
        lines[-1] = lines[-1].split(',"value":')[0] + ',"value":null}'
    elif change == "poll offset missing":
        i = next(i for i, x in enumerate(lines) if '"type":"ok","f":"poll"' in x and '"offset"' in x)
        lines[i] = lines[i].replace('"offset":', '"offset_":', 1)
    elif change == "lone surrogate":
        lines[-1] = lines[-1].replace('"value":"left"', '"value":"\\ud800"')
    elif change == "deep nesting":
        lines[-1] = lines[-1].replace('"key":null', '"key":' + "[" * 1030 + "]" * 1030)
    elif change == "two values on a line":
        lines[5] = lines[5] + " " + lines[6]
        del lines[6]
    elif change == "time backwards":
        op["time_ns"] = -5
        lines[5] = dumps(op)
    elif change == "unpaired completion":
        del lines[1]
    elif change == "bad position":
        i = next(i for i, x in enumerate(lines) if '"positions"' in x)
        lines[i] = lines[i].replace('"positions":{"t/1":4}', '"positions":{"t1":4}')
    elif change == "assign key":
        i = next(i for i, x in enumerate(lines) if '"f":"assign"' in x)
        lines[i] = lines[i].replace('"t/', '"t', 1)
    elif change == "empty file":
        lines = []
    path = _write(tmp_path, lines) if lines else str(tmp_path / "h.jsonl")
    if not lines:
        (tmp_path / "h.jsonl").write_bytes(b"")
    assert read_typed(path) is None
    for skip in (False, True):
        got = _outcome(lambda p=path, s=skip: hio.read_jsonl(p, skip_corrupt=s))
        with _exact_only():
            assert got == _outcome(lambda p=path, s=skip: hio.read_jsonl(p, skip_corrupt=s))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(_mutation(), min_size=0, max_size=2), st.booleans(), st.integers(0, 3))
def test_generated_malformations_read_the_same_as_the_exact_path(tmp_path, mutations, skip, seed):
    lines = _lines(_run(seed, n_ops=30))
    for m in mutations:
        lines = _apply(lines, m)
    p = tmp_path / "h.jsonl"
    p.write_bytes(("\n".join(lines) + "\n").encode())
    got = _outcome(lambda: hio.read_jsonl(str(p), skip_corrupt=skip))
    with _exact_only():
        assert got == _outcome(lambda: hio.read_jsonl(str(p), skip_corrupt=skip))


def test_columns_of_a_run_without_batch_sends(tmp_path):
    h = synth.generate("r", seed=3, n_ops=400, processes=4, partitions=3, p_info=0.05)
    assert not any("records" in op["value"] for op in h.ops if op["f"] == "send")
    (got,) = read(_write(tmp_path, _lines(h)))
    assert got.__dict__["_lazy"] is not None
    _same_columns_and_verdict(got, h)


def test_checks_of_a_typed_run_build_no_operation_dict_and_agree_with_the_exact_path(tmp_path):
    """``python -m reports check``'s checks (reports.analysis.run_checks) read the decoded structs and the columns:
    the run's operation dicts are never built, and every verdict and extracted operation is the exact path's."""
    from reports.analysis import part_verdicts, run_checks
    from reports.models import log_operations, offset_operations

    path = _write(tmp_path, _lines(_run(seed=4, n_ops=2000)))
    (typed,) = read(path)
    with _exact_only():
        (exact,) = hio.read_jsonl(path)
    assert typed.__dict__["_lazy"] is not None and exact.__dict__.get("_typed") is None
    for extract in (log_operations, offset_operations):
        assert extract(typed.typed_ops(), typed.settings) == extract(exact.ops, exact.settings)
    res, lin = run_checks(typed)
    ref_res, ref_lin = run_checks(exact)
    built = "the operation dicts were built"  # (ops is a property: the lazy lines stay until it is read)
    assert typed.__dict__["_lazy"] is not None and not typed.__dict__["_ops"], built
    assert res.counts == ref_res.counts and res.counts.get("int-send-skip")
    assert {m: (r.verdict, len(r.parts)) for m, r in lin.items()} == \
        {m: (r.verdict, len(r.parts)) for m, r in ref_lin.items()}
    assert [(p.key, p.lin_verdict, p.anomaly_counts) for p in part_verdicts(typed)] == \
        [(p.key, p.lin_verdict, p.anomaly_counts) for p in part_verdicts(exact)]
    assert typed.__dict__["_lazy"] is not None and not typed.__dict__["_ops"], built
    assert len(typed.ops) == len(exact.ops) and typed.ops == exact.ops  # (asked for: built, the same)
    assert typed.__dict__["_typed"] is not None
    typed.ops = exact.ops[:10]  # set: the decoded structs no longer describe the run
    assert len(typed.typed_ops()) == 10


def test_dicts_are_converted_for_the_extraction_and_contract_breaks_are_clear_errors():
    from history.schema import HistoryError
    from history.typed import Op, to_typed

    ops = [{"run_id": "r", "index": 0, "time_ns": 1, "process": -1, "type": "info", "f": "nemesis",
            "value": "partition [1] [2 3]"},  # what the extraction does not read may be anything
           {"run_id": "r", "index": 1, "time_ns": 2, "process": 0, "type": "invoke", "f": "send",
            "value": {"topic": "t", "partition": 0, "key": None, "value": True}}]
    got = to_typed(ops)
    assert [type(o) for o in got] == [Op, Op] and got[0].value is None and got[1].value.value is True
    assert to_typed(got) is got
    bad = [{**ops[1], "value": {"topic": "t", "partition": "0", "value": 1}}]
    with pytest.raises(HistoryError, match="contract"):
        to_typed(bad)


def test_topics_run_id_and_f_are_shared_literals_and_a_topic_first_seen_late_is_learned(tmp_path):
    """The decoder hands out one str object per topic, run id and f (what makes the checks cheap), learns a topic
    that first appears in a later chunk (re-decoding that chunk), and reads exactly what the exact path reads."""
    h = synth.generate("r", seed=5, n_ops=12000, processes=4, partitions=3, p_info=0.05)
    lines = _lines(h)
    half = len(lines) // 2
    lines[half:] = [x.replace('"topic":"t"', '"topic":"late"').replace('"t/', '"late/') for x in lines[half:]]
    path = _write(tmp_path, lines)
    assert len(lines[0]) + sum(map(len, lines[:half])) > 1 << 20  # "late" first appears after the first chunk
    (got,) = read(path)
    assert got.__dict__["_lazy"] is not None, "a doubt: the typed path gave up"
    tops = got.columns.p_topic + got.columns.s_topic
    assert {"t", "late"} == set(tops) and len({id(t) for t in tops}) <= 4  # (one per decoder built, not per record)
    typed = got.typed_ops()
    assert len({id(o.run_id) for o in typed}) == 1 and len({id(o.f) for o in typed}) == len({o.f for o in typed})
    with _exact_only():
        (exact,) = read(path)
    assert dumps(exact.ops) == dumps(got.ops)
    assert analyze(got.op_view(), got.settings, got.columns) == analyze(exact.ops, exact.settings)


def test_a_line_of_another_run_or_a_file_without_topics_or_header(tmp_path):
    h = _run(n_ops=60)
    lines = _lines(h)
    other = lines[:-1] + [lines[-1].replace('"run_id":"r"', '"run_id":"q"')]
    assert read_typed(_write(tmp_path, other, "other.jsonl")) is None  # (two runs: the other paths)
    headless = _write(tmp_path, lines[1:], "headless.jsonl")
    assert read_typed(headless) is not None
    assert _outcome(lambda: hio.read_jsonl(headless)) == _outcome(lambda: _exact(headless))
    no_topics = [x for x in lines if '"f":"send"' not in x and '"f":"poll"' not in x]
    path = _write(tmp_path, no_topics, "no-topics.jsonl")
    assert read_typed(path) is not None
    assert _outcome(lambda: hio.read_jsonl(path)) == _outcome(lambda: _exact(path))


def _exact(path: str) -> list[History]:
    with _exact_only():
        return hio.read_jsonl(path)


@pytest.mark.parametrize("offsets", [
    {"group": "g", "offsets": {"t/0": 1}}, {"group": 1, "offsets": {}}, {"group": "g", "offsets": {"t0": 1}},
    {"group": "g", "offsets": {"t/0": 1.5}}, {"group": "g", "offsets": {"t/0": True}},
    {"group": "g", "offsets": [], "x": 1}, {"group": "g", "offsets": {"t/0": 1}, "x": 2}, {"group": "g"}])
def test_txn_offsets_are_taken_only_in_their_exact_shape(tmp_path, offsets):
    """A txn's ``offsets`` (send_offsets_to_transaction) are checked a whole chunk at a time: only
    ``{"group": str, "offsets": {"t/p": int}}`` stays on the typed path; anything else (an extra key too, which
    the exact path accepts) goes to the other paths, which read it as the exact path does."""
    v = {"txn_id": "a", "ops": [{"f": "send", "topic": "t", "partition": 0, "key": None, "value": 1}],
         "offsets": offsets}
    lines = [dumps({"run_id": "r", "index": i, "time_ns": i, "process": 0, "type": typ, "f": "txn", "value": v})
             for i, typ in enumerate(("invoke", "ok"))]
    path = _write(tmp_path, lines)
    assert (read_typed(path) is not None) == (dumps(offsets) == '{"group":"g","offsets":{"t/0":1}}')
    assert _outcome(lambda: hio.read_jsonl(path)) == _outcome(lambda: _exact(path))
