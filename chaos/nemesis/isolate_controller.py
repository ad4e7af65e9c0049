"""isolate-controller: cut the active controller off from every other node (brokers, other controllers, clients).

Held longer than broker.session.timeout.ms, an isolated single controller fences every broker; in Kafka's KRaft
quorum the other voters elect a new leader (controller.quorum.fetch.timeout.ms) and the isolated one steps down.
The controller is found when the fault starts ("active": the target's answer, DescribeQuorum on Kafka) and
recorded as "controller_id"; in combined mode its node is a broker's JVM, so that node is isolated whole.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class IsolateControllerNemesis:
    kind = "isolate-controller"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"controller": (list(where.controllers) or ["active"])[0]}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = params["controller"]
        extra: dict[str, Any] = {}
        if node == "active":
            controller_id = ctx.active_controller(self.kind)
            node = ctx.controller_node(controller_id)
            extra = {"controller_id": controller_id, "node": node}
        others = [n for n in ctx.topology.nodes() if n != node]
        return ctx.partition_fault(self.kind, {**params, **extra}, [[node], others])
