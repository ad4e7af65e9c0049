"""kill-controller: SIGKILL the active controller for the fault's duration, then restart it (Target verbs by node id).

The controller is found when the fault starts (the target's answer; DescribeQuorum on Kafka) and recorded as
"controller_id". On the reference cluster that is its single controller process (-1); in Kafka's quorum the
other voters elect a new leader, and in combined mode the killed JVM was a broker too.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class KillControllerNemesis:
    kind = "kill-controller"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"controller": "active"}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = ctx.active_controller(self.kind)
        return Fault(self.kind, {**params, "controller_id": node}, lambda: ctx.target.kill_broker(node),
                     lambda: ctx.target.restart(node))
