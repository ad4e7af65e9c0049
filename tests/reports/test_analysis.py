"""Checking a run part by part (the Spark job's way) gives the same verdict as checking it whole."""

from __future__ import annotations

import pytest

from reports import synth
from reports.analysis import check_history, check_part, part_verdicts, run_verdict, split_parts


@pytest.mark.parametrize("seed", range(len(synth.SCENARIOS) + 2))
def test_parts_add_up_to_the_direct_verdict(seed):
    h = synth.generate(f"r{seed}", seed=seed, n_ops=1500, processes=5, partitions=3, p_info=0.1)
    if seed < len(synth.SCENARIOS):
        h = synth.with_anomaly(h, synth.SCENARIOS[seed])
    direct = check_history(h, budget_s=10)
    parts = split_parts(h.ops)
    assert {k for k, _, _ in parts} == {"tp", "group"}
    by_parts = run_verdict(h, [check_part(k, key, ops, h.settings, 10) for k, key, ops in parts])
    assert by_parts.key() == direct.key()
    if seed < len(synth.SCENARIOS):
        assert set(direct.anomaly_counts) == {synth.SCENARIOS[seed]}


def test_split_keeps_resets_in_every_partition():
    h = synth.generate("r", seed=1, n_ops=800, partitions=3)
    parts = {(k, key): ops for k, key, ops in split_parts(h.ops)}
    assigns = sum(1 for op in h.ops if op["f"] == "assign")
    for key in ("t/0", "t/1", "t/2"):
        assert sum(1 for op in parts[("tp", key)] if op["f"] == "assign") == assigns
        idx = [op["index"] for op in parts[("tp", key)]]
        assert idx == sorted(idx)


@pytest.mark.parametrize("seed", range(len(synth.SCENARIOS)))
def test_whole_run_part_verdicts_equal_checking_each_split_part(seed):
    """The Spark job checks each run once per checker and splits the results by key; that must be what checking
    every split part alone gives (same keys, counts, cases, linearizability verdicts and counterexamples)."""
    h = synth.with_anomaly(synth.generate(f"w{seed}", seed=seed, n_ops=1200, processes=5, partitions=3, p_info=0.1),
                           synth.SCENARIOS[seed])
    split = {(k, key): check_part(k, key, ops, h.settings, 10) for k, key, ops in split_parts(h.ops)}
    whole = {(p.kind, p.key): p for p in part_verdicts(h, 10)}
    for part_key, p in whole.items():
        s = split[part_key]
        assert (p.anomaly_counts, p.cases, p.lin_model, p.lin_verdict, p.counterexample) == (
            s.anomaly_counts, s.cases, s.lin_model, s.lin_verdict, s.counterexample), part_key
    # parts the split has and the whole-run pass does not are assigned partitions nobody used: nothing to find
    for part_key in split.keys() - whole.keys():
        assert not split[part_key].anomaly_counts and split[part_key].lin_verdict == "ok", part_key
    assert run_verdict(h, whole.values()).key() == check_history(h, budget_s=10).key()
