"""refuse-produce: every broker's client proxy answers Produce with NOT_LEADER_OR_FOLLOWER for the fault's duration,
so nothing reaches a broker and no record is appended anywhere (a leader elected meanwhile writes nothing in its
epoch). Needs a proxied target; the toxics go at the end."""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput

TOXIC = "nemesis-refuse-produce"


class RefuseProduceNemesis:
    kind = "refuse-produce"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"api_key": 0, "error_code": 6}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        proxies = [ctx.broker_proxy(self.kind, b) for b in ctx.target.broker_ids]

        def start() -> None:
            for proxy in proxies:
                client.add_toxic(proxy, "kafka", name=TOXIC, stream="upstream", attributes={
                    "api_key": params["api_key"], "action": "error", "error_code": params["error_code"],
                    "probability": 1.0})

        def stop() -> None:
            for proxy in proxies:
                try:
                    client.remove_toxic(proxy, TOXIC)
                except Exception:  # noqa: BLE001 - not added (start failed half-way) or already gone
                    pass

        return Fault(self.kind, {**params, "proxies": proxies}, start, stop)
