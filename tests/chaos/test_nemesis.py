"""Nemesis schedules: seeded and printable, applied to a real reference broker and proxies, recorded in the
history, and always undone (normal end, failure, Ctrl-C)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.faults import Partition, Topology, ToxiproxyClient, cut_links, split_one
from chaos.nemesis import Context, NemesisRunner, ScheduleSpec, Step, generate
from chaos.nemesis.base import Fault
from fixtures.reference import ReferenceTarget
from history import Recorder
from history.io import read_jsonl
from history.schema import NEMESIS_PROCESS

ALL = ("kill", "pause", "restart", "partition", "latency", "kafka-error")


@pytest.fixture(scope="module")
def target() -> Iterator[ReferenceTarget]:
    t = ReferenceTarget({"memory": "true"})
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture
def ctx(target, proxy_server) -> Context:
    client = ToxiproxyClient(proxy_server.api_address)
    client.create("b0", upstream=target.bootstrap)
    return Context(target=target, client=client, topology=Topology({("c", "b0"): "b0"}))


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _assert_all_undone(ctx: Context) -> None:
    proxies = ctx.client.proxies()
    assert all(p["enabled"] and p["toxics"] == [] for p in proxies.values()), proxies
    assert ctx.target._proc.alive() and _state(ctx.target.pid) != "T"
    host, port = proxies["b0"]["listen"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:  # through the proxy to the broker
        s.sendall(b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x")  # ApiVersions v0
        assert len(s.recv(4)) == 4


def test_same_seed_same_schedule():
    spec = ScheduleSpec(interval=1, duration=0.5, total=40, faults=ALL, brokers=(0, 1, 2))
    assert generate(11, spec) == generate(11, spec)
    assert generate(11, spec) != generate(12, spec)
    assert {s.kind for s in generate(11, spec)} == set(ALL)
    assert all(s.duration == 0.5 for s in generate(11, spec))


def test_plan_cli_prints_the_schedule(capsys):
    from chaos.cli import main

    assert main(["nemesis", "plan", "--seed", "5", "--total", "30", "--brokers", "0,1,2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines == [s.describe() for s in generate(5, ScheduleSpec(total=30, brokers=(0, 1, 2)))]


def test_partition_cuts_only_crossing_links():
    topo = Topology({("c", "b1"): "c-b1", ("c", "b2"): "c-b2", ("b1", "b2"): "b1-b2", ("b2", "b1"): "b2-b1"})
    assert cut_links(topo, split_one(topo.nodes(), "b1")) == ["b1-b2", "b2-b1", "c-b1"]
    assert cut_links(topo, [["c", "b1", "b2"]]) == []


def test_schedule_runs_against_reference_broker_and_is_recorded(ctx, tmp_path):
    steps = [Step(i, 0.6 * i, 0.35, kind, params) for i, (kind, params) in enumerate([
        ("pause", {"broker": 0}), ("latency", {"broker": 0, "latency": 50, "jitter": 0}),
        ("partition", {"mode": "isolate", "components": [["b0"], ["c"]]}),
        ("kafka-error", {"broker": 0, "api_key": 1, "error_code": 6, "probability": 1.0}),
        ("kill", {"broker": 0}),
    ])]
    rec = Recorder("nem-1", target="reference", nemesis="mixed")
    seen: dict[str, object] = {}
    runner = NemesisRunner(ctx, rec)
    real_start = runner._transition

    def spy(step, fault, phase, action, **extra):  # observe each fault while it is in effect
        ok = real_start(step, fault, phase, action, **extra)
        if phase == "start":
            proxy = ctx.client.proxies()["b0"]
            seen[fault.kind] = (proxy["enabled"], [t["type"] for t in proxy["toxics"]],
                                _state(ctx.target.pid) if ctx.target._proc.alive() else "dead")
        return ok

    runner._transition = spy
    runner.run(steps)
    assert seen["pause"][2] == "T" and seen["kill"][2] == "dead"
    assert seen["partition"][0] is False and seen["latency"][1] == ["latency", "latency"]
    assert seen["kafka-error"][1] == ["kafka"]
    _assert_all_undone(ctx)
    ops = [op for op in rec.history.ops if op["process"] == NEMESIS_PROCESS]
    assert [(op["type"], op["value"]["phase"], op["value"]["id"]) for op in ops] == [
        (t, ph, i) for i in range(5) for ph in ("start", "stop") for t in ("invoke", "info")]
    assert all(op["f"] == "nemesis" for op in ops)
    assert all(op["value"].get("ok") for op in ops if op["type"] == "info")
    rec.write(str(tmp_path / "h.jsonl"))
    (back,) = read_jsonl(str(tmp_path / "h.jsonl"))  # valid under the history contract
    assert len(back.ops) == 20


@pytest.mark.parametrize("kind", ["pause", "kill", "latency", "partition"])
def test_ctrl_c_undoes_the_active_fault(ctx, kind):
    params = {"broker": 0} if kind != "partition" else {"mode": "isolate", "components": [["b0"], ["c"]]}
    if kind == "latency":
        params = {"broker": 0, "latency": 100, "jitter": 0}
    rec = Recorder("nem-int", target="reference")
    runner = NemesisRunner(ctx, rec)

    def interrupting_sleep(seconds: float) -> None:
        if runner.active:
            raise KeyboardInterrupt
        import time

        time.sleep(seconds)

    runner.sleep = interrupting_sleep
    with pytest.raises(KeyboardInterrupt):
        runner.run([Step(0, 0.0, 30.0, kind, params)])
    _assert_all_undone(ctx)
    last = rec.history.ops[-1]
    assert last["value"]["phase"] == "stop" and last["value"]["reason"] == "cleanup" and last["value"]["ok"]


def test_failed_start_is_recorded_and_undone(ctx):
    undone = []

    class Broken:
        kind = "broken"

        def plan(self, rng, where):
            return {}

        def bind(self, params, c):
            def start():
                raise RuntimeError("boom")
            return Fault("broken", params, start, lambda: undone.append(True))

    rec = Recorder("nem-fail", target="reference")
    NemesisRunner(ctx, rec, nemeses={"broken": Broken()}).run([Step(0, 0.0, 0.1, "broken", {})])
    values = [op["value"] for op in rec.history.ops]
    assert values[1]["error"] == "RuntimeError: boom"
    assert values[2]["reason"] == "start failed" and undone == [True]


def test_partition_and_heal_through_the_api(ctx):
    part = Partition(ctx.client, ["b0"])
    part.apply()
    assert ctx.client.proxies()["b0"]["enabled"] is False
    part.heal()
    _assert_all_undone(ctx)
