"""Checking a run part by part (the Spark job's way) gives the same verdict as checking it whole."""

from __future__ import annotations

import pytest

from reports import synth
from reports.analysis import check_history, check_part, run_verdict, split_parts


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
