"""partition: cut the proxies between components of nodes, heal at the end.

Modes (Jepsen's): "isolate" one node from all others, "halves" (majority/minority), "bridge" (two halves and a
node that sees both). Nodes are the topology's: "c" for clients, "b<id>" for brokers. Splits that need the
running cluster or its controller have their own nemeses: isolate_leader, isolate_controller, majority_minority,
bridge.
"""

from __future__ import annotations

import random
from typing import Any

from ..faults import Partition, bridge, cut_links, majority_minority, split_one
from .base import Context, Fault, PlanInput

MODES = ("isolate", "halves", "bridge")


class PartitionNemesis:
    kind = "partition"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        nodes = sorted(where.nodes)
        mode = rng.choice(MODES if len(nodes) >= 3 else ("isolate",))
        if mode == "isolate":
            brokers = [n for n in nodes if n.startswith("b")] or nodes
            return {"mode": mode, "components": split_one(nodes, rng.choice(brokers))}
        if mode == "halves":
            return {"mode": mode, "components": majority_minority(nodes, rng)}
        halves, middle = bridge(nodes, rng)
        return {"mode": mode, "components": halves, "bridge": middle}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        cut = cut_links(ctx.topology, params["components"])
        part = Partition(client, cut)
        return Fault(self.kind, {**params, "proxies": cut}, part.apply, part.heal)
