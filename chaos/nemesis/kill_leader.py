"""kill-leader: SIGKILL a partition's current leader for the fault's duration, then restart it.

The leader is looked up when the fault starts (or taken from what stall-followers saw just before, when the
followers are stopped and a Metadata request could hang on one of them) and recorded as "broker".
"""

from __future__ import annotations

import random
import time
from typing import Any

from ..kafka_meta import LAST_LEADER, LAST_LEADER_ADDR, await_isr_alone, partition_replicas
from .base import Context, Fault, PlanInput, kill_until_stop


class KillLeaderNemesis:
    kind = "kill-leader"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": (list(where.topics) or ["chaos-queue"])[0], "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        live = dict(params)

        def choose() -> int:
            leader = LAST_LEADER.pop((params["topic"], params["partition"]), None)
            if leader is None:
                leader, _ = partition_replicas(ctx.target.bootstrap, params["topic"], params["partition"],
                                               target=ctx.target)
            live["broker"] = leader
            seen = LAST_LEADER_ADDR.pop((params["topic"], params["partition"]), None)
            if params.get("await_isr_alone") and seen:
                raw, _, addr = seen.partition("@")
                t0 = time.monotonic()
                alone = await_isr_alone(addr, params["topic"], params["partition"], int(raw),
                                        float(params["await_isr_alone"]))
                live["isr_alone"], live["waited_s"] = alone, round(time.monotonic() - t0, 2)
                if alone:
                    time.sleep(float(params.get("acked_alone_s", 1.0)))   # writes acknowledged by the leader alone
            return leader

        return kill_until_stop(self.kind, live, ctx, choose)
