"""Trivially simple models of Kafka's rules, one answer per request, so a state machine can compare every response.

Why this simple: a model a reader can check by eye is the spec; any difference from a broker is then either a
broker bug or a rule stated wrong here, and the printed counterexample says which request disagreed.

- ``PartitionModel``: one partition of a single-leader log, written only with acks=all, so at rest HW = LEO.
  Fetch/DeleteRecords/ListOffsets answers follow ReplicaManager / Partition / UnifiedLog:
  fetch offset < log start or > HW → OFFSET_OUT_OF_RANGE; DeleteRecords above the HW → OFFSET_OUT_OF_RANGE, below
  the log start → no change; ListOffsets EARLIEST = log start, LATEST = HW.
- ``GroupModel``: a classic group driven through complete rebalances only (everyone rejoins and syncs), so it is
  Empty or Stable between steps; each completed rebalance bumps the generation by one, also the one that empties
  the group (ClassicGroup.initNextGeneration); commits follow ClassicGroup.validateOffsetCommit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kafka import errors as E

NONE = 0
OFFSET_OUT_OF_RANGE = E.OffsetOutOfRangeError.errno
ILLEGAL_GENERATION = E.IllegalGenerationError.errno
UNKNOWN_MEMBER_ID = E.UnknownMemberIdError.errno
EARLIEST, LATEST = -2, -1


@dataclass
class PartitionModel:
    """A partition's records by offset, its log start offset, and HW (= LEO: every write is acks=all)."""

    records: list[bytes | None] = field(default_factory=list)
    log_start: int = 0

    @property
    def hw(self) -> int:
        return len(self.records)

    def produce(self, values: list[bytes | None]) -> int:
        """Append; returns the base offset the broker must answer."""
        base = len(self.records)
        self.records.extend(values)
        return base

    def fetch(self, offset: int) -> tuple[int, list[tuple[int, bytes | None]]]:
        """(error, records from ``offset`` up to the HW) for a consumer fetch with room for everything."""
        if offset < self.log_start or offset > self.hw:
            return OFFSET_OUT_OF_RANGE, []
        return NONE, [(o, self.records[o]) for o in range(offset, self.hw)]

    def delete_records(self, offset: int) -> tuple[int, int]:
        """(error, low watermark) for DeleteRecords before ``offset`` (-1 = up to the HW)."""
        target = self.hw if offset == -1 else offset
        if target > self.hw or target < 0:
            return OFFSET_OUT_OF_RANGE, -1
        self.log_start = max(self.log_start, target)
        return NONE, self.log_start

    def list_offsets(self, timestamp: int) -> int:
        return self.log_start if timestamp == EARLIEST else self.hw


@dataclass
class GroupModel:
    """Members, generation and committed offsets of one classic group."""

    generation: int = 0
    members: list[str] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def rebalanced(self, members: list[str]) -> None:
        """A rebalance completed with exactly ``members``."""
        self.generation += 1
        self.members = list(members)

    def commit(self, member: str | None, generation: int, tp: tuple[str, int], offset: int) -> int:
        """ClassicGroup.validateOffsetCommit for a group that is Empty or Stable; stores the offset on success."""
        if member is None and generation < 0:
            if self.members:
                return UNKNOWN_MEMBER_ID
        else:
            if member not in self.members:
                return UNKNOWN_MEMBER_ID
            if generation != self.generation:
                return ILLEGAL_GENERATION
        self.committed[tp] = offset
        return NONE

    def heartbeat(self, member: str, generation: int) -> int:
        if member not in self.members:
            return UNKNOWN_MEMBER_ID
        return NONE if generation == self.generation else ILLEGAL_GENERATION
