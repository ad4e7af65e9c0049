"""The proxied reference quorum (fixtures/reference.py with controllers=3 proxied=true): every broker->voter and
voter->voter link is its own proxy (fixtures/proxied.py wire_quorum, topology nodes k1000..k1002 as the kafka
target names its controller-only nodes), so isolate-controller cuts the active voter off as it does on Kafka.

What is checked: the isolate-controller nemesis (chaos/nemesis/isolate_controller.py), bound to the running target
exactly as `chaos run` binds it, isolates the active voter (recorded as controller_id / node "k<id>"); the two other
voters elect a new leader within the quorum bound (KIP-595: fetch timeout, then a pre-vote and vote round), a topic
created through the brokers meanwhile is acknowledged, and once healed the old leader follows the new one (its log
end offset reaches the leader's high watermark in DescribeQuorum)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import DescribeQuorumRequest

from chaos.nemesis import Context
from chaos.nemesis.isolate_controller import IsolateControllerNemesis
from conformance.cluster import LOAD_FACTOR, SLACK_S
from fixtures.net import LOOPBACK, quorum_leader, round_trip
from fixtures.process import wait_gone
from fixtures.reference import ReferenceTarget
from fixtures.target import PARTITION
from reference_broker.client import Admin
from reference_broker.client.admin import NewTopic
from reference_broker.config import DEFAULTS

pytestmark = pytest.mark.timeout(600)

VOTERS = ["k1000", "k1001", "k1002"]


def quorum_bound_s() -> float:
    """How long a new quorum leader may take once the old one is cut off: up to two fetch timeouts (a pre-vote is
    refused while a voter still heard from the leader), two election timeouts of jitter and a lost round's backoff;
    times LOAD_FACTOR plus SLACK_S, as tests/cluster/test_controller_quorum.py's bound."""
    ms = {k: DEFAULTS[k][1] for k in ("controller.quorum.fetch.timeout.ms", "controller.quorum.election.timeout.ms",
                                      "controller.quorum.election.backoff.max.ms")}
    promise = (2 * ms["controller.quorum.fetch.timeout.ms"] + 2 * ms["controller.quorum.election.timeout.ms"]
               + ms["controller.quorum.election.backoff.max.ms"])
    return LOAD_FACTOR * promise / 1000 + SLACK_S


@pytest.fixture(scope="module")
def target() -> Iterator[ReferenceTarget]:
    t = ReferenceTarget({"memory": "true", "brokers": "3", "controllers": "3", "proxied": "true"})
    t.start()
    proxy_pid = t.proxy_pid
    try:
        yield t
    finally:
        t.stop()
    assert proxy_pid is not None and wait_gone(proxy_pid, 5), "the proxy process outlived its target"


def _leader_via(target: ReferenceTarget, broker: int) -> int | None:
    """The quorum leader as broker `broker` reports it (DescribeQuorum, forwarded to the quorum through that
    broker's own proxies), asked on the broker's own port."""
    try:
        return quorum_leader(LOOPBACK, target._cluster.ports[broker], timeout=3.0)
    except Exception:  # noqa: BLE001 - the broker is still finding the new leader: ask again
        return None


def _wait(what: str, probe, bound_s: float, step_s: float = 0.2):
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(step_s)
    raise AssertionError(f"{what}: not within {bound_s:.0f} s")


def test_every_controller_link_is_a_proxy(target: ReferenceTarget) -> None:
    """Brokers reach each voter, and voters each other, only through their own proxy: each node's
    controller.quorum.voters names the proxies' listen addresses (a voter's own address stays direct)."""
    assert target.has(PARTITION)
    links = target.topology.links
    assert sorted(target.topology.nodes()) == ["b0", "b1", "b2", "c", *VOTERS]
    for src in ["b0", "b1", "b2", *VOTERS]:
        for dst in VOTERS:
            assert ((src, dst) in links) == (src != dst), (src, dst)
    listen = target._network.listen
    routes = target._cluster.voter_routes
    for node_id in [0, 1, 2, 1000, 1001, 1002]:
        name = f"k{node_id}" if node_id >= 1000 else f"b{node_id}"
        for part in routes[node_id].split(","):
            voter, addr = part.split("@")
            if f"k{voter}" == name:
                assert addr == f"{LOOPBACK}:{target._cluster.voter_ports[int(voter)]}"
            else:
                assert addr == listen[f"{name}->k{voter}"], (node_id, part)


def test_isolated_active_controller_is_replaced(target: ReferenceTarget) -> None:
    bound = quorum_bound_s()
    old = _wait("a quorum leader", lambda: _leader_via(target, 0), bound)
    ctx = Context.from_target(target)
    fault = IsolateControllerNemesis().bind({"controller": "active"}, ctx)
    assert fault.params["controller_id"] == old and fault.params["node"] == f"k{old}", fault.params
    assert set(fault.params["proxies"]) == set(target.topology.proxies_of(f"k{old}")), fault.params
    fault.start()
    try:
        t0 = time.monotonic()
        new = _wait("a new leader among the connected voters",
                    lambda: next((x for b in (0, 1, 2) if (x := _leader_via(target, b)) not in (None, old)), None),
                    bound)
        took = time.monotonic() - t0
        assert new in (1000, 1001, 1002) and new != old

        async def create() -> dict[str, int]:
            async with Admin(target.bootstrap, request_timeout=10) as admin:
                return await admin.create_topics([NewTopic("while-isolated", 1, 3)], exist_ok=True)

        created = _wait("a topic created while the old leader is isolated",
                        lambda: _try(lambda: asyncio.run(create())), bound)
        assert created.get("while-isolated", 0) == 0, created
        print(f"\nisolated k{old}: new leader {new} after {took:.1f} s (bound {bound:.0f} s)")
    finally:
        fault.stop()
    # healed: the old leader follows the new one and catches up to its high watermark
    _wait("the old leader following the healed quorum",
          lambda: _caught_up(target, old), bound)


def _try(call):
    try:
        return call()
    except Exception:  # noqa: BLE001 - the brokers are still finding the new active controller
        return None


def _caught_up(target: ReferenceTarget, voter: int) -> bool:
    """True when DescribeQuorum (through broker 0) names a leader other than `voter` and shows `voter`'s log end
    offset at the high watermark."""
    T = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest[1](topics=[T(topic_name="__cluster_metadata",
                                             partitions=[T.PartitionData(partition_index=0)])])
    try:
        p = round_trip(LOOPBACK, target._cluster.ports[0], req, 3.0).topics[0].partitions[0]
    except Exception:  # noqa: BLE001
        return False
    ends = {v.replica_id: v.log_end_offset for v in p.current_voters}
    return p.error_code == 0 and p.leader_id != voter and ends.get(voter, -1) >= p.high_watermark >= 0
