"""`chaos run --target reference --target-config controllers=3`: the controller nemeses against the reference
cluster's Raft quorum (voters 1000..1002), as they run against Kafka's (tests/chaos/test_run_kafka.py): each fault
finds the ACTIVE voter when it starts (DescribeQuorum through a broker), records it as controller_id, and the
workload's verdict is what Kafka promises (acks=all: nothing acknowledged lost; metadata: nothing acknowledged lost,
no phantom, the controller's answers linearizable). isolate-controller needs the proxied quorum (each link to a
voter its own proxy), which `chaos run` asks for itself when a network fault is in the schedule.

A 36-second run each: KCT_SLOW."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.run import EXIT_VALID, RunOptions, run
from history import read

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400),
              pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="36-second chaos runs: set KCT_SLOW=1")]

NEMESES = ("kill-controller", "pause-controller", "isolate-controller")
VOTERS = {1000, 1001, 1002}


def _opts(tmp_path: Path, **kw: object) -> RunOptions:
    base: dict = {"out": tmp_path, "nemeses": NEMESES, "duration": 36, "interval": 9, "fault_duration": 4,
                  "seed": 6, "target": "reference", "target_config": {"controllers": "3"}, "progress": False,
                  "html": False, "parquet": False}
    return RunOptions(**{**base, **kw})


def _started(history: Path) -> list[dict]:
    h = read(str(history))[0]
    return [op["value"] for op in h.ops if op["f"] == "nemesis" and op["type"] == "info"
            and op["value"].get("phase") == "start"]


def test_queue_under_the_active_voters_faults_keeps_acknowledged_writes(tmp_path: Path) -> None:
    res = run(_opts(tmp_path, workload="queue", client="confluent", rate=80))
    bad = set((res.verdict or {}).get("anomalies", {}).get("bad", []))
    assert not bad & {"lost-write", "unseen"}, (res.message, res.verdict)
    assert bad <= {"duplicate"}, (res.message, res.verdict)   # not idempotent: Kafka promises no dedup (KIP-98)
    assert res.recovery and res.recovery["recovered"], res.recovery
    started = _started(res.history)
    assert {v["fault"] for v in started} == set(NEMESES), started
    assert all(v.get("ok") and v["controller_id"] in VOTERS for v in started), started
    assert all(v["node"] == f"k{v['controller_id']}" for v in started if v["fault"] == "isolate-controller"), started
    assert res.stats["ok"] > 500, res.stats


def test_metadata_under_the_active_voters_faults_loses_nothing(tmp_path: Path) -> None:
    res = run(_opts(tmp_path, workload="metadata", client="reference", rate=10))
    assert res.exit_code == EXIT_VALID, (res.message, res.verdict)
    assert res.verdict["linearizability"]["topic-metadata"]["verdict"] == "ok"
    started = _started(res.history)
    assert started and all(v.get("ok") and v["controller_id"] in VOTERS for v in started), started
