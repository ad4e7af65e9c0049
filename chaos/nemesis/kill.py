"""kill: SIGKILL a broker for the fault's duration, then restart it on the same address (Target verbs)."""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class KillNemesis:
    kind = "kill"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"broker": rng.choice(list(where.brokers))}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        b = params["broker"]
        return Fault(self.kind, params, lambda: ctx.target.kill_broker(b), lambda: ctx.target.restart(b))
