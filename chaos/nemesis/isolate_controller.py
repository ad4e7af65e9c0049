"""isolate-controller: cut every broker's link to the controller (heartbeats, metadata, AlterPartition).

Held longer than broker.session.timeout.ms, the controller fences every broker; shorter, brokers must ride it out.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class IsolateControllerNemesis:
    kind = "isolate-controller"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"controller": (list(where.controllers) or ["controller"])[0]}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = params["controller"]
        return ctx.partition_fault(self.kind, params, [[node], [n for n in ctx.topology.nodes() if n != node]])
