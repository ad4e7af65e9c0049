"""isolate-storage: cut one broker's link to the shared storage (proxy b<i>->s), heal at the end.

The broker stays reachable by clients but cannot read or write the storage: what it answers then (an error, a
hang, a stale read) is the question; the other brokers go on.
"""

from __future__ import annotations

import random
from typing import Any

from ..faults import Partition, cut_links
from .base import Context, Fault, PlanInput

STORAGE = "s"   # the storage service's node in a proxied topology (fixtures/tansu.py STORAGE_NODE)


class IsolateStorageNemesis:
    kind = "isolate-storage"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"broker": rng.choice(list(where.brokers))}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        cut = cut_links(ctx.topology, [[f"b{params['broker']}"], [STORAGE]])
        if not cut:
            raise RuntimeError(f"nemesis {self.kind!r}: no proxy between b{params['broker']} and the storage "
                               "in the topology")
        part = Partition(client, cut)
        return Fault(self.kind, {**params, "proxies": cut}, part.apply, part.heal)
