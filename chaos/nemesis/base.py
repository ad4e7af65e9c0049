"""What a nemesis is: a kind of fault that can (1) plan its parameters from a seeded RNG, with no target at hand
(so a schedule can be printed in a dry run and replayed), and (2) turn those parameters into a `Fault` bound to a
target and proxies, whose `stop` undoes exactly what `start` did."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..faults import Topology, ToxiproxyClient


@dataclass
class Context:
    """What faults act on: the target (fixtures.target.Target fault verbs), the proxy API and the topology."""

    target: Any = None
    client: ToxiproxyClient | None = None
    topology: Topology = field(default_factory=Topology)

    def need_client(self, kind: str) -> ToxiproxyClient:
        if self.client is None:
            raise RuntimeError(f"nemesis {kind!r} needs a proxy API (Context.client)")
        return self.client

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


@dataclass(frozen=True)
class PlanInput:
    """What a plan may choose from, known without a running target."""

    brokers: Sequence[int]
    nodes: Sequence[str]


class Nemesis(Protocol):
    kind: str

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        """Choose this fault's parameters (deterministic given the RNG state)."""
        ...

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        """The fault for these parameters against a target/proxies."""
        ...
