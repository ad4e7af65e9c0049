"""The history contract: validated JSONL/Parquet round trips and clear errors for corrupt input."""

from __future__ import annotations

import json
import warnings

import pytest

from history import CorruptLineWarning, History, HistoryError, read, write_jsonl, write_parquet
from history.io import read_bytes
from reports import synth


@pytest.fixture
def run() -> History:
    return synth.generate("run-1", seed=7, n_ops=400, nemesis="pause", target="reference")


def test_jsonl_and_parquet_round_trip_to_the_same_runs(tmp_path, run):
    other = synth.generate("run-2", seed=8, n_ops=200)
    write_jsonl([run, other], str(tmp_path / "h.jsonl"))
    write_parquet([run, other], str(tmp_path / "h.parquet"))
    a = read(str(tmp_path / "h.jsonl"))
    b = read(str(tmp_path / "h.parquet"))
    assert [h.run_id for h in a] == ["run-1", "run-2"]
    for x, y, src in zip(a, b, [run, other], strict=True):
        assert x.ops == y.ops == src.ops
        assert (x.target, x.nemesis, x.settings) == (y.target, y.nemesis, y.settings) == (
            src.target, src.nemesis, src.settings)


def test_gzip_jsonl_and_bytes_reader(tmp_path, run):
    write_jsonl(run, str(tmp_path / "h.jsonl.gz"))
    assert read(str(tmp_path / "h.jsonl.gz"))[0].ops == run.ops
    data = (tmp_path / "h.jsonl.gz").read_bytes()
    assert read_bytes(data, "x.jsonl.gz")[0].ops == run.ops


def _lines(tmp_path, run) -> list[str]:
    write_jsonl(run, str(tmp_path / "h.jsonl"))
    return (tmp_path / "h.jsonl").read_text().splitlines()


def test_truncated_line_names_the_line(tmp_path, run):
    lines = _lines(tmp_path, run)
    lines[10] = lines[10][: len(lines[10]) // 2]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError) as e:
        read(str(tmp_path / "bad.jsonl"))
    assert e.value.line == 11
    assert "bad.jsonl:11" in str(e.value) and "corrupt or truncated JSON" in str(e.value)


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda o: o.update(type="done"), "type must be one of"),
        (lambda o: o.update(type=["invoke"]), "type must be one of"),  # unhashable: still a HistoryError
        (lambda o: o.pop("time_ns"), "time_ns"),
        (lambda o: o.update(index="x"), "index"),
    ],
)
def test_schema_errors_name_the_line(tmp_path, run, mutate, reason):
    lines = _lines(tmp_path, run)
    op = json.loads(lines[5])
    mutate(op)
    lines[5] = json.dumps(op)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines))
    with pytest.raises(HistoryError, match=reason) as e:
        read(str(tmp_path / "bad.jsonl"))
    assert e.value.line == 6


def test_pairing_and_order_are_validated(tmp_path, run):
    lines = _lines(tmp_path, run)
    # Swap an invoke with its completion: the completion now comes first.
    i = next(n for n in range(1, len(lines)) if json.loads(lines[n])["type"] == "invoke")
    j = next(n for n in range(i + 1, len(lines))
             if json.loads(lines[n])["process"] == json.loads(lines[i])["process"])
    a, b = json.loads(lines[i]), json.loads(lines[j])
    a["index"], b["index"] = b["index"], a["index"]
    a["time_ns"], b["time_ns"] = b["time_ns"], a["time_ns"]
    lines[i], lines[j] = json.dumps(b), json.dumps(a)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines))
    with pytest.raises(HistoryError, match="without an invoke"):
        read(str(tmp_path / "bad.jsonl"))


def test_skip_corrupt_warns_and_drops_orphan_completion(tmp_path, run):
    lines = _lines(tmp_path, run)
    i = next(n for n in range(1, len(lines)) if json.loads(lines[n])["type"] == "invoke")
    lines[i] = lines[i][:-3]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        h = read(str(tmp_path / "bad.jsonl"), skip_corrupt=True)[0]
    msgs = [str(x.message) for x in w if issubclass(x.category, CorruptLineWarning)]
    # The invoke cannot be parsed, so its completion has no invoke: it is skipped too, with its own warning.
    assert len(msgs) == 2 and f":{i + 1}: skipped" in msgs[0] and "without an invoke" in msgs[1]
    assert len(h.ops) == len(run.ops) - 2


def test_corrupt_parquet_value_names_the_row(tmp_path, run):
    import pyarrow.parquet as pq

    from history.io import to_arrow

    t = to_arrow([run])
    vals = t.column("value").to_pylist()
    vals[3] = '{"topic": '
    t = t.set_column(t.schema.get_field_index("value"), "value", [vals])
    pq.write_table(t, str(tmp_path / "bad.parquet"))
    with pytest.raises(HistoryError) as e:
        read(str(tmp_path / "bad.parquet"))
    assert e.value.line == 4 and "corrupt JSON" in str(e.value)


def test_not_parquet_and_missing_file(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(HistoryError, match="not a readable Parquet"):
        read(str(tmp_path / "x.parquet"))
    with pytest.raises(HistoryError, match="no such file"):
        read(str(tmp_path / "missing.jsonl"))


def test_time_going_backwards_is_rejected(tmp_path, run):
    lines = _lines(tmp_path, run)
    op = json.loads(lines[20])
    op["time_ns"] = -5
    lines[20] = json.dumps(op)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines))
    with pytest.raises(HistoryError, match="goes backwards") as e:
        read(str(tmp_path / "bad.jsonl"))
    assert e.value.line == 21
