"""The Spark job's latency histograms: each ok send/poll's invoke -> completion time, binned on LAT_EDGES_NS."""

from __future__ import annotations

from bisect import bisect_right

import pytest

from reports import synth
from reports.spark_job import LAT_BINS, LAT_EDGES_NS, latency_histograms


def by_calls_in_flight(ops: list[dict]) -> tuple[list[int], list[int]]:
    """The definition: a dict of the call in flight per process, one operation at a time."""
    send, poll = [0] * LAT_BINS, [0] * LAT_BINS
    calls: dict[int, int] = {}
    for op in ops:
        if op["type"] == "invoke":
            calls[op["process"]] = op["time_ns"]
            continue
        t0 = calls.pop(op["process"], None)
        if t0 is not None and op["type"] == "ok" and op["f"] in ("send", "poll"):
            hist = send if op["f"] == "send" else poll
            hist[max(bisect_right(LAT_EDGES_NS, op["time_ns"] - t0) - 1, 0)] += 1
    return send, poll


@pytest.mark.parametrize("seed", range(4))
def test_histograms_match_the_call_in_flight_definition(seed):
    h = synth.generate(f"l{seed}", seed=seed, n_ops=3000, processes=7, partitions=3, p_info=0.2, p_fail=0.1)
    ops = synth.with_anomaly(h, synth.SCENARIOS[seed]).ops
    # spread latencies over many bins, and add a completion with no invoke (a nemesis line) and a lone invoke
    for i, op in enumerate(ops):
        op["time_ns"] = op["time_ns"] * 997 + (i % 13) ** 7
    ops.insert(5, {**ops[5], "type": "info", "f": "nemesis", "process": -1})
    ops.append({**ops[-1], "type": "invoke", "f": "send"})
    # a completion repeated without a new invoke pairs with nothing (its call was already answered)
    k = next(i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "poll" and op["process"] >= 0)
    ops.insert(k + 1, {**ops[k], "time_ns": ops[k]["time_ns"] + 10**9})
    send, poll = latency_histograms(ops)
    assert (send, poll) == by_calls_in_flight(ops)
    assert sum(send) > 100 and sum(poll) > 100 and sum(1 for c in send if c) > 3


def test_no_operations_no_latencies():
    assert latency_histograms([]) == ([0] * LAT_BINS, [0] * LAT_BINS)
