"""pause-controller: SIGSTOP the active controller for the fault's duration, then SIGCONT it.

A paused controller keeps its sockets: peers time out instead of seeing a refused connection, the case a Raft
quorum must ride out (controller.quorum.fetch.timeout.ms) without two leaders acting at once. Found when the fault
starts and recorded as "controller_id".
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class PauseControllerNemesis:
    kind = "pause-controller"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"controller": "active"}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = ctx.active_controller(self.kind)
        return Fault(self.kind, {**params, "controller_id": node}, lambda: ctx.target.pause_broker(node),
                     lambda: ctx.target.resume_broker(node))
