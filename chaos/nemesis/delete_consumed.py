"""delete-consumed: DeleteRecords on a partition up to the smallest offset any consumer group committed — the
records go, but only ones every consumer already read, so the history checkers see no loss. Nothing to undo; the
offset is recorded."""

from __future__ import annotations

import random
from typing import Any

from ..kafka_meta import committed_floor
from .base import Context, Fault, PlanInput


class DeleteConsumedNemesis:
    kind = "delete-consumed"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": (list(where.topics) or ["chaos-queue"])[0], "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        live = dict(params)

        def start() -> None:
            from kafka.admin import KafkaAdminClient
            from kafka.structs import TopicPartition

            floor = committed_floor(ctx.target.bootstrap, params["topic"], params["partition"])
            if floor is None:
                raise LookupError(f"no consumer group committed {params['topic']}-{params['partition']} yet")
            admin = KafkaAdminClient(bootstrap_servers=ctx.target.bootstrap.split(","), request_timeout_ms=10_000)
            try:
                admin.delete_records({TopicPartition(params["topic"], params["partition"]): floor})
            finally:
                admin.close()
            live["offset"] = floor

        return Fault(self.kind, live, start, lambda: None)
