"""pause: SIGSTOP a broker (connections stay open, nothing answers), SIGCONT at the end."""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class PauseNemesis:
    kind = "pause"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"broker": rng.choice(list(where.brokers))}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        b = params["broker"]
        return Fault(self.kind, params, lambda: ctx.target.pause_broker(b), lambda: ctx.target.resume_broker(b))
