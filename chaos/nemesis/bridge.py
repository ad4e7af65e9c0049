"""bridge: two halves of the servers (brokers and controller) that cannot talk, and one node that talks to both
(Jepsen's bridge). Clients are not partitioned."""

from __future__ import annotations

import random
from typing import Any

from ..faults import bridge
from .base import Context, Fault, PlanInput


class BridgeNemesis:
    kind = "bridge"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        servers = [f"b{b}" for b in sorted(where.brokers)] + list(where.controllers)
        halves, middle = bridge(servers, rng)
        return {"halves": halves, "bridge": middle}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        return ctx.partition_fault(self.kind, params, params["halves"])
