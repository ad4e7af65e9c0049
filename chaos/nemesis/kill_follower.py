"""kill-follower: SIGKILL the first follower (in replica order) of a partition's current leader for the fault's
duration, then restart it. The leader and follower are looked up when the fault starts and recorded."""

from __future__ import annotations

import random
from typing import Any

from ..kafka_meta import partition_replicas
from .base import Context, Fault, PlanInput, kill_until_stop


class KillFollowerNemesis:
    kind = "kill-follower"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": (list(where.topics) or ["chaos-queue"])[0], "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        live = dict(params)

        def choose() -> int:
            leader, replicas = partition_replicas(ctx.target.bootstrap, params["topic"], params["partition"],
                                                target=ctx.target)
            live["leader"], live["broker"] = leader, next(r for r in replicas if r != leader)
            return live["broker"]

        return kill_until_stop(self.kind, live, ctx, choose)
