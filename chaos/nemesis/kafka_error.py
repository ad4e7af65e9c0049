"""kafka-error: answer one API key with a retriable Kafka error on one broker's proxy, for the fault's duration."""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput
from .latency import _remove

# (api key, error code): requests and errors a correct client must retry through.
CHOICES = (
    (1, 6),    # Fetch -> NOT_LEADER_OR_FOLLOWER
    (0, 6),    # Produce -> NOT_LEADER_OR_FOLLOWER
    (0, 7),    # Produce -> REQUEST_TIMED_OUT
    (8, 14),   # OffsetCommit -> COORDINATOR_LOAD_IN_PROGRESS
    (8, 16),   # OffsetCommit -> NOT_COORDINATOR
    (9, 15),   # OffsetFetch -> COORDINATOR_NOT_AVAILABLE
    (2, 6),    # ListOffsets -> NOT_LEADER_OR_FOLLOWER
)


class KafkaErrorNemesis:
    kind = "kafka-error"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        api_key, code = rng.choice(CHOICES)
        return {"broker": rng.choice(list(where.brokers)), "api_key": api_key, "error_code": code,
                "probability": rng.choice((0.2, 0.5, 1.0))}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        proxy = ctx.broker_proxy(self.kind, params["broker"])
        name = "nemesis-kafka-error"

        def start() -> None:
            client.add_toxic(proxy, "kafka", name=name, stream="upstream", attributes={
                "api_key": params["api_key"], "action": "error", "error_code": params["error_code"],
                "probability": params["probability"]})

        return Fault(self.kind, {**params, "proxy": proxy}, start, lambda: _remove(client, proxy, [name]))
