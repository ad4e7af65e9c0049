"""Every Jepsen Kafka anomaly is found on a history made to contain exactly it; clean histories are clean."""

from __future__ import annotations

import pytest

from reports import synth
from reports.checkers import ACCEPTABLE, ANOMALIES, acceptable, analyze


@pytest.mark.parametrize("kind", synth.SCENARIOS)
def test_scenario_alone_is_flagged_exactly(kind):
    h = synth.scenario_history(kind)
    res = analyze(h.ops, h.settings)
    assert res.found == {kind}
    cases = res.anomalies[kind]
    assert len(cases) == 1 and cases[0]["key"] == synth.ANOMALY_KEY
    assert res.valid == (kind in acceptable(h.settings))


@pytest.mark.parametrize("kind", synth.SCENARIOS)
@pytest.mark.parametrize("seed", [1, 2])
def test_scenario_inside_a_busy_clean_run_is_flagged_exactly(kind, seed):
    base = synth.generate(f"r{seed}", seed=seed, n_ops=2000, processes=6, partitions=4, p_info=0.1)
    res = analyze(synth.with_anomaly(base, kind).ops, base.settings)
    assert res.found == {kind}


@pytest.mark.parametrize("seed", range(6))
def test_clean_runs_with_info_and_failed_sends_are_clean(seed):
    h = synth.generate(f"c{seed}", seed=seed, n_ops=3000, processes=8, partitions=5, p_info=0.2, p_fail=0.1)
    infos = [op for op in h.ops if op["f"] == "send" and op["type"] == "info"]
    assert len(infos) > 20  # info sends that did and did not happen are both present
    res = analyze(h.ops, h.settings)
    assert res.found == set() and res.valid


def test_evidence_names_the_proving_operations():
    h = synth.scenario_history("lost-write")
    case = analyze(h.ops).anomalies["lost-write"][0]
    assert case["value"] == "b" and case["index"] == 1 and case["max_read_value"] == "c"
    assert case["writer"]["type"] == "ok" and case["writer"]["value"]["offset"] == 1
    assert [r["value"] for r in case["max_read"]["value"]["records"]] == ["c"]
    skip = analyze(synth.scenario_history("poll-skip").ops).anomalies["poll-skip"][0]
    assert skip["skipped"] == ["b"] and skip["delta"] == 2
    assert [op["process"] for op in skip["ops"]] == [101, 101]
    g1a = analyze(synth.scenario_history("G1a").ops).anomalies["G1a"][0]
    assert g1a["writer"]["type"] == "fail" and g1a["reader"]["type"] == "ok"


def test_acceptability_is_decided_by_settings():
    assert acceptable({"sub_via": ["assign"]}) == {"int-send-skip", "G0", "lagging-read"}
    assert acceptable({"sub_via": ["subscribe"]}) == {"int-send-skip", "G0", "lagging-read", "poll-skip",
                                                      "nonmonotonic-poll"}
    h = synth.scenario_history("poll-skip")
    assert not analyze(h.ops, {"sub_via": ["assign"]}).valid
    assert analyze(h.ops, {"sub_via": ["subscribe"]}).valid
    assert set(ACCEPTABLE) <= set(ANOMALIES)


def test_partial_reads_make_lost_write_and_unseen_acceptable():
    """Conformance suites read selectively and delete records: their runs say partial_reads, so a write nobody
    read back is no evidence of loss there — but it still is in a workload that reads everything."""
    assert {"lost-write", "unseen"} <= acceptable({"sub_via": ["assign"], "partial_reads": True})
    for kind in ("lost-write", "unseen"):
        h = synth.scenario_history(kind)
        assert not analyze(h.ops, {"sub_via": ["assign"]}).valid
        assert analyze(h.ops, {"sub_via": ["assign"], "partial_reads": True}).valid


def test_assign_that_drops_a_partition_resets_poll_tracking():
    h = synth.scenario_history("poll-skip")
    ops = h.ops
    # Between R1's two polls, R1 re-assigns without anom/0 and then with it: the jump is no longer a skip.
    polls = [i for i, op in enumerate(ops) if op["process"] == 101 and op["f"] == "poll" and op["type"] == "ok"]
    at = polls[0] + 1
    extra = []
    t = ops[at - 1]["time_ns"]
    for parts in ([], [synth.ANOMALY_KEY]):
        for typ in ("invoke", "ok"):
            t += 1
            extra.append({"run_id": h.run_id, "index": 0, "time_ns": t, "process": 101, "type": typ,
                          "f": "assign", "value": {"partitions": parts}})
    new = ops[:at] + extra + ops[at:]
    for i, op in enumerate(new):
        op["index"] = i
    assert analyze(new).found == set()


def test_one_million_operations_in_one_pass_is_fast_enough():
    h = synth.generate("big", seed=4, n_ops=200_000, processes=10, partitions=10)
    import time

    t = time.perf_counter()
    res = analyze(h.ops, h.settings)
    dt = time.perf_counter() - t
    assert res.valid and res.stats["ops"] == len(h.ops)
    assert len(h.ops) / dt > 50_000  # a loose floor so a quadratic regression fails; figures in benchmarks/


def test_acknowledged_value_sharing_the_highest_read_offset_is_lost():
    # b and c were both acknowledged at offset 1; a poll read b there (the highest read), nobody read c.
    h = synth.scenario_history("inconsistent-offsets")
    ops = [op for op in h.ops if not (op["process"] == 102 and op["f"] == "poll")]
    for i, op in enumerate(ops):
        op["index"] = i
    res = analyze(ops)
    assert res.found == {"inconsistent-offsets", "lost-write"}
    assert [c["value"] for c in res.anomalies["lost-write"]] == ["c"]
