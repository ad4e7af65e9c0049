"""kill-follower: SIGKILL the first follower (in replica order) of a partition's current leader for the fault's
duration, then restart it. The leader and follower are looked up when the fault starts and recorded."""

from __future__ import annotations

import random
from typing import Any

from ..kafka_meta import partition_replicas
from .base import Context, Fault, PlanInput


class KillFollowerNemesis:
    kind = "kill-follower"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": (list(where.topics) or ["chaos-queue"])[0], "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        killed: list[int] = []
        live = dict(params)

        def start() -> None:
            leader, replicas = partition_replicas(ctx.target.bootstrap, params["topic"], params["partition"],
                                                target=ctx.target)
            follower = next(r for r in replicas if r != leader)
            live["leader"], live["broker"] = leader, follower
            ctx.target.kill_broker(follower)
            killed.append(follower)

        def stop() -> None:
            while killed:
                ctx.target.restart(killed.pop())

        return Fault(self.kind, live, start, stop)
