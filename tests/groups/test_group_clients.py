"""Real group consumers share a 6-partition topic; one leaves, one is killed; the rest take over.

kafka-python, confluent-kafka (range, roundrobin, cooperative-sticky) and kcat's balanced consumer (-G), each as
separate OS processes so the kill is a real SIGKILL. Every record is consumed at least once; with a synchronous
commit after processing, the only duplicates are records the killed member had processed but not committed.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

WORKER = Path(__file__).with_name("consumer_worker.py")
PARTITIONS, PER_PHASE = 6, 300


def produce(bootstrap: str, topic: str, phase: str) -> set[str]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = {f"{phase}-{i}" for i in range(PER_PHASE)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, v.encode(), key=str(i).encode())
    assert p.flush(30) == 0
    return values


def read_outputs(files: list[Path]) -> list[list[str]]:
    out = []
    for f in files:
        vals = []
        if f.exists():
            for line in f.read_text().splitlines():
                if line.startswith("{"):
                    vals.append(json.loads(line)["v"])
                elif line.count(" ") >= 2:            # kcat: "partition offset value"
                    vals.append(line.split(" ", 2)[2])
        out.append(vals)
    return out


def wait_consumed(files: list[Path], expected: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = {v for vals in read_outputs(files) for v in vals}
        if expected <= seen:
            return
        time.sleep(0.2)
    missing = expected - {v for vals in read_outputs(files) for v in vals}
    raise AssertionError(f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}")


def wait_members(bootstrap: str, group: str, n: int, timeout: float = 30) -> None:
    """Wait until the group is Stable with exactly n members (DescribeGroups), so all share the first records."""
    from confluent_kafka import ConsumerGroupState
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = admin.describe_consumer_groups([group])[group].result(10)
        if d.state == ConsumerGroupState.STABLE and len(d.members) == n:
            return
        time.sleep(0.2)
    raise AssertionError(f"group {group} never became Stable with {n} members")


def start_member(kind: str, bootstrap: str, group: str, topic: str, out: Path, strategy: str):
    if kind == "kcat":
        f = open(out, "ab")
        proc = subprocess.Popen(["kcat", "-b", bootstrap, "-G", group, topic, "-u", "-q", "-f", "%p %o %s\n",
                                 "-X", "session.timeout.ms=3000", "-X", "heartbeat.interval.ms=300",
                                 "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100"],
                                stdout=f, stderr=subprocess.DEVNULL)
        f.close()
        return proc
    err = open(out.with_suffix(".err"), "ab")      # kept as evidence in the test's tmp dir
    proc = subprocess.Popen([sys.executable, str(WORKER), kind, bootstrap, group, topic, str(out), strategy],
                            stderr=err)
    err.close()
    return proc


@pytest.mark.parametrize("kind,strategy", [
    ("kafka-python", "range"),
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kcat", "range"),
])
def test_three_members_leave_and_kill(broker, tmp_path, kind, strategy):
    if kind == "kcat" and shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (./run installs Debian kcat)")
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("shared", PARTITIONS, 1)]).values():
        f.result(10)
    files = [tmp_path / f"member-{i}.out" for i in range(3)]
    members = [start_member(kind, bs, "grp", "shared", files[i], strategy) for i in range(3)]
    try:
        wait_members(bs, "grp", 3)
        a = produce(bs, "shared", "A")
        wait_consumed(files, a)
        members[0].send_signal(signal.SIGTERM)             # graceful leave: LeaveGroup
        assert members[0].wait(30) == 0 or kind == "kcat"
        b = produce(bs, "shared", "B")
        wait_consumed(files[1:], b)
        os.kill(members[1].pid, signal.SIGKILL)              # crash: only the session timeout tells the group
        members[1].wait(10)
        c = produce(bs, "shared", "C")
        wait_consumed(files[2:], c)
        time.sleep(0.5)
    finally:
        for m in members:
            if m.poll() is None:
                m.send_signal(signal.SIGTERM)
                try:
                    m.wait(20)
                except subprocess.TimeoutExpired:
                    m.kill()
                    m.wait(10)
    outputs = read_outputs(files)
    assert all(outputs), f"each member had partitions and consumed: {[len(o) for o in outputs]}"
    every = [v for vals in outputs for v in vals]
    assert a | b | c <= set(every), "at least once"
    dupes = {v for v in every if every.count(v) > 1}
    # exactly once except for what the killed member processed without committing, and records whose commit was
    # refused (REBALANCE_IN_PROGRESS, reported by the worker) before their partition moved
    refused = sum(f.with_suffix(".err").read_text().count("commit failed") for f in files
                  if f.with_suffix(".err").exists())
    unexplained = dupes - set(outputs[1])
    assert len(unexplained) <= refused, f"duplicates not explained by the kill: {sorted(unexplained)[:5]}"
    assert not {v for v in c if v in outputs[1]}, "the killed member cannot have consumed after its death"
