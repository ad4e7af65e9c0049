"""`chaos run --workload metadata` on the reference cluster: a short fault-free run is VALID with its operations
recorded in the one history format and the topic-metadata model checked; with the fault switches (KCT_SLOW)
metadata.create_ack_uncommitted (the controller acknowledges creates it never writes: lost-create, an illegal
topic-metadata history) and metadata.serve_stale_view (a broker's view goes back: stale-read) the verdict flips. Longer runs under the controller nemeses: KCT_SLOW."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos.run import EXIT_ANOMALIES, EXIT_VALID, RunError, RunOptions, run
from history import read

METADATA_FS = {"create_topic", "delete_topic", "create_partitions", "elect_leaders", "metadata"}


def _opts(tmp_path: Path, **kw: object) -> RunOptions:
    base: dict = {"out": tmp_path, "workload": "metadata", "client": "reference", "nemeses": (), "duration": 10,
                  "rate": 12, "seed": 3, "progress": False, "html": False, "parquet": False}
    return RunOptions(**{**base, **kw})


def test_metadata_workload_needs_the_reference_client_stack(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="--client reference"):
        run(_opts(tmp_path, client="kafka-python"))


def test_short_fault_free_run_is_valid_and_recorded(tmp_path: Path) -> None:
    res = run(_opts(tmp_path))
    assert res.exit_code == EXIT_VALID, (res.message, res.verdict)
    assert res.final["converged"] and res.final["topics"] >= 5
    v = res.verdict
    assert v["valid"] and v["linearizability"]["topic-metadata"]["verdict"] == "ok"
    assert v["linearizability"]["topic-metadata"]["parts"] == res.final["topics"]
    h = read(str(res.history))[0]
    kinds = {op["f"] for op in h.ops}
    assert {"create_topic", "delete_topic", "elect_leaders", "metadata"} <= kinds <= METADATA_FS
    finals = [op for op in h.ops if op["f"] == "metadata" and op["type"] == "ok" and op["value"].get("final")]
    assert sorted(op["value"]["node"] for op in finals) == res.final["brokers"]
    assert h.settings["workload"] == "metadata"
    served = "create_partitions" in kinds
    assert served or any("CreatePartitions" in s for s in h.settings.get("skipped", []))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="a second cluster: set KCT_SLOW=1")
@pytest.mark.parametrize("switch,anomaly,first", [
    ("metadata.create_ack_uncommitted", "lost-create", "create_topic"),   # acknowledged, never written
    ("metadata.serve_stale_view", "stale-read", "metadata"),              # a broker's view went back
])
def test_fault_switches_flip_the_verdict(tmp_path: Path, switch: str, anomaly: str, first: str) -> None:
    res = run(_opts(tmp_path, target_config={"faults": switch}))
    assert res.exit_code == EXIT_ANOMALIES, res.message
    v = res.verdict
    assert v["anomalies"]["counts"].get(anomaly, 0) >= 1 and anomaly in v["anomalies"]["bad"]
    case = v["anomalies"]["cases"][anomaly][0]
    assert [op["f"] for op in case["ops"]] == [first, "metadata"]
    if anomaly == "lost-create":
        assert v["linearizability"]["topic-metadata"]["verdict"] == "illegal"
    assert json.loads((tmp_path / f"{res.run_id}.result.json").read_text())["exit_code"] == EXIT_ANOMALIES


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="a 60-second chaos run: set KCT_SLOW=1")
@pytest.mark.parametrize("nemesis", ["kill-controller", "pause-controller"])
def test_sixty_seconds_of_controller_faults_lose_no_metadata(tmp_path: Path, nemesis: str) -> None:
    """The reference has one controller: its faults show as unavailability (fail/info), never as lost or
    phantom metadata."""
    res = run(_opts(tmp_path, nemeses=(nemesis,), duration=60, rate=10, seed=7))
    assert res.exit_code == EXIT_VALID, (res.message, res.verdict)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="Apache Kafka, 3 KRaft nodes: set KCT_SLOW=1")
@pytest.mark.timeout(400)
def test_kafka_controller_failover_loses_no_metadata(tmp_path: Path) -> None:
    """Apache Kafka 4.4.0, 3 combined nodes: kill, pause and isolate the ACTIVE controller (found through
    DescribeQuorum when each fault starts) while topics are created, grown, deleted and read: VALID, CreatePartitions
    served (so recorded), the topic-metadata history linearizable."""
    res = run(_opts(tmp_path, target="kafka", nemeses=("kill-controller", "pause-controller", "isolate-controller"),
                    duration=36, interval=9, fault_duration=4, seed=6))
    assert res.exit_code == EXIT_VALID, (res.message, res.verdict)
    assert res.verdict["linearizability"]["topic-metadata"]["verdict"] == "ok"
    h = read(str(res.history))[0]
    assert "create_partitions" in {op["f"] for op in h.ops} and not h.settings.get("skipped")
    started = [op["value"] for op in h.ops if op["f"] == "nemesis" and op["type"] == "info"
               and op["value"].get("phase") == "start"]
    assert started and all(v.get("ok") and v["controller_id"] in (0, 1, 2) for v in started), started
