"""The mutation harness, small: a correct broker behind the proxy passes a narrow selection of the suites, and
three mutants (Fetch, ListOffsets, Heartbeat) are each killed by the rule they break; the report is consistent.
The whole catalogue runs in benchmarks/mutants.py (a few minutes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conformance import mutants as M


def _mutant(name: str) -> M.Mutant:
    return next(m for m in M.CATALOGUE if m.name == name)


def test_catalogue_is_valid_and_spread_over_api_keys() -> None:
    from chaos.proxy.toxics.kafka_rewrite import KafkaRewriteToxic

    names = [m.name for m in M.CATALOGUE]
    assert len(names) == len(set(names)) and len(names) >= 15
    for m in M.CATALOGUE:
        KafkaRewriteToxic(**m.attributes).validate()  # what the proxy API would accept
        assert m.suites and all((M.ROOT / s).exists() for s in m.suites), m.name
    assert len({m.attributes["api_key"] for m in M.CATALOGUE}) >= 10
    with pytest.raises(SystemExit, match="unknown mutant"):
        M.select_mutants("fetch.hw+1,no.such")


def test_no_mutant_passes_and_three_mutants_are_killed(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with M.Bench(tmp_path, timeout=60) as bench:
        base = bench.run(None, [M.FETCH_S, M.OFFSETS_S], "reads_never_pass or list_offsets_latest")
        hw = bench.run(_mutant("fetch.hw+1"), [M.FETCH_S], "reads_never_pass")
        lo = bench.run(_mutant("list_offsets.offset+1"), [M.OFFSETS_S], "list_offsets_latest")
        hb = bench.run(_mutant("heartbeat.hide_rebalance"), [M.REBALANCE_S], "heartbeat_in_preparing")
        assert bench.client.proxies()[M.PROXY]["toxics"] == [], "each run removes its toxic"
    assert base.verdict == "pass" and not base.errors and base.summary["pass"] >= 2, base
    expected = {"fetch.hw+1": (hw, "FETCH-HW-CAP"), "list_offsets.offset+1": (lo, "LIST-OFFSETS-LATEST"),
                "heartbeat.hide_rebalance": (hb, "GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS")}
    for name, (res, rule) in expected.items():
        assert res.verdict == "killed" and rule in res.caught_by, (name, res)
        assert res.hits >= 1 and res.diverged[0]["message"], (name, res)
    report = {"baseline": None, "baseline_ok": True, "killed": 3, "total": 3, "score": 1.0, "survivors": [],
              "mutants": [M.asdict(r) for r in (hw, lo, hb)], "wall_s": 0.0, "full": False}
    text = M.table(report)
    assert "score: 3/3" in text and "FETCH-HW-CAP" in text
    assert time.monotonic() - t0 < 90
