"""latency: add a latency toxic (both directions) on one broker's client proxy, remove it at the end."""

from __future__ import annotations

import random
from typing import Any

from .base import Context, Fault, PlanInput


class LatencyNemesis:
    kind = "latency"

    def __init__(self, latencies_ms: tuple[int, ...] = (50, 100, 250, 500), jitter_ms: int = 10) -> None:
        self.latencies_ms = latencies_ms
        self.jitter_ms = jitter_ms

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"broker": rng.choice(list(where.brokers)), "latency": rng.choice(self.latencies_ms),
                "jitter": self.jitter_ms}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        proxy = ctx.broker_proxy(self.kind, params["broker"])
        names = [f"nemesis-latency-{s}" for s in ("upstream", "downstream")]
        attrs = {"latency": params["latency"], "jitter": params["jitter"]}

        def start() -> None:
            for name, stream in zip(names, ("upstream", "downstream"), strict=True):
                client.add_toxic(proxy, "latency", name=name, stream=stream, attributes=attrs)

        def stop() -> None:
            _remove(client, proxy, names)

        return Fault(self.kind, {**params, "proxy": proxy}, start, stop)


def _remove(client: Any, proxy: str, names: list[str]) -> None:
    """Remove toxics that exist (start may have failed half way); other errors are raised after trying all."""
    from ..faults import ToxiproxyError

    first: Exception | None = None
    for name in names:
        try:
            client.remove_toxic(proxy, name)
        except ToxiproxyError as e:
            if e.status != 404:
                first = first or e
    if first is not None:
        raise first
