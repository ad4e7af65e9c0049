"""Runs with a value appended twice, written and read back: the offset of each copy reaches the checker (issue 24).

The checker places a read of a duplicated value at the offset the record carries, so the readers must keep each
record's own offset - in the operations and in the columns they gather for the checker - whatever the format
(JSONL, gzip, Parquet) and the value type (the all-int path factorizes values differently). A run read back gives
the verdict the operations give: one duplicate case, no skip and no step back.
"""

from __future__ import annotations

import pytest

from history import History, read, write_jsonl, write_parquet
from history.columns import RecordColumns
from reports import checkers, checkers_simple

LOG = ["x", "a", "y", "a", "z", "b", "b", "w"]  # a at 1 and 3 (y between), b at 5 and 6 (in a row)


def run(values: str) -> History:
    """One producer sends each value once, acknowledged at its last copy; reader 10 reads the log in polls of
    three, reader 11 from offset 3 (the second copy of a) in one poll; a last send of a is never completed."""
    conv = {v: (i + 1) * 7 for i, v in enumerate(dict.fromkeys(LOG))} if values == "int" else {v: v for v in LOG}
    log = [conv[v] for v in LOG]
    h = History("dup", settings={"sub_via": ["assign"]})

    def add(p: int, typ: str, f: str, v: object) -> None:
        h.ops.append({"run_id": "dup", "index": len(h.ops), "time_ns": 10 * len(h.ops) + 5, "process": p,
                      "type": typ, "f": f, "value": v})

    last = {v: i for i, v in enumerate(log)}
    for v in sorted(last, key=last.__getitem__):
        r = {"topic": "t", "partition": 0, "key": None, "value": v}
        add(1, "invoke", "send", r)
        add(1, "ok", "send", {**r, "offset": last[v]})
    for p, start, size in ((10, 0, 3), (11, 3, len(log))):
        add(p, "invoke", "assign", {"partitions": ["t/0"]})
        add(p, "ok", "assign", {"partitions": ["t/0"]})
        for at in range(start, len(log), size):
            add(p, "invoke", "poll", {})
            add(p, "ok", "poll", {"records": [{"topic": "t", "partition": 0, "offset": o, "key": None,
                                               "value": log[o]} for o in range(at, min(at + size, len(log)))]})
    add(2, "invoke", "send", {"topic": "t", "partition": 0, "key": None, "value": conv["a"]})
    return h


@pytest.mark.parametrize("values", ["str", "int"])
@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.gz", "parquet"])
def test_each_copy_keeps_its_offset_through_the_readers(fmt, values, tmp_path):
    h = run(values)
    path = str(tmp_path / f"h.{fmt}")
    (write_parquet if fmt == "parquet" else write_jsonl)(h, path)
    (back,) = read(path)
    ops = back.op_view()
    assert [op["value"] for op in ops] == [op["value"] for op in h.ops]
    cols, mine = back.columns, RecordColumns.collect(h.ops)
    if cols is not None:
        assert cols.p_offset == mine.p_offset and cols.p_value == mine.p_value
    res = checkers.analyze(ops, back.settings, cols)
    assert res.anomalies == checkers.analyze(h.ops, h.settings).anomalies
    assert res.anomalies == checkers_simple.analyze(h.ops, h.settings).anomalies
    assert set(res.found) == {"duplicate"}, res.counts
    assert [c["offsets"] for c in res.anomalies["duplicate"]] == [[1, 3], [5, 6]]
