"""The quorum suite (conformance/suites/test_quorum.py) as a user runs it: on the reference cluster with a 3-voter
controller quorum every rule runs and passes, and each quorum fault switch shows as a divergence of exactly its
rules (the switch rows live in test_conformance_suites.py's table); on Apache Kafka 4.4.0 (3 combined nodes, and 3
dedicated controllers beside 3 brokers) every rule passes too — behind KCT_SLOW, as 6 JVMs take minutes here."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_conformance_suites import by_rule, run_suites

QUORUM = "conformance/suites/test_quorum.py"
RULES = {"QUORUM-DESCRIBE", "QUORUM-FAILOVER-KILL", "QUORUM-FAILOVER-PAUSE", "QUORUM-METADATA-AFTER-FAILOVER"}


def _all_pass(doc: dict) -> None:
    bad = [(c["nodeid"], c["outcome"], (c["message"] or "")[:600]) for c in doc["checks"] if c["outcome"] != "pass"]
    assert not bad, f"every quorum check must run and pass:\n{json.dumps(bad, indent=1)}"
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "quorum"}
    assert declared == RULES == set(by_rule(doc)), declared


def test_quorum_suite_passes_on_the_reference_quorum(tmp_path: Path) -> None:
    """3 dedicated controllers (node ids 1000..1002) in a Raft quorum beside 3 brokers."""
    doc = run_suites(tmp_path, [QUORUM], "--target-config", "brokers=3", "--target-config", "controllers=3",
                     name="quorum", timeout_s=400)
    assert doc["target"]["config"]["controllers"] == 3
    _all_pass(doc)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="Kafka with 3 voters: 3-6 JVMs, minutes: set KCT_SLOW=1")
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("topology", ["combined", "dedicated"])
def test_quorum_suite_passes_on_kafka(tmp_path: Path, topology: str) -> None:
    extra = ("--target-config", "brokers=3") + (("--target-config", "controllers=3") if topology == "dedicated"
                                                 else ())
    doc = run_suites(tmp_path, [QUORUM], *extra, target="kafka", name=f"quorum-{topology}", timeout_s=1000)
    _all_pass(doc)
