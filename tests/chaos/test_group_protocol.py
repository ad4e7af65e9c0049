"""`python -m chaos run --group-protocol consumer`: the workloads' consumers in a KIP-848 group.

The stacks that speak it (confluent-kafka, the Java client) get ``group.protocol=consumer`` and none of the classic
session timing (both clients refuse it then); the others are refused before any cluster starts, with a usage error
that names the stacks to use. A short queue run under kills against the reference cluster must be VALID with the
protocol in the history header; the Java client and the txn workload run behind KCT_SLOW.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.clients import ClientConfig, rdkafka_group_settings, settings_summary
from chaos.java.driver import consumer_props
from chaos.run import RunOptions, run

FAST = {"replica.lag.time.max.ms": "1000", "broker.session.timeout.ms": "2500"}


def test_consumer_protocol_settings_leave_out_the_classic_timing() -> None:
    classic = ClientConfig(bootstrap="127.0.0.1:9")
    kip848 = ClientConfig(bootstrap="127.0.0.1:9", group_protocol="consumer")
    assert rdkafka_group_settings(classic) == {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    assert rdkafka_group_settings(kip848) == {"group.protocol": "consumer"}
    props = consumer_props(kip848)
    assert props["group.protocol"] == "consumer" and not {"session.timeout.ms", "heartbeat.interval.ms"} & set(props)
    assert consumer_props(classic)["session.timeout.ms"] == "6000" and "group.protocol" not in consumer_props(classic)
    # given through --client-config instead, it means the same
    assert ClientConfig(bootstrap="x", extra={"group.protocol": "CONSUMER"}).consumer_protocol
    assert settings_summary(kip848)["group_protocol"] == "consumer"
    assert settings_summary(classic)["group_protocol"] == "classic"


@pytest.mark.parametrize(("argv", "says"), [
    (["--client", "reference"], "the reference client stack speaks only the classic group protocol"),
    (["--client", "kafka-python"], "the kafka-python client stack speaks only the classic group protocol"),
    (["--client", "reference", "--workload", "txn"], "use --client confluent or java"),
    (["--client", "confluent", "--sub-via", "assign"], "--sub-via subscribe"),
])
def test_stacks_without_kip848_are_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 argv: list[str], says: str) -> None:
    """Refused before any cluster starts (exit 2, nothing written)."""
    assert main(["run", "--group-protocol", "consumer", "--out", str(tmp_path), "--quiet", *argv]) == 2
    assert says in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def _header(res: object) -> dict:
    path = res.history  # type: ignore[attr-defined]
    with open(path) as f:
        return json.loads(f.readline())["header"]


@pytest.mark.timeout(180)
def test_queue_with_consumer_protocol_under_kills_is_valid(tmp_path: Path) -> None:
    """confluent-kafka consumers subscribe in a KIP-848 group on the reference cluster while a broker is killed:
    a complete history, no anomaly, and the header says which protocol ran (the checkers' subscribe rules)."""
    res = run(RunOptions(out=tmp_path, client="confluent", group_protocol="consumer", sub_via="subscribe",
                         nemeses=("kill",), duration=10, interval=4, fault_duration=2, rate=100, seed=5,
                         cluster_settings=FAST, progress=False, parquet=False, html=False, check_budget=5))
    assert res.final and res.final["complete"], res
    assert res.exit_code == 0, res.verdict
    settings = _header(res)["settings"]
    assert settings["group_protocol"] == "consumer" and settings["sub_via"] == ["subscribe"], settings


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="Java driver and txn runs with KIP-848: set KCT_SLOW=1")
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("client", "workload"), [("java", "queue"), ("confluent", "txn"), ("java", "txn")])
def test_kip848_runs_on_the_reference_are_valid(tmp_path: Path, client: str, workload: str) -> None:
    res = run(RunOptions(out=tmp_path, client=client, workload=workload, group_protocol="consumer",
                         sub_via="subscribe", nemeses=("kill", "pause"), duration=30, rate=100 if workload == "queue"
                         else 20, seed=3, cluster_settings=FAST, progress=False, parquet=False, html=False))
    assert res.final and res.final["complete"], res
    assert res.exit_code == 0, res.verdict
    assert _header(res)["settings"]["group_protocol"] == "consumer"
