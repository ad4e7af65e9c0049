"""Wing-Gong-Lowe search: linearizable and non-linearizable histories per model, and the budget."""

from __future__ import annotations

import pytest

from reports import synth
from reports.linearizability import ILLEGAL, INF, OK, UNKNOWN, Operation, check_operations
from reports.models import COMMITTED_OFFSETS, PARTITION_LOG, log_operations, offset_operations

K = "t/0"


def app(client, v, off, call, ret, pid):
    return Operation(client, ("append", K, v, pid), off, call, ret)


def check_log(ops, **kw):
    return check_operations(PARTITION_LOG, ops, **kw)


def read(client, pairs, call, ret):
    return Operation(client, ("read", K), tuple(pairs), call, ret)


def test_log_concurrent_appends_linearizable_in_either_order():
    ops = [app(0, "a", 1, 0, 10, 0), app(1, "b", 0, 1, 9, 1), read(2, [(0, "b", 1), (1, "a", 0)], 11, 12)]
    assert check_log(ops).verdict == OK


def test_log_stale_offset_after_completed_append_is_illegal_with_window():
    # a completed at offset 1 before b was invoked, yet b got offset 0.
    ops = [app(0, "a", 1, 0, 5, 0), app(1, "b", 0, 6, 9, 1), read(2, [(0, "b", 1), (1, "a", 0)], 10, 12)]
    r = check_log(ops)
    assert r.verdict == ILLEGAL
    cex = r.parts[0].counterexample
    assert cex["prefix_completions"] == 2 and cex["minimal"]
    assert cex["failing"]["op"] == "append t/0 'b' -> offset 0"
    assert [w["op"] for w in cex["window"]] == ["append t/0 'a' -> offset 1", "append t/0 'b' -> offset 0"]


def test_log_read_of_value_before_its_append_was_invoked_is_illegal():
    ops = [read(0, [(0, "a", 0)], 0, 5), app(1, "a", 0, 6, 9, 0)]
    assert check_log(ops).verdict == ILLEGAL
    # ...but fine if the append was concurrent with the read.
    ops = [read(0, [(0, "a", 0)], 0, 7), app(1, "a", 0, 6, 9, 0)]
    assert check_log(ops).verdict == OK


def test_offsets_register_linearizable_and_not():
    G = ("g", "t/0")
    ok = [Operation(0, ("commit", G, 5), None, 0, 10), Operation(1, ("fetch", G), None, 1, 2),
          Operation(2, ("fetch", G), 5, 3, 11), Operation(1, ("commit", G, 7), None, 12, INF),
          Operation(2, ("fetch", G), 5, 13, 14)]  # the info commit may not have happened yet (or ever)
    assert check_operations(COMMITTED_OFFSETS, ok).verdict == OK
    stale = [Operation(0, ("commit", G, 5), None, 0, 1), Operation(0, ("commit", G, 7), None, 2, 3),
             Operation(1, ("fetch", G), 5, 4, 5)]
    r = check_operations(COMMITTED_OFFSETS, stale)
    assert r.verdict == ILLEGAL and r.parts[0].counterexample["failing"]["op"] == "fetch g t/0 -> 5"


def test_budget_exhausted_gives_unknown_not_a_hang():
    # 24 overlapping commits of distinct offsets, then a fetch of a value never written: every subset of
    # the commits is a distinct search state, far more than 0.2 s allows.
    G = ("g", "t/0")
    ops = [Operation(i, ("commit", G, i), None, 0, 100) for i in range(24)]
    ops.append(Operation(99, ("fetch", G), -1, 200, 201))
    import time

    t = time.monotonic()
    r = check_operations(COMMITTED_OFFSETS, ops, budget_s=0.2)
    assert r.verdict == UNKNOWN and time.monotonic() - t < 3
    # the same shape, small enough, is decided
    small = [Operation(i, ("commit", G, i), None, 0, 100) for i in range(6)] + [
        Operation(99, ("fetch", G), -1, 200, 201)]
    assert check_operations(COMMITTED_OFFSETS, small, budget_s=5).verdict == ILLEGAL


@pytest.mark.parametrize("seed", range(4))
def test_generated_concurrent_runs_are_linearizable_for_both_models(seed):
    h = synth.generate("r", seed=seed, n_ops=4000, processes=10, partitions=3, p_info=0.1)
    for model, extract in ((PARTITION_LOG, log_operations), (COMMITTED_OFFSETS, offset_operations)):
        r = check_operations(model, extract(h.ops), budget_s=20)
        assert r.verdict == OK, (model.name, [p.counterexample for p in r.illegal_parts])
        assert len(r.parts) >= 3  # P-compositional: one part per partition (or group-partition)


@pytest.mark.parametrize("kind,verdict", [("G1a", ILLEGAL), ("duplicate", ILLEGAL),
                                          ("inconsistent-offsets", ILLEGAL), ("nonmonotonic-send", ILLEGAL),
                                          ("poll-skip", OK), ("unseen", OK), ("int-send-skip", OK)])
def test_anomalies_that_break_the_log_are_not_linearizable(kind, verdict):
    base = synth.generate("r", seed=3, n_ops=1500, processes=6)
    r = check_operations(PARTITION_LOG, log_operations(synth.with_anomaly(base, kind).ops), budget_s=10)
    assert r.verdict == verdict
    if verdict == ILLEGAL:
        assert [p.key for p in r.illegal_parts] == [synth.ANOMALY_KEY]


def test_parallel_parts_agree_with_serial_and_stop_early():
    h = synth.with_anomaly(synth.generate("r", seed=5, n_ops=3000, processes=6, partitions=4), "G1a")
    ops = log_operations(h.ops)
    serial = check_operations(PARTITION_LOG, ops, budget_s=10)
    par = check_operations(PARTITION_LOG, ops, budget_s=10, workers=2)
    assert serial.verdict == par.verdict == ILLEGAL
    assert [(p.key, p.verdict) for p in serial.parts] == [(p.key, p.verdict) for p in par.parts]
    first = check_operations(PARTITION_LOG, ops, budget_s=10, stop_on_illegal=True)
    assert first.verdict == ILLEGAL and len(first.parts) < len(serial.parts)


def test_ten_thousand_op_partition_with_ten_processes_is_decided_quickly():
    # One partition, 10 concurrent processes, info sends that did and did not happen (holes in the log).
    h = synth.generate("r", seed=2, n_ops=25_000, processes=10, partitions=1, p_info=0.05)
    ops = log_operations(h.ops)
    assert len(ops) > 10_000
    r = check_operations(PARTITION_LOG, ops, budget_s=20)
    assert r.verdict == OK and r.parts[0].elapsed_s < 5
