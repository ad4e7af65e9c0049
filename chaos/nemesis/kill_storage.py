"""kill-storage: SIGKILL the shared storage service (Tansu's PostgreSQL) for the fault's duration, then restart it.

Tansu's brokers are stateless over it: every record, offset and producer id lives there, so what a kill -9 of the
storage tests is whether an acknowledged write was durable in it (WAL recovery on restart) and what the brokers
answer meanwhile.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class KillStorageNemesis:
    kind = "kill-storage"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"storage": "shared"}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = ctx.storage_node(self.kind)
        return Fault(self.kind, {**params, "node": node}, lambda: ctx.target.kill_broker(node),
                     lambda: ctx.target.restart(node))
