"""`--client java`: Apache Kafka's Java client (kafka-clients, a JVM per workload client, chaos/java) in the chaos
queue workload. Real JVMs, real reference brokers on loopback, real processes killed by PID; every JVM and broker
started here is stopped here (and nothing is left: the last test checks no driver JVM survives).

The driver is built once (cached in ~/.cache/kct/java-driver/<hash>/; 5-20 s the first time, ~0 after). Then
80-110 s on 2 shared cores (load 8-10): client-level checks on one broker (~20 s), bad settings (~1 s), a broken
source (3-16 s, Maven offline), JVMs of a SIGKILLed parent (<1 s), the 20 s kill run (30-39 s) and a 14 s run whose
JVMs are killed mid-operation (~24 s).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.client_stacks import make_client
from chaos.clients import ClientConfig, Definite, Indefinite
from chaos.java.build import BuildError, DriverBuild, ensure_driver
from chaos.java.driver import JavaClient, JavaDriver, live_drivers
from chaos.run import RunOptions, run
from fixtures.reference import ReferenceTarget
from history import read
from reference_broker.supervisor import pid_running, wait_gone

TOPIC = "jv"


@pytest.fixture(scope="module")
def build() -> DriverBuild:
    return ensure_driver()


@pytest.fixture(scope="module")
def target(build: DriverBuild, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceTarget]:
    with ReferenceTarget({"memory": "true", "kafka.group.initial.rebalance.delay.ms": "0"},
                         work_dir=tmp_path_factory.mktemp("broker")) as t:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": t.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            f.result(10)
        yield t


def _poll_until(c: JavaClient, want: int) -> list:
    polls, got = [], 0
    deadline = time.monotonic() + 20
    while got < want and time.monotonic() < deadline:
        recs, pos = c.poll(0.5)
        polls.append((recs, pos))
        got += len(recs)
    assert got >= want, polls
    return polls


def test_send_poll_positions_commit_through_the_jvm(target: ReferenceTarget, build: DriverBuild) -> None:
    """Sends get their offsets; an assigned consumer's polls return them in order, each poll with records listing
    the position it read from; a sync commit is confirmed and reads back; keys survive the JSON pipe intact."""
    p = make_client("java", ClientConfig(target.bootstrap))
    c = make_client("java", ClientConfig(target.bootstrap, group="g-java"))
    keys = ["plain", 'qu"ote\\back', "new\nline", "ünï€ode-😀", ""]
    try:
        offsets = [p.send(TOPIC, 1, k, 100 + i) for i, k in enumerate(keys)]
        assert offsets == list(range(len(keys)))
        assert p.driver is not None and p.driver.hello["kafka_clients"] == "4.4.0"
        c.assign([(TOPIC, 1)])
        polls = _poll_until(c, len(keys))
        recs = [r for rs, _ in polls for r in rs]
        assert recs == [(TOPIC, 1, i, k, 100 + i) for i, k in enumerate(keys)]
        assert all(pos is None for rs, pos in polls if not rs)  # empty polls say nothing
        p.send(TOPIC, 1, "k", 7)
        (more, pos), *_ = [x for x in _poll_until(c, 1) if x[0]]
        assert more[0][2] == len(keys) and pos == {f"{TOPIC}/1": len(keys)}  # known position: listed
        assert c.commit({f"{TOPIC}/1": len(keys) + 1}) is True
        assert c.end_offsets([(TOPIC, 0), (TOPIC, 1)]) == {f"{TOPIC}/0": 0, f"{TOPIC}/1": len(keys) + 1}
        assert p.send(TOPIC, 1, "k", 8) == len(keys) + 1
        with pytest.raises(Definite, match="not sent .*not present in metadata"):
            p.send(TOPIC, 9, "k", 1)  # no partition 9: KafkaProducer.send gives up (max.block.ms) before sending
    finally:
        p.close()
        c.close()
    c2 = make_client("java", ClientConfig(target.bootstrap, group="g-java"))
    try:
        c2.assign([(TOPIC, 1)])
        first = [rs for rs, _ in _poll_until(c2, 1) if rs][0]
        assert first[0][2] == len(keys) + 1  # a new consumer of the group starts at the committed offset
    finally:
        c2.close()


def test_killed_jvm_with_a_send_in_flight_is_info_and_replaced(target: ReferenceTarget) -> None:
    """The broker frozen, a send waits in the Java client; kill -9 of its JVM makes that send Indefinite (info),
    naming the kill. The next send runs in a new JVM and succeeds."""
    p = JavaClient(ClientConfig(target.bootstrap))
    try:
        p.send(TOPIC, 0, "k", 1)
        target.pause_broker()
        try:
            result: dict = {}

            def sender() -> None:
                try:
                    result["offset"] = p.send(TOPIC, 0, "k", 2)
                except Exception as e:  # noqa: BLE001 - what the test checks
                    result["error"] = e

            th = threading.Thread(target=sender)
            th.start()
            _wait(lambda: p.driver is not None and p.driver.pending == "send", "a send in flight")
            time.sleep(0.3)  # in the Java client's hands: written, and nobody can answer
            assert p.driver is not None and p.driver.pending == "send"
            os.kill(p.driver.pid, signal.SIGKILL)  # type: ignore[arg-type]
            th.join(15)
        finally:
            target.resume_broker()
        assert isinstance(result.get("error"), Indefinite), result
        assert "killed by SIGKILL during send" in str(result["error"])
        assert p.send(TOPIC, 0, "k", 3) >= 1 and p.jvms == 2
    finally:
        p.close()


def test_consumer_jvm_replaced_at_the_applications_position(target: ReferenceTarget) -> None:
    """A consumer's JVM killed between polls, then during one: the poll in flight fails (it delivered nothing) and
    each replacement reads on from the record after the last one delivered: no skip, no re-read."""
    p = make_client("java", ClientConfig(target.bootstrap))
    c = JavaClient(ClientConfig(target.bootstrap, group="g-replace"))

    try:
        base = p.send(TOPIC, 0, "k", 50)
        p.send(TOPIC, 0, "k", 51)
        c.assign([(TOPIC, 0)])
        c.seek(TOPIC, 0, base)
        seen = [r[2] for rs, _ in _poll_until(c, 2) for r in rs]
        assert c.driver is not None
        c.driver.kill()  # between polls
        p.send(TOPIC, 0, "k", 52)
        p.send(TOPIC, 0, "k", 53)
        polls = [(rs, pos) for rs, pos in _poll_until(c, 2) if rs]
        assert polls[0][1] == {f"{TOPIC}/0": base + 2}, polls  # the replacement's first read: where we left off
        seen += [r[2] for rs, _ in polls for r in rs]
        d = c.driver
        assert d is not None and d.pid is not None
        errors: list[Exception] = []

        def poller() -> None:
            try:
                c.poll(5.0)
            except Exception as e:  # noqa: BLE001 - what the test checks
                errors.append(e)

        os.kill(d.pid, signal.SIGSTOP)  # frozen: the poll below is surely in the JVM's hands when it dies
        th = threading.Thread(target=poller)
        th.start()
        _wait(lambda: d.pending == "poll", "a poll in flight")
        p.send(TOPIC, 0, "k", 54)  # what the frozen poll might have read: it must be read after all
        os.kill(d.pid, signal.SIGKILL)
        th.join(15)
        assert errors and "killed by SIGKILL during poll" in str(errors[0]), errors
        p.send(TOPIC, 0, "k", 55)
        seen += [r[2] for rs, _ in _poll_until(c, 2) for r in rs]
        assert seen == list(range(base, base + 6)) and c.jvms == 3, seen
    finally:
        p.close()
        c.close()


def test_bad_settings_exit_2_before_any_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                build: DriverBuild) -> None:
    t0 = time.monotonic()
    rc = main(["run", "--client", "java", "--client-config", "security.protocol=BOGUS", "--nemesis", "none",
               "--duration", "5s", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Java client refuses these settings" in err and "security.protocol" in err, err
    assert time.monotonic() - t0 < 20 and not list(tmp_path.iterdir())  # refused up front: no cluster, no files
    rc = main(["run", "--client", "java", "--client-config", "security.protocol=SSL", "--client-config",
               f"ssl.truststore.location={tmp_path}/none.jks", "--nemesis", "none", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "Failed to load SSL keystore" in err and "none.jks" in err, err


def test_a_broken_source_fails_the_build_naming_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              build: DriverBuild) -> None:
    src = tmp_path / "java"
    shutil.copytree(Path(__file__).resolve().parents[2] / "chaos" / "java", src,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__", "target"))
    driver = src / "src" / "main" / "java" / "kct" / "chaos" / "Driver.java"
    driver.write_text(driver.read_text().replace("private Driver(PrintStream out) {", "private Driver(PrintStream out {"))
    monkeypatch.setenv("KCT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(BuildError, match=r"Driver\.java:\[\d+,\d+\]"):
        ensure_driver(src)
    assert not [p for p in (tmp_path / "cache" / "java-driver").iterdir() if not p.name.startswith(".")]


_ORPHANS = """
import os, signal, time
from chaos.clients import ClientConfig
from chaos.java.driver import JavaClient
running = JavaClient(ClientConfig("127.0.0.1:9"))._ensure()
stopped = JavaClient(ClientConfig("127.0.0.1:9"))._ensure()
os.kill(stopped.pid, signal.SIGSTOP)
print(running.pid, stopped.pid, flush=True)
time.sleep(300)
"""


def test_no_jvm_outlives_a_killed_parent(build: DriverBuild) -> None:
    """The parent SIGKILLed: a running JVM ends on the EOF of its stdin, a stopped one (which cannot read it) is
    ended by the supervisor's watchdog."""
    child = subprocess.Popen([sys.executable, "-c", _ORPHANS], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout is not None
        pids = [int(x) for x in child.stdout.readline().split()]
        assert len(pids) == 2 and all(pid_running(p) for p in pids), pids
    finally:
        child.kill()
        child.wait(10)
    assert all(wait_gone(p, 15) for p in pids), [(p, pid_running(p)) for p in pids]


def _ops(history: Path) -> list[dict]:
    (h,) = read(str(history))
    return h.ops


def test_chaos_run_with_the_java_client_under_kill(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   build: DriverBuild) -> None:
    """The must-show run: `chaos run --client java --nemesis kill --duration 20s` on a 3-broker reference cluster
    gives a valid verdict, and its history holds the Java client's sends, polls with positions and commits."""
    rc = main(["run", "--client", "java", "--nemesis", "kill", "--duration", "20s", "--interval", "5s",
               "--fault-duration", "3s", "--seed", "1", "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    (hist,) = tmp_path.glob("*.jsonl")
    (h,) = read(str(hist))
    assert h.settings["client"] == "java" and h.target == "reference"
    ops = h.ops
    kinds = {(o["f"], o["type"]) for o in ops}
    assert {("send", "ok"), ("poll", "ok"), ("commit", "ok"), ("assign", "ok"), ("nemesis", "info")} <= kinds
    assert any(o["f"] == "nemesis" and o["value"].get("fault") == "kill" for o in ops)
    polls = [o["value"] for o in ops if o["f"] == "poll" and o["type"] == "ok" and o["value"]["records"]]
    assert sum("positions" in v for v in polls) > len(polls) // 2
    for v in polls:  # a listed position is where that partition's records start (no holes in these logs)
        for key, pos in v.get("positions", {}).items():
            assert min(r["offset"] for r in v["records"] if f"{r['topic']}/{r['partition']}" == key) == pos, v
    verdict = json.loads(next(tmp_path.glob("*.result.json")).read_text())["verdict"]
    assert verdict["valid"] and not verdict["anomalies"]["bad"]


def test_jvms_killed_mid_run_give_info_and_no_false_anomaly(tmp_path: Path, build: DriverBuild) -> None:
    """Producer JVMs killed with a send in flight (frozen first, so the send is surely the Java client's),
    consumer JVMs with a poll in flight: those sends are info, those polls fail, and the checkers find nothing."""
    killed: list[tuple[str, str]] = []
    stop = threading.Event()

    def killer() -> None:
        want = {"producer": 2, "consumer": 2}
        while not stop.is_set() and any(want.values()):
            time.sleep(1.0)
            for d in live_drivers():
                if want.get(d.label, 0) and _kill_in_flight(d, "send" if d.label == "producer" else "poll"):
                    want[d.label] -= 1
                    killed.append((d.label, str(d.pid)))

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    try:
        res = run(RunOptions(out=tmp_path, client="java", nemeses=(), duration=14, rate=100, seed=2, progress=False,
                             parquet=False, html=False, check_budget=5))
    finally:
        stop.set()
        th.join(10)
    assert res.exit_code == 0, (res.message, res.verdict)
    assert sum(1 for label, _ in killed if label == "producer") >= 1 and len(killed) >= 2, killed
    ops = _ops(res.history)  # type: ignore[arg-type]
    jvm_infos = [o for o in ops if o["f"] == "send" and o["type"] == "info" and "SIGKILL" in o["value"]["error"]]
    jvm_fails = [o for o in ops if o["f"] == "poll" and o["type"] == "fail" and "SIGKILL" in o["value"]["error"]]
    # (a completion already in the pipe when the JVM froze is still read: such a kill costs nothing)
    assert 1 <= len(jvm_infos) <= sum(1 for label, _ in killed if label == "producer"), killed
    assert len(jvm_fails) <= sum(1 for label, _ in killed if label == "consumer"), killed
    assert res.verdict and res.verdict["valid"] and not res.verdict["anomalies"]["counts"], res.verdict
    assert not live_drivers()  # every JVM of the run was stopped


def _kill_in_flight(d: JavaDriver, op: str) -> bool:
    """Freeze the JVM; if `op` is pending and unanswered (the reader saw no completion in 0.2 s), kill it."""
    if d.pid is None or not d.alive():
        return False
    try:
        os.kill(d.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    time.sleep(0.2)  # a completion written before the freeze is read by now
    if d.pending == op:
        os.kill(d.pid, signal.SIGKILL)
        return True
    os.kill(d.pid, signal.SIGCONT)
    return False


def _wait(cond, what: str, timeout: float = 10.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
