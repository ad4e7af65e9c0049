"""The Recorder enforces the contract where histories are made."""

from __future__ import annotations

import itertools

import pytest

from history import HistoryError, Recorder, read


def test_records_a_valid_history_with_monotonic_time_and_unique_values(tmp_path):
    ticks = iter([5, 3, 9, 9, 12, 11])  # a clock that goes backwards must not make time go backwards
    rec = Recorder("r", "reference", clock=lambda: next(ticks), sink=str(tmp_path / "s.jsonl"),
                   settings={"sub_via": ["assign"]})
    v1, v2 = rec.unique_value(), rec.unique_value()
    assert v1 != v2
    rec.invoke(0, "send", {"topic": "t", "partition": 0, "key": None, "value": v1})
    rec.invoke(1, "poll")
    rec.ok(0, "send", {"topic": "t", "partition": 0, "key": None, "value": v1, "offset": 0})
    rec.ok(1, "poll", {"records": [{"topic": "t", "partition": 0, "offset": 0, "key": None, "value": v1}]})
    rec.event("nemesis", {"fault": "kill", "phase": "start"})
    rec.invoke(0, "crash")
    rec.close()
    times = [op["time_ns"] for op in rec.history.ops]
    assert times == [5, 5, 9, 9, 12, 12]
    assert [op["index"] for op in rec.history.ops] == list(range(6))
    back = read(str(tmp_path / "s.jsonl"))[0]
    assert back.ops == rec.history.ops and back.target == "reference"
    assert rec.in_flight == {0: "crash"}


def test_rejects_completion_without_invoke_and_double_invoke():
    rec = Recorder("r", clock=itertools.count().__next__)
    with pytest.raises(HistoryError, match="without a matching invoke"):
        rec.ok(0, "poll", {"records": []})
    rec.invoke(0, "poll")
    with pytest.raises(HistoryError, match="already has poll in flight"):
        rec.invoke(0, "send", {"topic": "t", "partition": 0, "key": None, "value": 1})
    with pytest.raises(HistoryError, match="without a matching invoke"):
        rec.ok(0, "send", {"topic": "t", "partition": 0, "key": None, "value": 1, "offset": 0})


def test_rejects_malformed_values():
    rec = Recorder("r", clock=itertools.count().__next__)
    rec.invoke(0, "poll")
    with pytest.raises(HistoryError, match="integer offset"):
        rec.ok(0, "poll", {"records": [{"topic": "t", "partition": 0, "value": 1}]})
