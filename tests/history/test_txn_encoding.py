"""The ``txn`` operation (history/schema.py): validation with clear errors, the same columns on every read path,
Jepsen's mixed send/poll transactions imported as txn ops."""

from __future__ import annotations

import re

import pytest

import history.io as hio
from history import History, HistoryError, read_jsonl, validate_op, write_jsonl
from history.columns import RecordColumns
from history.edn import export_edn, import_jepsen
from history.typed import read_typed


def _op(i: int, p: int, typ: str, f: str, v: object) -> dict:
    return {"run_id": "r", "index": i, "time_ns": i * 10, "process": p, "type": typ, "f": f, "value": v}


def _send(v: str, part: int = 0, off: int | None = None) -> dict:
    m = {"f": "send", "topic": "t", "partition": part, "key": None, "value": v}
    if off is not None:
        m["offset"] = off
    return m


def _rec(v: str, part: int, off: int) -> dict:
    return {"topic": "t", "partition": part, "offset": off, "key": None, "value": v}


def _run() -> History:
    ops = [
        _op(0, 1, "invoke", "txn", {"txn_id": "tp-1", "ops": [_send("a"), {"f": "poll"}]}),
        _op(1, 2, "invoke", "send", {"topic": "t", "partition": 1, "key": None, "value": "x"}),
        _op(2, 2, "ok", "send", {"topic": "t", "partition": 1, "key": None, "value": "x", "offset": 0}),
        _op(3, 1, "ok", "txn", {"txn_id": "tp-1", "ops": [_send("a", 0, 0), {"f": "poll", "records": [_rec("x", 1, 0)]}],
                                "offsets": {"group": "g", "offsets": {"t/1": 1}}}),
        _op(4, 1, "invoke", "txn", {"txn_id": "tp-1", "ops": [_send("b"), _send("c", 1)], "abort": True}),
        _op(5, 1, "fail", "txn", {"txn_id": "tp-1", "ops": [_send("b", 0, 2), _send("c", 1, 1)], "abort": True}),
        _op(6, 3, "invoke", "poll", {}),
        _op(7, 3, "ok", "poll", {"records": [_rec("a", 0, 0)]}),
        _op(8, 1, "invoke", "txn", {"txn_id": "tp-1", "ops": [_send("d"), {"f": "poll"}]}),
        _op(9, 1, "info", "txn", {"txn_id": "tp-1", "ops": [_send("d"), {"f": "poll"}]}),
        _op(10, 4, "invoke", "txn", {"txn_id": "tp-4", "ops": [_send("e", 1)]}),
    ]
    return History("r", ops, settings={"sub_via": ["assign"]})


@pytest.mark.parametrize(("value", "message"), [
    ({"ops": [_send("a")]}, "txn needs a string txn_id"),
    ({"txn_id": "x", "ops": []}, "non-empty list of ops"),
    ({"txn_id": "x", "ops": [{"f": "read"}]}, "txn op 0: f must be send or poll"),
    ({"txn_id": "x", "ops": [_send("a"), {"f": "send", "topic": "t", "value": 1}]}, "txn op 1 (send): record needs an integer partition"),
    ({"txn_id": "x", "ops": [{"f": "poll"}]}, "txn op 0 (poll) needs records"),
    ({"txn_id": "x", "ops": [{"f": "poll", "records": [{"topic": "t", "partition": 0, "value": 1}]}]},
     "txn op 0 (poll): polled record needs an integer offset"),
    ({"txn_id": "x", "ops": [_send("a")], "abort": "yes"}, "abort must be true or false"),
    ({"txn_id": "x", "ops": [_send("a")], "offsets": {"t/0": 3}}, "txn offsets must be"),
])
def test_malformed_txn_is_refused_with_its_reason(value: dict, message: str) -> None:
    with pytest.raises(HistoryError, match=re.escape(message)):
        validate_op(_op(0, 1, "ok", "txn", value))  # (message is a literal)


def test_malformed_txn_line_names_file_and_line(tmp_path) -> None:  # noqa: ANN001
    h = _run()
    h.ops[3] = dict(h.ops[3], value={"txn_id": "tp-1", "ops": [{"f": "poll", "records": [{"topic": "t"}]}]})
    p = str(tmp_path / "bad.jsonl")
    write_jsonl(h, p)
    with pytest.raises(HistoryError, match=r"bad.jsonl:5: txn op 0 \(poll\)"):
        read_jsonl(p)


def test_every_read_path_gathers_the_same_columns(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    h = _run()
    p = str(tmp_path / "h.jsonl")
    write_jsonl(h, p)
    typed = read_typed(p)
    assert typed is not None, "the typed path takes txn runs (the benchmark depends on it)"
    cols = typed[4]
    monkeypatch.setattr(hio, "_FAST", False)
    exact = RecordColumns.collect(read_jsonl(p)[0].ops)
    for name in RecordColumns.__slots__:
        a, b = getattr(cols, name), getattr(exact, name)
        if name == "op_time":
            a = list(a)
        if name != "values_all_int":
            assert a == b, name
    # committed txn: its send an ok send, its reads one ok poll; the aborted one's sends failed sends
    assert cols.s_ops == [(2, 2, "ok", 1), (3, 1, "ok", 1), (5, 1, "fail", 2), (9, 1, "info", 1)]
    assert cols.p_ops == [(3, 1, 1), (7, 3, 1)]
    assert cols.t_ops == [(3, 1, "ok", 0), (5, 1, "fail", 4), (9, 1, "info", 8)]
    assert cols.events == [(9, 1, "poll", None)]  # an info txn that polled resets its consumer's tracking
    assert cols.pending == [10]


def test_old_files_still_read_the_same(tmp_path) -> None:  # noqa: ANN001
    from reports.synth import generate

    h = generate("old", seed=3, n_ops=300)
    p = str(tmp_path / "old.jsonl")
    write_jsonl(h, p)
    assert read_jsonl(p)[0].ops == h.ops


def test_jepsen_mixed_transactions_import_as_txn_and_round_trip() -> None:
    edn = """[{:index 0 :time 1 :process 0 :type :invoke :f :txn :value [[:send 1 10] [:poll]]}
 {:index 1 :time 2 :process 0 :type :ok :f :txn :value [[:send 1 [0 10]] [:poll {2 [[3 11]]}]]}
 {:index 2 :time 3 :process 1 :type :invoke :f :txn :value [[:poll] [:send 2 12]]}
 {:index 3 :time 4 :process 1 :type :fail :f :txn :value [[:poll] [:send 2 12]]}]"""
    h = import_jepsen(edn)
    assert [op["f"] for op in h.ops] == ["txn"] * 4
    ok = h.ops[1]["value"]
    assert ok["txn_id"] == "jepsen-0"
    assert ok["ops"][0] == {"f": "send", "topic": "jepsen", "partition": 1, "key": None, "value": 10, "offset": 0}
    assert ok["ops"][1]["records"] == [{"topic": "jepsen", "partition": 2, "offset": 3, "key": None, "value": 11}]
    again = import_jepsen(export_edn(h))  # (export renumbers partitions 1, 2 as Jepsen keys 0, 1)

    def shape(hist: History) -> list:
        return [[(m["f"], m.get("value"), m.get("offset"), [(r["offset"], r["value"]) for r in m.get("records", [])])
                 for m in op["value"]["ops"]] for op in hist.ops]

    assert shape(again) == shape(h)
