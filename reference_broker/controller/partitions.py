"""CreatePartitions on the controller (KIP-195; Kafka's ReplicationControlManager.createPartitions).

Why here: new partitions are PartitionRecords in the metadata log, as a new topic's are, so every broker creates
its replicas from the same records (the broker's apply_delta) and Metadata shows them with leaders. Kept beside
QuorumController (it needs only the image, the placement and ``_commit``).

Rules, in Kafka 4.4.0's order and words (each seen on a 3-node Kafka 4.4.0 cluster):
- unknown topic (or an illegal name): UNKNOWN_TOPIC_OR_PARTITION, no message;
- a count below the current one (or <= 0): INVALID_PARTITIONS "The topic T currently has N partition(s); C would
  not be an increase."; the same count: INVALID_PARTITIONS "Topic already has N partition(s).";
- more than 10000 new partitions: POLICY_VIOLATION "Excessively large number of additional partitions per
  request.";
- manual assignments (one replica list per new partition): their number must be the number added, each list
  non-empty, of registered brokers, without repeats and as long as the topic's replication factor
  (INVALID_REPLICA_ASSIGNMENT with Kafka's messages); the leader is the first unfenced replica;
- otherwise the new partitions are placed as a new topic's are (placement.place: striped over unfenced brokers);
- validate_only checks without writing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka import errors as E

from ..metadata.records import NO_LEADER
from .placement import place

if TYPE_CHECKING:
    from .quorum_controller import QuorumController

MAX_NEW_PARTITIONS = 10_000


def create_partitions(c: QuorumController, name: str, count: int, assignments: list[list[int]] | None,
                      validate_only: bool) -> tuple[int, str | None]:
    """(error, message); commits the new partitions unless refused or ``validate_only``."""
    t = c.image.topics.get(name)
    if t is None:
        return E.UnknownTopicOrPartitionError.errno, None
    current = len(t.partitions)
    if count <= current and c.faults is not None and c.faults.on("partitions.no_increase_check"):
        return 0, None
    if count < current or count <= 0:
        return (E.InvalidPartitionsError.errno,
                f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
    if count == current:
        return E.InvalidPartitionsError.errno, f"Topic already has {current} partition(s)."
    added = count - current
    if added > MAX_NEW_PARTITIONS:
        return E.PolicyViolationError.errno, "Excessively large number of additional partitions per request."
    rf = t.replication_factor
    bad = E.InvalidReplicationAssignmentError.errno
    if assignments is not None:
        if len(assignments) != added:
            return bad, (f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                         f"assignment(s) were specified.")
        new = []
        for replicas in assignments:
            if not replicas:
                return bad, "The manual partition assignment includes an empty replica list."
            for b in replicas:
                if b not in c.image.brokers:
                    return bad, f"The manual partition assignment includes broker {b}, but no such broker is registered."
            seen: set[int] = set()
            for b in replicas:
                if b in seen:
                    return bad, f"The manual partition assignment includes the broker {b} more than once."
                seen.add(b)
            if len(replicas) != rf:
                return bad, (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                             f"but this is not consistent with previous partitions, which have {rf} replica(s).")
            isr = [b for b in replicas if c.image.is_active(b)]
            if not isr:
                return bad, ("All brokers specified in the manual partition assignment for partition "
                             f"{current + len(new)} are fenced or in controlled shutdown.")
            new.append((list(replicas), isr))
    else:
        usable = [b for _, b in sorted(c.image.brokers.items()) if not b.in_controlled_shutdown]
        live = [b.broker_id for b in usable if not b.fenced]
        down = [b.broker_id for b in usable if b.fenced]
        if rf > len(usable) or not live:
            return (E.InvalidReplicationFactorError.errno,
                    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot "
                    f"be reached because only {len(usable)} broker(s) are registered.")
        new = [(replicas, [r for r in replicas if r in live]) for replicas in place(live, added, rf, c.rng, down)]
    if validate_only:
        return 0, None
    leaderless = c.faults is not None and c.faults.on("partitions.new_leaderless")
    c._commit([{"type": "partition", "topic_id": str(t.topic_id), "partition": current + i, "replicas": replicas,
                "isr": isr, "leader": NO_LEADER if leaderless else isr[0], "leader_epoch": 0, "partition_epoch": 0}
               for i, (replicas, isr) in enumerate(new)])
    return 0, None
