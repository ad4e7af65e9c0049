"""pause-storage: SIGSTOP the shared storage service (Tansu's PostgreSQL) for the fault's duration, then SIGCONT.

A stalled storage is what a slow disk or a long GC looks like from the brokers: requests hang rather than fail,
so clients time out with outcomes unknown — the case where acknowledged-or-not must still be decided right.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class PauseStorageNemesis:
    kind = "pause-storage"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"storage": "shared"}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        node = ctx.storage_node(self.kind)
        return Fault(self.kind, {**params, "node": node}, lambda: ctx.target.pause_broker(node),
                     lambda: ctx.target.resume_broker(node))
