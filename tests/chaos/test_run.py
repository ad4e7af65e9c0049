"""`python -m chaos run`: option safety, schedule replay, and short real runs against a reference cluster.

The two short runs are the must-show pair: the lossy schedule (followers stalled out of the ISR, leader killed)
loses acknowledged writes only when unclean election is enabled with min.insync.replicas=1, and the checkers say
so with evidence; with Kafka's safe settings the same schedule loses nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from chaos.cli import main
from chaos.run import (
    ControlSocketTarget,
    RunError,
    RunOptions,
    check_bootstrap,
    parse_duration,
    plan_only,
    run,
    target_config,
)

ROOT = Path(__file__).resolve().parents[2]
# short timeouts so a killed leader is replaced within seconds (session > 1.5 x lag still holds)
FAST = {"replica.lag.time.max.ms": "1000", "broker.session.timeout.ms": "2500"}


def test_durations() -> None:
    assert parse_duration("60s") == 60 and parse_duration("2m") == 120 and parse_duration("500ms") == 0.5
    for bad in ("", "5x", "-1s", "0s", "2d"):
        with pytest.raises(RunError):
            parse_duration(bad)


def test_remote_bootstrap_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RunError, match="--allow-remote"):
        check_bootstrap("kafka.example.com:9092", allow_remote=False)
    assert check_bootstrap("10.1.2.3:9092", allow_remote=True) == [("10.1.2.3", 9092)]
    assert main(["run", "--bootstrap", "10.1.2.3:9092", "--nemesis", "none", "--out", "/tmp/x"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_network_faults_start_the_docker_kafka_flavour_proxied_and_other_images_as_before(tmp_path: Path) -> None:
    """--nemesis partition on --target docker: build:kafka runs proxied=true as the kafka target does (its nemeses
    then act on the proxies); the apache and tansu flavours cannot, so they start as before; the user's
    --target-config wins."""
    def cfg(image: str | None, network: bool = True, **config: str) -> dict[str, str]:
        return target_config(RunOptions(out=tmp_path, target="docker", docker_image=image, target_config=config),
                             network)

    assert cfg("build:kafka")["proxied"] == "true"
    assert cfg("kct-local/kafka:4.4.0-abc")["proxied"] == "true"
    assert "proxied" not in cfg("build:kafka", network=False)
    assert cfg("build:kafka", proxied="false")["proxied"] == "false"
    assert "proxied" not in cfg("build:tansu") and "proxied" not in cfg(None) and "proxied" not in cfg("x/y:1")
    assert target_config(RunOptions(out=tmp_path, target="kafka"), True)["proxied"] == "true"


def test_clear_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", "--nemesis", "kill,bogus", "--dry-run"]) == 2
    assert "unknown nemesis bogus" in capsys.readouterr().err
    assert main(["run", "--duration", "soon", "--dry-run"]) == 2
    assert "bad duration" in capsys.readouterr().err
    # a live cluster that is not there; no process faults without a control socket
    assert main(["run", "--bootstrap", "127.0.0.1:1", "--nemesis", "none", "--out", str(tmp_path)]) == 2
    assert "unreachable" in capsys.readouterr().err
    assert main(["run", "--bootstrap", "127.0.0.1:1", "--nemesis", "kill", "--out", str(tmp_path)]) == 2
    assert "--control" in capsys.readouterr().err


def test_same_seed_same_schedule(tmp_path: Path) -> None:
    opts = RunOptions(out=tmp_path, seed=7, nemeses=("kill", "pause", "restart"), duration=120)
    a, b = plan_only(opts), plan_only(opts)
    assert [s.describe() for s in a] == [s.describe() for s in b] and len(a) >= 5
    other = plan_only(RunOptions(out=tmp_path, seed=8, nemeses=("kill", "pause", "restart"), duration=120))
    assert [s.describe() for s in a] != [s.describe() for s in other]


def _lossy(tmp_path: Path, unsafe: bool) -> tuple[int, dict, Any]:
    settings = dict(FAST)
    if unsafe:
        settings.update({"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    res = run(RunOptions(out=tmp_path, schedule="lossy", partitions=1, consumers=0, duration=13, rate=100,
                         seed=3, cluster_settings=settings, progress=False, parquet=False, check_budget=5,
                         html=False))
    assert res.final and res.final["complete"], res
    return res.exit_code, res.verdict or {}, res


@pytest.mark.timeout(120)
def test_unclean_election_with_min_isr_1_loses_acknowledged_writes(tmp_path: Path) -> None:
    code, verdict, res = _lossy(tmp_path, unsafe=True)
    # the kill came once the leader was alone in the ISR (its own Metadata said so), not at a guessed time
    (kill,) = _nemesis_values(res, "kill-leader")
    assert kill["isr_alone"] is True, kill
    assert code == 1
    counts = verdict["anomalies"]["counts"]
    assert counts.get("lost-write", 0) > 0, counts
    case = verdict["anomalies"]["cases"]["lost-write"][0]
    assert case["writer"]["type"] == "ok" and case["writer"]["f"] == "send"  # acknowledged, then gone
    assert case["max_read_index"] > case["index"]  # and later writes were read


@pytest.mark.timeout(120)
def test_min_isr_2_same_schedule_loses_nothing(tmp_path: Path) -> None:
    code, verdict, _ = _lossy(tmp_path, unsafe=False)
    assert code == 0, verdict.get("anomalies", {}).get("counts")
    assert "lost-write" not in verdict["anomalies"]["counts"]


def _liveness(tmp_path: Path, schedule: str, duration: float) -> Any:
    res = run(RunOptions(out=tmp_path, schedule=schedule, partitions=1, consumers=1, duration=duration, rate=100,
                         seed=5, cluster_settings=dict(FAST), progress=False, parquet=False, check_budget=5,
                         html=False))
    assert res.stats["faults_failed"] == 0, res.message
    assert res.recovery and res.recovery["recovered"], (
        f"{schedule}: replicas not back in the ISR after every fault was healed: {res.recovery}")
    assert res.final and res.final["complete"] and res.exit_code == 0, (res.exit_code, res.message, res.verdict)
    return res


def _nemesis_values(res: Any, kind: str) -> list[dict]:
    """The recorded end of each fault of ``kind`` (what a fault resolved when it started, e.g. the broker it
    killed, is in the params recorded at its stop)."""
    ops = [json.loads(line) for line in Path(res.history).read_text().splitlines()[1:]]
    return [o["value"] for o in ops if o["f"] == "nemesis" and o["type"] == "info"
            and o["value"]["fault"] == kind and o["value"]["phase"] == "stop"]


@pytest.mark.timeout(150)
def test_empty_epoch_schedule_ends_with_a_full_isr(tmp_path: Path) -> None:
    """Issue 18 item 1 as a chaos run: with every Produce refused, the leader is killed, then its successor (which
    led an epoch without a write); both come back. Before the fix the second never rejoined the ISR (and acks=all
    timed out while it was in it): the run's recovery check reported it, exit 1."""
    res = _liveness(tmp_path, "empty-epoch", 20)
    kills = [v["broker"] for v in _nemesis_values(res, "kill-leader")]
    assert len(kills) == 2 and kills[0] != kills[1], kills


@pytest.mark.timeout(150)
def test_behind_log_start_schedule_ends_with_a_full_isr(tmp_path: Path) -> None:
    """Issue 18 item 3 as a chaos run: a follower is killed, the records every consumer read are deleted past its
    log end, it restarts. Before the fix it looped on OFFSET_OUT_OF_RANGE and never rejoined: exit 1."""
    res = _liveness(tmp_path, "behind-log-start", 16)
    (deleted,) = _nemesis_values(res, "delete-consumed")
    assert deleted["offset"] > 0, deleted


def _start_cluster(tmp_path: Path) -> tuple[subprocess.Popen, str, str]:
    # `python -m reference_broker cluster` on main dies on a missing --log-level (its subparser lacks it), so the
    # same CLI code is entered through run_cluster_cli directly
    boot = ("import sys; from reference_broker.__main__ import build_parser; "
            "from reference_broker.cluster import run_cluster_cli; "
            "sys.exit(run_cluster_cli(build_parser().parse_args(sys.argv[1:])))")
    argv = [sys.executable, "-c", boot, "cluster", "--brokers", "3", "--data-dir", str(tmp_path / "c"),
            *(a for k, v in FAST.items() for a in ("--config", f"{k}={v}"))]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    bootstrap = control = ""
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline and not (bootstrap and control):
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("READY "):
            bootstrap = line.split()[1]
        elif line.startswith("CONTROL "):
            control = line.split()[1]
    assert bootstrap and control, "cluster did not start"
    return proc, bootstrap, control


def _stop(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM by PID, SIGKILL after `grace` s: a cluster or broker a test started never outlives it."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _status(control: str) -> dict:
    return json.loads(ControlSocketTarget(control, "")._call("status"))


@pytest.mark.timeout(150)
def test_live_cluster_ctrl_c_leaves_no_fault_behind(tmp_path: Path) -> None:
    """A cluster started separately, driven with --bootstrap/--control; SIGINT while a broker is paused."""
    proc, bootstrap, control = _start_cluster(tmp_path)
    try:
        before = _status(control)["pids"]
        chaos = subprocess.Popen(
            [sys.executable, "-m", "chaos", "run", "--bootstrap", bootstrap, "--control", control, "--nemesis",
             "pause", "--interval", "40s", "--fault-duration", "30s", "--duration", "60s", "--rate", "50",
             "--seed", "1", "--out", str(tmp_path / "out")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _status(control)["paused"]:
            time.sleep(0.3)
        assert _status(control)["paused"], "the nemesis never paused a broker"
        chaos.send_signal(signal.SIGINT)
        out, err = chaos.communicate(timeout=60)
        assert chaos.returncode == 2, (out, err)
        status = _status(control)
        assert status["paused"] == [], status
        assert status["pids"] == before  # nothing killed, nothing else touched
        hist = next((tmp_path / "out").glob("*.jsonl"))
        ops = [json.loads(line) for line in hist.read_text().splitlines()[1:]]
        nem = [o["value"] for o in ops if o["f"] == "nemesis" and o["type"] == "info"]
        assert nem[-1]["phase"] == "stop" and nem[-1]["reason"] == "cleanup" and nem[-1]["ok"]
    finally:
        _stop(proc)
    assert os.path.exists(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="a 60-second chaos run: set KCT_SLOW=1")
@pytest.mark.timeout(400)
def test_sixty_seconds_of_kills_and_pauses_lose_no_acknowledged_write(tmp_path: Path) -> None:
    """RF=3, min.insync.replicas=2, acks=all, a fault every 10 s: a complete history with no lost write."""
    res = run(RunOptions(out=tmp_path, nemeses=("kill", "pause"), duration=60, rate=200, seed=7, progress=False))
    assert res.final and res.final["complete"]
    assert res.stats["faults"] >= 5 and res.stats["faults_failed"] == 0
    assert res.exit_code == 0, res.verdict
    assert "lost-write" not in res.verdict["anomalies"]["counts"]


@pytest.mark.timeout(150)
def test_two_runs_on_one_live_cluster_do_not_read_each_others_records(tmp_path: Path) -> None:
    """Each run on a live cluster writes its own topic: values restart at 0 per run, so a shared topic made the
    second run read the first run's records as duplicates and skips (INVALID with a correct broker)."""
    proc, bootstrap, _control = _start_cluster(tmp_path)
    try:
        topics = []
        for i in range(2):
            out = tmp_path / f"run{i}"
            rc = main(["run", "--bootstrap", bootstrap, "--nemesis", "none", "--duration", "6s", "--rate", "80",
                       "--seed", "1", "--quiet", "--out", str(out)])
            assert rc == 0, f"run {i} on the same live cluster: exit {rc}"
            header = json.loads(next(out.glob("*.jsonl")).read_text().splitlines()[0])
            sends = [json.loads(x)["value"]["topic"] for x in next(out.glob("*.jsonl")).read_text().splitlines()[1:]
                     if '"f":"send"' in x]
            topics.append(set(sends))
            assert header["run_id"] in next(iter(sends))
        assert topics[0].isdisjoint(topics[1]), topics
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
