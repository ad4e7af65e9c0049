"""`chaos run --target kafka`: the same nemeses, workload and verdicts against Apache Kafka itself (3 KRaft nodes,
one JVM each, proxied links), including faults on Kafka's own controller quorum found through DescribeQuorum; and
every fault undone when the run is interrupted."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def _ops(out: Path) -> list[dict]:
    hist = next(out.glob("*.jsonl"))
    return [json.loads(line) for line in hist.read_text().splitlines()[1:]]


def test_controller_faults_on_kafkas_quorum_keep_acknowledged_writes(tmp_path: Path) -> None:
    """Kill, pause and isolate the active controller (each found when its fault starts); with acks=all,
    min.insync.replicas=2 and unclean election off, nothing acknowledged may be lost."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "chaos", "run", "--target", "kafka", "--nemesis",
         "kill-controller,pause-controller,isolate-controller", "--seed", "6", "--duration", "36s",
         "--interval", "9s", "--fault-duration", "4s", "--rate", "80", "--client", "confluent", "--quiet",
         "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads(next(out.glob("*.result.json")).read_text())["verdict"]
    found = set(verdict["anomalies"]["counts"])
    # What Kafka promises here: no acknowledged write lost. The queue workload's producer is not idempotent
    # (enable.idempotence=false, retries=0), and Kafka promises no duplicates only to idempotent producers. Under
    # load, librdkafka 2.x was seen to send a Produce again after isolate-controller cut its connection to the
    # leader (values 1 and 2 at offsets 0-1 and again at 2-3, each acknowledged once, 4.5 s after the invoke):
    # duplicates are the client's, not Kafka's, and are kept in the verdict; the checker reports each once, as a
    # duplicate, and never the reads of its second copy as skips or steps back (issue 24, reports/checkers.py).
    assert not found & {"lost-write", "unseen"}, proc.stdout[-3000:]
    assert found <= {"duplicate"}, proc.stdout[-3000:]
    assert verdict["linearizability"]["committed-offsets"]["verdict"] == "ok", verdict["linearizability"]
    if not found:
        assert proc.returncode == 0 and "verdict: VALID" in proc.stdout, proc.stdout[-3000:]
    ops = _ops(out)
    started = [o["value"] for o in ops if o["f"] == "nemesis" and o["type"] == "info"
               and o["value"]["phase"] == "start"]
    assert started and all(v.get("ok") for v in started), started
    assert {v["fault"] for v in started} == {"kill-controller", "pause-controller", "isolate-controller"}, started
    assert all(v["controller_id"] in (0, 1, 2) for v in started)                 # Kafka's node ids
    header = json.loads(next(out.glob("*.jsonl")).read_text().splitlines()[0])["header"]
    assert header["target"] == "kafka"
    sends = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
    assert len(sends) > 500, len(sends)


def test_an_interrupted_run_leaves_no_kafka_node_paused_and_no_proxy_cut(tmp_path: Path) -> None:
    out = tmp_path / "out"
    chaos = subprocess.Popen(
        [sys.executable, "-m", "chaos", "run", "--target", "kafka", "--nemesis", "pause,partition", "--seed", "1",
         "--duration", "120s", "--interval", "5s", "--fault-duration", "60s", "--rate", "40", "--out", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            hist = list(out.glob("*.jsonl"))
            if hist and sum('"phase":"start"' in line and '"ok":true' in line
                            for line in hist[0].read_text().splitlines()) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the run never had two faults in effect")
        chaos.send_signal(signal.SIGINT)
        stdout, stderr = chaos.communicate(timeout=120)
    finally:
        if chaos.poll() is None:
            chaos.kill()
            chaos.wait(30)
    assert chaos.returncode == 2, stdout[-2000:] + stderr[-2000:]
    ops = _ops(out)
    nem = [o["value"] for o in ops if o["f"] == "nemesis" and o["type"] == "info"]
    started = {v["id"] for v in nem if v["phase"] == "start" and v.get("ok")}
    stopped = {v["id"] for v in nem if v["phase"] == "stop" and v.get("ok")}
    assert started and started <= stopped, nem                      # every fault undone, each recorded
    assert any(v.get("reason") == "cleanup" for v in nem)
    # the cluster's JVMs and proxy are gone with the run: nothing left running or stopped
    logs = list(out.glob("*.cluster/node-*/kafka.log"))
    assert len(logs) == 3
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    mine = [line for line in ps.splitlines() if str(out) in line]
    assert not mine, mine
