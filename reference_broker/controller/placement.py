"""Replica placement for new topics: spread partitions and their leaders over the live brokers.

Kafka's StripedReplicaPlacer starts at a random broker and stripes; so do we, with the controller's seeded RNG so
a run can be replayed. Partition i's replicas are the live brokers (sorted by id) from ``start + i`` on, wrapping,
so leaders (the first replica) rotate over the brokers.
"""
from __future__ import annotations

import random


def place(broker_ids: list[int], num_partitions: int, replication_factor: int, rng: random.Random) -> list[list[int]]:
    ids = sorted(broker_ids)
    if replication_factor > len(ids):
        raise ValueError(f"replication factor {replication_factor} > {len(ids)} live brokers")
    start = rng.randrange(len(ids)) if ids else 0
    return [[ids[(start + i + j) % len(ids)] for j in range(replication_factor)] for i in range(num_partitions)]
