"""majority-minority: split the brokers into a majority and a minority (Jepsen's random halves); the controller
sits on one side (chosen by the seed). Clients are not partitioned: they reach both sides."""

from __future__ import annotations

import random
from typing import Any

from ..faults import majority_minority
from .base import Context, Fault, PlanInput


class MajorityMinorityNemesis:
    kind = "majority-minority"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        majority, minority = majority_minority([f"b{b}" for b in sorted(where.brokers)], rng)
        side = rng.choice(("majority", "minority"))
        controllers = list(where.controllers)
        if side == "majority":
            majority = [*majority, *controllers]
        else:
            minority = [*minority, *controllers]
        return {"majority": majority, "minority": minority, "controller": side}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        return ctx.partition_fault(self.kind, params, [params["majority"], params["minority"]])
