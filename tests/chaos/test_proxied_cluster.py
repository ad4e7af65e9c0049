"""The proxied reference cluster (fixtures/proxied.py): real controller, broker and proxy processes; every client,
follower and controller link is its own proxy, so partitions are proxy switches.

Figures (printed with -s): ISR shrink time after a broker-broker cut, rejoin time after heal."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from chaos.faults import Partition, ToxiproxyClient, cut_links
from chaos.nemesis import Context, NemesisRunner, ScheduleSpec, Step, generate
from fixtures.process import wait_gone
from fixtures.reference import ReferenceTarget
from fixtures.target import PARTITION
from history import Recorder
from history.schema import NEMESIS_PROCESS
from reference_broker.client import Admin, Producer, TopicPartition

LAG_S = 3.0  # the cluster default replica.lag.time.max.ms


@pytest.fixture(scope="module")
def target() -> Iterator[ReferenceTarget]:
    t = ReferenceTarget({"memory": "true", "brokers": "3", "proxied": "true"})
    t.start()
    proxy_pid = t._network._proc.pid
    try:
        yield t
    finally:
        t.stop()
    assert wait_gone(proxy_pid, 5), "the proxy process outlived its target"


@pytest.fixture
def client(target: ReferenceTarget) -> ToxiproxyClient:
    return ToxiproxyClient(target.proxy_api)


def _assert_all_undone(client: ToxiproxyClient) -> None:
    proxies = client.proxies()
    assert len(proxies) == 12
    assert all(p["enabled"] and p["toxics"] == [] for p in proxies.values()), proxies


async def _partition(bootstrap: str, topic: str, p: int = 0):
    async with Admin(bootstrap, request_timeout=5) as admin:
        return (await admin.describe_topics([topic]))[topic].partitions[p]


async def _wait_isr(bootstrap: str, topic: str, want, deadline_s: float) -> float:
    """Poll Metadata every 100 ms until want(isr); returns when (monotonic)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            isr = (await _partition(bootstrap, topic)).isr
        except Exception:  # noqa: BLE001 - a broker busy with the fault: ask again
            isr = None
        if isr is not None and want(isr):
            return time.monotonic()
        await asyncio.sleep(0.1)
    raise AssertionError(f"ISR of {topic} never satisfied the condition within {deadline_s} s")


def test_capability_and_no_bypass(target: ReferenceTarget, client: ToxiproxyClient):
    assert target.has(PARTITION)
    proxies = client.proxies()
    assert sorted(proxies) == sorted(target.topology.links.values())
    assert sorted(target.topology.nodes()) == ["b0", "b1", "b2", "c", "controller"]
    client_proxies = {b: proxies[f"c->b{b}"]["listen"] for b in target.broker_ids}
    assert target.bootstrap.split(",") == [client_proxies[b] for b in target.broker_ids]

    async def brokers():
        async with Admin(target.bootstrap) as admin:
            await admin.describe_topics(None)
            return {b.node_id: f"{b.host}:{b.port}" for b in admin.cluster.brokers.values()}

    assert asyncio.run(brokers()) == client_proxies  # a metadata refresh still leads through the proxies
    real = {f"127.0.0.1:{p}" for p in target._cluster.ports.values()}
    assert not real & set(client_proxies.values())


def test_broker_partition_shrinks_isr_and_heals(target: ReferenceTarget, client: ToxiproxyClient):
    bootstrap, topic = target.bootstrap, "isr"

    async def run() -> dict[str, float]:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(topic, 1, 3)
        await _wait_isr(bootstrap, topic, lambda isr: len(isr) == 3, 10)
        leader = (await _partition(bootstrap, topic)).leader
        follower = next(b for b in target.broker_ids if b != leader)
        tp = TopicPartition(topic, 0)
        async with Producer(bootstrap, acks=-1, request_timeout_ms=20000) as prod, Admin(bootstrap) as admin:
            for i in range(5):
                await prod.send_and_wait(topic, f"before-{i}".encode())
            hw0 = (await admin.latest_offsets([tp]))[tp]
            # Only broker<->broker links: a broker cut from the controller would be fenced instead.
            others = [f"b{b}" for b in target.broker_ids if b != follower]
            part = Partition.between(client, target.topology, [[f"b{follower}"], others])
            assert part.proxies == sorted({f"b{follower}->{o}" for o in others} | {f"{o}->b{follower}" for o in others})
            t_cut = time.monotonic()
            part.apply()
            try:
                # an acks=all write now waits for the cut follower, until the leader drops it from the ISR
                write = asyncio.ensure_future(prod.send_and_wait(topic, b"during-cut"))
                t_out = await _wait_isr(bootstrap, topic, lambda isr: follower not in isr, 15)
                meta = await asyncio.wait_for(write, 15)
                t_acked = time.monotonic()
                for i in range(5):
                    await prod.send_and_wait(topic, f"after-{i}".encode())
                hw1 = (await admin.latest_offsets([tp]))[tp]
                isr_cut = (await _partition(bootstrap, topic)).isr
            finally:
                t_heal = time.monotonic()
                part.heal()
            t_in = await _wait_isr(bootstrap, topic, lambda isr: follower in isr, 15)
        assert meta.offset == hw0 and hw1 == hw0 + 6, (hw0, meta.offset, hw1)  # HW moves with the remaining ISR
        assert sorted(isr_cut) == sorted(int(o[1:]) for o in others)
        return {"shrink_s": t_out - t_cut, "acked_s": t_acked - t_cut, "rejoin_s": t_in - t_heal}

    fig = asyncio.run(run())
    print(f"\nISR shrink after cut {fig['shrink_s']:.2f} s (lag {LAG_S} s); blocked acks=all write acknowledged "
          f"after {fig['acked_s']:.2f} s; rejoin after heal {fig['rejoin_s']:.2f} s")
    # Not before the lag time (less one fetch round), within ISR-SHRINK-LAG's 1.5 x lag plus metadata propagation.
    assert LAG_S - 0.6 <= fig["shrink_s"] <= 1.5 * LAG_S + 2.5
    assert fig["rejoin_s"] <= 6.0
    _assert_all_undone(client)


def _can_talk(address: str) -> bool:
    """True if an ApiVersions request through `address` is answered."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.settimeout(2)
            s.sendall(b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x")  # ApiVersions v0
            return len(s.recv(4)) == 4
    except OSError:
        return False


def test_client_partition_cuts_one_broker_while_others_serve(target: ReferenceTarget, client: ToxiproxyClient):
    bootstrap, topic = target.bootstrap, "clients"
    asyncio.run(_create(bootstrap, topic, 3))
    leaders = {p: asyncio.run(_partition(bootstrap, topic, p)).leader for p in range(3)}
    cut_broker = leaders[0]
    served = next(p for p, b in leaders.items() if b != cut_broker)
    part = Partition.between(client, target.topology, [["c"], [f"b{cut_broker}"]])
    assert part.proxies == [f"c->b{cut_broker}"]
    addresses = dict(zip(target.broker_ids, bootstrap.split(","), strict=True))
    part.apply()
    try:
        assert not _can_talk(addresses[cut_broker])
        assert all(_can_talk(a) for b, a in addresses.items() if b != cut_broker)

        async def produce() -> int:
            others = ",".join(a for b, a in addresses.items() if b != cut_broker)
            async with Producer(others, acks=-1, request_timeout_ms=10000) as prod:
                return (await prod.send_and_wait(topic, b"v", partition=served)).offset

        assert asyncio.run(produce()) == 0  # a partition led elsewhere still takes writes
    finally:
        part.heal()
    assert _can_talk(addresses[cut_broker])
    _assert_all_undone(client)


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions, 3)


def test_split_nemeses_plan_deterministically():
    kinds = ("isolate-leader", "isolate-controller", "majority-minority", "bridge")
    spec = ScheduleSpec(interval=1, duration=0.5, total=30, faults=kinds, brokers=(0, 1, 2),
                        controllers=("controller",), topics=("isr",))
    assert generate(3, spec) == generate(3, spec) and {s.kind for s in generate(3, spec)} == set(kinds)
    for s in generate(3, spec):
        if s.kind == "bridge":
            assert len(s.params["halves"][0]) == 2 and len(s.params["halves"][1]) == 1
        if s.kind == "majority-minority":
            assert "controller" in s.params["majority"] + s.params["minority"]


def test_nemesis_schedule_on_proxied_cluster_is_recorded_and_undone(target: ReferenceTarget, client):
    asyncio.run(_create(target.bootstrap, "nem", 1))
    leader = asyncio.run(_partition(target.bootstrap, "nem")).leader
    ctx = Context.from_target(target)
    steps = [Step(i, 0.5 * i, 0.35, kind, params) for i, (kind, params) in enumerate([
        ("isolate-leader", {"topic": "nem", "partition": 0, "clients": "cut"}),
        ("isolate-controller", {"controller": "controller"}),
        ("majority-minority", {"majority": ["b0", "b1", "controller"], "minority": ["b2"], "controller": "majority"}),
        ("bridge", {"halves": [["b0", "controller"], ["b2"]], "bridge": "b1"}),
        ("partition", {"mode": "isolate", "components": [["b1"], ["c", "b0", "b2", "controller"]]}),
        ("latency", {"broker": 2, "latency": 50, "jitter": 0}),
        ("isolate-leader", {"topic": "no-such-topic", "partition": 0, "clients": "connected"}),
    ])]
    rec = Recorder("nem-proxied", target="reference", nemesis="splits")
    runner = NemesisRunner(ctx, rec)
    seen: dict[int, list[str]] = {}
    real = runner._transition

    def spy(step, fault, phase, action, **extra):
        ok = real(step, fault, phase, action, **extra)
        if phase == "start":
            seen[step.id] = sorted(n for n, p in client.proxies().items() if not p["enabled"])
        return ok

    runner._transition = spy
    runner.run(steps)
    _assert_all_undone(client)
    topo = target.topology
    others = ["b0", "b1", "b2", "controller", "c"]
    assert seen[0] == cut_links(topo, [[f"b{leader}"], [n for n in others if n != f"b{leader}"]])
    assert seen[1] == ["b0->controller", "b1->controller", "b2->controller"]
    assert seen[2] == ["b0->b2", "b1->b2", "b2->b0", "b2->b1", "b2->controller"]
    assert seen[3] == ["b0->b2", "b2->b0", "b2->controller"]
    assert seen[4] == ["b0->b1", "b1->b0", "b1->b2", "b1->controller", "b2->b1", "c->b1"]
    assert seen[5] == []
    infos = {op["value"]["id"]: op["value"] for op in rec.history.ops
             if op["process"] == NEMESIS_PROCESS and op["type"] == "info" and op["value"]["phase"] == "start"}
    assert infos[0]["leader"] == leader and infos[0]["ok"]
    assert "LookupError" in infos[6]["error"]  # a fault that cannot bind is recorded, and the run goes on
    assert all(infos[i].get("ok") for i in range(6))
    stops = [op for op in rec.history.ops if op["process"] == NEMESIS_PROCESS and op["value"]["phase"] == "stop"
             and op["type"] == "info"]
    assert {op["value"]["id"] for op in stops} == set(range(7)) and all(op["value"].get("ok") for op in stops)
