"""isolate-leader: cut the current leader of a partition off from the other brokers and the controller.

The plan names the partition (topic from the spec's topics, or None: the first topic by name when the fault
starts); the leader is looked up with a Metadata request when the fault starts and recorded as "leader". Clients
keep reaching the isolated leader unless "clients" is "cut" (then they sit with the majority): the interesting
Kafka case is a deposed leader that clients still write to.
"""

from __future__ import annotations

import random
from typing import Any

from ..kafka_meta import partition_leader
from .base import Context, Fault, PlanInput


class IsolateLeaderNemesis:
    kind = "isolate-leader"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        topic = rng.choice(list(where.topics)) if where.topics else None
        return {"topic": topic, "partition": 0, "clients": rng.choice(("connected", "cut"))}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        topic, partition, leader = partition_leader(ctx.target.bootstrap, params.get("topic"),
                                                    int(params.get("partition", 0)), target=ctx.target)
        node = f"b{leader}"
        others = [n for n in ctx.topology.nodes() if n != node and (n.startswith("b") or n == "controller")]
        if params.get("clients") == "cut":
            others += [n for n in ctx.topology.nodes() if not n.startswith("b") and n != "controller"]
        return ctx.partition_fault(self.kind, {**params, "topic": topic, "partition": partition, "leader": leader},
                                   [[node], others])
