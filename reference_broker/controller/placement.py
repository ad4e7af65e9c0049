"""Replica placement for new topics: spread partitions and their leaders over the brokers.

Kafka's StripedReplicaPlacer starts at a random broker and stripes; so do we, with the controller's seeded RNG so
a run can be replayed. It places replicas on unfenced brokers first and on fenced (registered but not live) ones
only when there are not enough unfenced ones; the leader (the first replica) is always unfenced. Partition i's
unfenced replicas are the unfenced brokers (sorted by id) from ``start + i`` on, wrapping, so leaders rotate.
"""
from __future__ import annotations

import random


def place(unfenced: list[int], num_partitions: int, replication_factor: int, rng: random.Random,
          fenced: list[int] | None = None) -> list[list[int]]:
    live, down = sorted(unfenced), sorted(fenced or [])
    if replication_factor > len(live) + len(down):
        raise ValueError(f"replication factor {replication_factor} > {len(live) + len(down)} registered brokers")
    if not live:
        raise ValueError("all brokers are fenced")
    start = rng.randrange(len(live))
    extra = replication_factor - len(live)
    dstart = rng.randrange(len(down)) if extra > 0 else 0
    out = []
    for i in range(num_partitions):
        replicas = [live[(start + i + j) % len(live)] for j in range(min(replication_factor, len(live)))]
        replicas += [down[(dstart + i + j) % len(down)] for j in range(max(0, extra))]
        out.append(replicas)
    return out
