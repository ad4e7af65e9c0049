"""Feature flags (KIP-584): what the reference implements, at which levels, and what a new cluster finalizes.

Kafka 4.4.0 answers ApiVersions with the features its code supports (min–max) and the levels the cluster
finalized (FeatureLevelRecords in the metadata log, written by ``kafka-storage format``). The reference advertises
only levels whose semantics it implements (GAPS.md lists the rest):

- ``transaction.version`` 0–2 (KIP-890 part 2), formatted at the ``transaction.version`` setting (2);
- ``eligible.leader.replicas.version`` 0–1 (KIP-966: ELR, LastKnownElr, clean elections from the ELR),
  formatted at the ``eligible.leader.replicas.version`` setting (1, as Kafka 4.4.0);
- ``kraft.version`` 0 only (static controller voters; Kafka supports 1, KIP-853 dynamic quorums);
- ``group.version`` 0–1 only where the broker serves ConsumerGroupHeartbeat (KIP-848), else 0.

Kafka's ``metadata.version``, ``share.version`` and ``streams.version`` are not advertised: their levels gate Kafka's
binary metadata records, share groups (KIP-932) and streams groups (KIP-1071), which the reference lacks.
"""
from __future__ import annotations

import functools
from typing import Any

TRANSACTION_VERSION = "transaction.version"
ELR_VERSION = "eligible.leader.replicas.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
CONSUMER_GROUP_HEARTBEAT = 68


@functools.cache
def supported() -> dict[str, tuple[int, int]]:
    """Feature name -> (min, max) level this build implements, in the order Kafka lists them (computed once: the
    handlers a build serves do not change while it runs)."""
    from .registry import BROKER
    handlers = BROKER.load_all()             # every module imported (once): a partial registry would under-report
    return {GROUP_VERSION: (0, 1 if CONSUMER_GROUP_HEARTBEAT in handlers else 0),
            KRAFT_VERSION: (0, 0),
            TRANSACTION_VERSION: (0, 2),
            ELR_VERSION: (0, 1)}


def bootstrap_levels(config: Any) -> dict[str, int]:
    """The levels a new metadata log is formatted with: Kafka 4.4.0's defaults where implemented, settings for the
    ones Kafka's format tool takes (``--feature transaction.version=N``), each clamped to what is supported."""
    sup = supported()
    wanted = {GROUP_VERSION: sup[GROUP_VERSION][1], KRAFT_VERSION: 0,
              TRANSACTION_VERSION: int(config[TRANSACTION_VERSION]), ELR_VERSION: int(config[ELR_VERSION])}
    return {name: max(sup[name][0], min(level, sup[name][1])) for name, level in wanted.items()}
