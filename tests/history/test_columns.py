"""The columns a reader gathers while it validates are exactly what RecordColumns.collect gathers from the ops."""

from __future__ import annotations

import os

import pytest

from history import read, write_jsonl
from history.columns import RecordColumns
from history.io import write_parquet
from reports import synth
from reports.checkers import analyze

FIELDS = ("p_topic", "p_partition", "p_offset", "p_value", "p_ops", "s_topic", "s_partition", "s_value",
          "s_offset", "s_ops", "events")


def busy(seed: int):  # noqa: ANN201
    h = synth.generate(f"c{seed}", seed=seed, n_ops=2500, processes=6, partitions=3, p_info=0.15, p_fail=0.1)
    return synth.with_anomaly(h, synth.SCENARIOS[seed % len(synth.SCENARIOS)])


@pytest.mark.parametrize("ext", ["jsonl", "jsonl.gz", "parquet"])
@pytest.mark.parametrize("seed", [0, 4, 7])
def test_reader_columns_equal_collecting_from_the_operations(tmp_path, ext, seed):
    h = busy(seed)
    path = os.path.join(tmp_path, f"h.{ext}")
    (write_parquet if ext == "parquet" else write_jsonl)(h, path)
    (r,) = read(path)
    assert r.columns is not None and r.columns.n_ops == len(r.ops)
    ref = RecordColumns.collect(r.ops)
    for name in FIELDS:
        assert getattr(r.columns, name) == getattr(ref, name), name
    ints = all(type(v) is int for v in ref.p_value + ref.s_value)
    assert r.columns.values_all_int == ints
    assert analyze(r.ops, r.settings, r.columns).anomalies == analyze(r.ops, r.settings).anomalies


def test_a_run_read_partly_on_the_exact_path_has_no_columns(tmp_path):
    """A block the fast path gives up on is read by the exact path, which gathers nothing: no half columns."""
    import warnings

    path = os.path.join(tmp_path, "h.jsonl")
    write_jsonl(busy(1), path)
    lines = open(path).read().splitlines()
    lines[1500] = lines[1500][:25]  # a truncated line, skipped on request
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (r,) = read(path, skip_corrupt=True)
    assert r.columns is None
    assert analyze(r.ops, r.settings, r.columns).stats["ops"] == len(r.ops)


def test_columns_that_do_not_cover_the_operations_are_not_used(tmp_path):
    path = os.path.join(tmp_path, "h.jsonl")
    write_jsonl(busy(2), path)
    (r,) = read(path)
    stale = r.columns
    del r.ops[-200:]  # edited after reading: the checker must gather its own columns
    assert analyze(r.ops, r.settings, stale).anomalies == analyze(r.ops, r.settings).anomalies
