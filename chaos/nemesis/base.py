"""What a nemesis is: a kind of fault that can (1) plan its parameters from a seeded RNG, with no target at hand
(so a schedule can be printed in a dry run and replayed), and (2) turn those parameters into a `Fault` bound to a
target and proxies, whose `stop` undoes exactly what `start` did."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..faults import Partition, Topology, ToxiproxyClient, cut_links


@dataclass
class Context:
    """What faults act on: the target (fixtures.target.Target fault verbs), the proxy API and the topology."""

    target: Any = None
    client: ToxiproxyClient | None = None
    topology: Topology = field(default_factory=Topology)

    @classmethod
    def from_target(cls, target: Any) -> Context:
        """The context of a target that brings its own proxies (a proxied reference cluster: `proxy_api`,
        `topology`); other targets get no proxy API, and network faults say so when they start."""
        api = getattr(target, "proxy_api", None)
        topology = getattr(target, "topology", None)
        return cls(target=target, client=ToxiproxyClient(api) if api else None, topology=topology or Topology())

    def need_client(self, kind: str) -> ToxiproxyClient:
        if self.client is None:
            raise RuntimeError(f"nemesis {kind!r} needs a proxy API (Context.client)")
        return self.client

    def partition_fault(self, kind: str, params: dict[str, Any], components: Sequence[Sequence[str]]) -> Fault:
        """A fault that cuts every proxy between `components` and heals exactly those."""
        client = self.need_client(kind)
        cut = cut_links(self.topology, components)
        if not cut:
            raise RuntimeError(f"nemesis {kind!r}: the topology has no link between {list(components)}")
        part = Partition(client, cut)
        return Fault(kind, {**params, "proxies": cut}, part.apply, part.heal)

    def active_controller(self, kind: str) -> int:
        """The active controller's node id when the fault starts: the target's own answer (Kafka: DescribeQuorum;
        the reference cluster: -1, its controller process), else DescribeQuorum through the bootstrap."""
        ask = getattr(self.target, "active_controller", None)
        found = ask() if ask is not None else None
        if found is None and getattr(self.target, "bootstrap", None):
            from ..kafka_meta import active_controller

            found = active_controller(self.target.bootstrap)
        if found is None:
            raise RuntimeError(f"nemesis {kind!r}: the target names no active controller")
        return found

    def storage_node(self, kind: str) -> int:
        """The node id of the target's storage service (Tansu over PostgreSQL: -1), for the storage faults."""
        found = getattr(self.target, "storage_node_id", None)
        if found is None:
            raise RuntimeError(f"nemesis {kind!r}: the target has no storage service of its own (Tansu with "
                               "--target-config storage=postgres has)")
        return int(found)

    def controller_node(self, node_id: int) -> str:
        """The topology node to cut for controller `node_id`: "controller" (the reference cluster's), the host of
        "k<id>" (a Kafka controller; in combined mode its broker's JVM), else "b<id>"."""
        if node_id == -1:
            return "controller"
        name = f"k{node_id}"
        if any(name in pair for pair in self.topology.links):
            return self.topology.host(name)
        return f"b{node_id}"

    def broker_proxy(self, kind: str, broker: int) -> str:
        name = self.topology.client_proxy(broker)
        if name is None:
            raise RuntimeError(f"nemesis {kind!r}: no client proxy for broker {broker} in the topology")
        return name


@dataclass
class Fault:
    """One applied-and-undoable fault. `params` are JSON-able and go into the history as they are."""

    kind: str
    params: dict[str, Any]
    start: Callable[[], Any]
    stop: Callable[[], Any]


def kill_until_stop(kind: str, params: dict[str, Any], ctx: Context, choose: Callable[[], int]) -> Fault:
    """SIGKILL the node `choose()` names when the fault starts (a leader or follower is only known then), restart
    it when the fault stops; `choose` records what it chose in `params`."""
    killed: list[int] = []

    def start() -> None:
        node = choose()
        ctx.target.kill_broker(node)
        killed.append(node)

    def stop() -> None:
        while killed:
            ctx.target.restart(killed.pop())

    return Fault(kind, params, start, stop)


@dataclass(frozen=True)
class PlanInput:
    """What a plan may choose from, known without a running target."""

    brokers: Sequence[int]
    nodes: Sequence[str]
    controllers: Sequence[str] = ()  # topology nodes of controllers ("controller" on the reference cluster)
    topics: Sequence[str] = ()  # topics a leader-targeting fault may pick from (empty: decided when it starts)


class Nemesis(Protocol):
    kind: str

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        """Choose this fault's parameters (deterministic given the RNG state)."""
        ...

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        """The fault for these parameters against a target/proxies."""
        ...
