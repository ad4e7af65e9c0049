"""stall-followers: SIGSTOP every follower of a partition's current leader for the fault's duration, then SIGCONT.

After replica.lag.time.max.ms the leader shrinks the ISR to itself; with min.insync.replicas=1 acks=all writes keep
being acknowledged, held by the leader alone (step 1 of the lossy schedule, chaos/scenarios.py). The leader is
looked up when the fault starts and recorded as "leader", the stopped brokers as "brokers".
"""

from __future__ import annotations

import random
from typing import Any

from ..kafka_meta import LAST_LEADER, LAST_LEADER_ADDR, partition_view
from .base import Context, Fault, PlanInput


class StallFollowersNemesis:
    kind = "stall-followers"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": (list(where.topics) or ["chaos-queue"])[0], "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        stalled: list[int] = []
        live = dict(params)

        def start() -> None:
            leader, replicas, raw, addr = partition_view(ctx.target.bootstrap, params["topic"], params["partition"],
                                                         target=ctx.target)
            live["leader"] = leader
            LAST_LEADER[(params["topic"], params["partition"])] = leader
            LAST_LEADER_ADDR[(params["topic"], params["partition"])] = f"{raw}@{addr}"
            for b in replicas:
                if b != leader:
                    ctx.target.pause_broker(b)
                    stalled.append(b)
            live["brokers"] = list(stalled)

        def stop() -> None:
            while stalled:
                ctx.target.resume_broker(stalled.pop())

        return Fault(self.kind, live, start, stop)
