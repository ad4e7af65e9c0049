"""Jepsen EDN export and import."""

from __future__ import annotations

import pytest

from history.edn import EDNError, Keyword, export_edn, import_jepsen, loads_all
from reports import synth
from reports.checkers import analyze

JEPSEN = """[{:index 0, :time 10, :type :invoke, :process 0, :f :send, :value [[:send 1 5]]}
 {:index 1, :time 20, :type :ok, :process 0, :f :send, :value [[:send 1 [0 5]]]}
 {:index 2, :time 25, :type :invoke, :process 0, :f :send, :value [[:send 1 6]]}
 {:index 3, :time 30, :type :ok, :process 0, :f :send, :value [[:send 1 [1 6]]]}
 {:index 4, :time 40, :type :invoke, :process 1, :f :assign, :value [1]}
 {:index 5, :time 45, :type :ok, :process 1, :f :assign, :value [1]}
 {:index 6, :time 50, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
 #jepsen.history.Op{:index 7, :time 60, :type :ok, :process 1, :f :poll, :value [[:poll {1 [[1 6]]}]]}
]"""


def test_import_jepsen_kafka_history_and_find_its_anomaly():
    h = import_jepsen(JEPSEN)
    assert [op["f"] for op in h.ops] == ["send"] * 4 + ["assign"] * 2 + ["poll"] * 2
    assert h.ops[1]["value"] == {"topic": "jepsen", "partition": 1, "key": None, "value": 5, "offset": 0}
    res = analyze(h.ops)
    assert res.found == {"lost-write"}  # 5 at offset 0 was acknowledged; 6 at offset 1 was read; 5 never was


def test_export_then_import_preserves_operations():
    h = synth.generate("r", seed=2, n_ops=300, partitions=2)
    text = export_edn(h)
    assert text.startswith(";; run r target synthetic; keys: 0=t/0, 1=t/1")
    forms = loads_all(text)
    assert forms[1][Keyword("f")] in (Keyword("assign"), Keyword("send"), Keyword("poll"))
    back = import_jepsen(text, topic="t")
    kafka = [op for op in h.ops if op["f"] in ("send", "poll")]
    imported = [op for op in back.ops if op["f"] in ("send", "poll")]
    assert [(o["index"], o["type"], o["f"], o["value"]) for o in imported] == [
        (o["index"], o["type"], o["f"], o["value"]) for o in kafka
    ]


def test_edn_reader_errors_are_clear():
    with pytest.raises(EDNError, match="truncated EDN"):
        loads_all("[{:a 1}")
    with pytest.raises(EDNError, match="mismatched"):
        loads_all("[1 2}")
    assert loads_all('#{1 2} "a\\"b" nil 1.5 :k ; comment\n #_ 3 4') == [{1, 2}, 'a"b', None, 1.5, Keyword("k"), 4]
