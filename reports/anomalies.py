"""The anomaly vocabulary shared by both anomaly checkers: Jepsen's names, which are acceptable under which
settings (decided in ONE place: :data:`ACCEPTABLE`), and the result type with its evidence.

Its own module so :mod:`reports.checkers` (columnar) and :mod:`reports.checkers_simple` (record by record) both
import it and neither imports the other at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .evidence import bounded

ANOMALIES = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "nonmonotonic-poll",
    "int-nonmonotonic-poll",
    "poll-skip",
    "int-poll-skip",
    "unseen",
    "G1a",
    "int-send-skip",
    # transactional (reports.txn)
    "precommitted-read",
    "torn",
    "G1c",
    "G0",
    # metadata (reports.metadata)
    "lost-create",
    "phantom",
    "partitions-shrunk",
    "stale-read",
    "lagging-read",
)

# anomaly -> (predicate over the run's settings, why it is acceptable then). The only place this is decided.
ACCEPTABLE: dict[str, tuple[Callable[[dict], bool], str]] = {
    # Batched sends interleave with other producers' sends in Kafka; gaps between a batch's records are normal.
    "int-send-skip": (lambda s: True, "other producers' records interleave with a batch"),
    # Kafka does not isolate the writes of open transactions: their appends interleave in any order across
    # partitions, so write cycles are normal (Jepsen's allowed-error-types: "G0 is always allowed, since writes
    # are never isolated"). Only searched when the settings ask for ww edges (ww_deps).
    "G0": (lambda s: True, "writes of open transactions are not isolated (Jepsen allows G0)"),
    # With subscribe the group may move a partition between consumers between polls, so a consumer can
    # legitimately jump forward or back (Jepsen allows the same when :sub-via includes :subscribe).
    "poll-skip": (lambda s: "subscribe" in s.get("sub_via", ()), "subscribe: rebalances move positions"),
    "nonmonotonic-poll": (lambda s: "subscribe" in s.get("sub_via", ()), "subscribe: rebalances move positions"),
    # Conformance suites read only what each check needs and delete records on purpose (DeleteRecords, resets to
    # latest); their headers say partial_reads. "Never read" then proves nothing about loss, so both are allowed.
    "lost-write": (lambda s: bool(s.get("partial_reads")), "partial_reads: checks read selectively, delete records"),
    # Brokers apply the committed metadata log asynchronously; a broker cut off from the controller serves its last
    # image (Kafka's Admin.createTopics javadoc: "It may take several seconds ... for all the brokers to become
    # aware"). A read from a broker that has not caught up yet is normal (reports.metadata).
    "lagging-read": (lambda s: True, "brokers apply the metadata log asynchronously"),
    "unseen": (lambda s: bool(s.get("partial_reads")), "partial_reads: checks read selectively, delete records"),
}


# anomaly -> why it rests on the absence of an operation. From a file with skipped lines (--skip-corrupt) such an
# anomaly is never proven: the skipped line may have held exactly the operation whose absence it points at. It is
# reported as indeterminate, with the skipped lines named, and the run is neither valid nor invalid for it. Every
# other anomaly rests on operations that are there (two values at one offset, a read of a failed write, ...) and
# stands. A linearizability counterexample is indeterminate then too: a skipped operation may linearize it.
RESTS_ON_ABSENCE: dict[str, str] = {
    "lost-write": "a poll that read the value may be on a skipped line",
    "unseen": "a poll that read the value may be on a skipped line",
    "poll-skip": "a skipped poll may have read the offsets in between, or a skipped assign moved the position",
    "nonmonotonic-poll": "a skipped assign, seek or crash may have reset the consumer's position",
    "lost-create": "a delete of the topic may be on a skipped line",
    "stale-read": "a delete of the topic may be on a skipped line",
    "phantom": "a create of the topic may be on a skipped line",
    "partitions-shrunk": "a delete of the topic may be on a skipped line",
}


def indeterminate(skipped_lines: Sequence[int] | None) -> frozenset[str]:
    """The anomalies a run cannot prove: those resting on absence, once any of its lines was skipped."""
    return frozenset(RESTS_ON_ABSENCE) if skipped_lines else frozenset()


def acceptable(settings: dict | None) -> frozenset[str]:
    """The anomalies a run with these header settings is allowed to show."""
    s = settings or {}
    return frozenset(a for a, (pred, _why) in ACCEPTABLE.items() if pred(s))


@dataclass
class CheckResult:
    """Cases per anomaly (each a dict with evidence), which are acceptable, and the verdict."""

    anomalies: dict[str, list[dict]]
    acceptable: frozenset[str] = frozenset()
    stats: dict = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)  # every topic-partition seen, in first-seen order
    indeterminate: frozenset[str] = frozenset()    # unprovable here: lines were skipped (RESTS_ON_ABSENCE)
    skipped_lines: list[int] = field(default_factory=list)

    def by_key(self) -> dict[str, CheckResult]:
        """The result of each topic-partition alone (every analysis is per key, so this is what checking that
        partition's operations by themselves gives): the Spark job's per-part rows, from one whole-run pass."""
        out = {k: CheckResult({a: [] for a in ANOMALIES}, self.acceptable, {}, [k], self.indeterminate,
                              self.skipped_lines) for k in self.keys}
        for a, cases in self.anomalies.items():
            for c in cases:
                out[c["key"]].anomalies[a].append(c)
        return out

    @property
    def counts(self) -> dict[str, int]:
        return {a: len(c) for a, c in self.anomalies.items() if c}

    @property
    def found(self) -> frozenset[str]:
        return frozenset(a for a, c in self.anomalies.items() if c)

    @property
    def bad(self) -> frozenset[str]:
        """Anomalies found that these settings do not accept and that the history proves."""
        return self.found - self.acceptable - self.indeterminate

    @property
    def unproven(self) -> frozenset[str]:
        """Anomalies found that these settings do not accept but that rest on the absence of an operation in a
        history with skipped lines: neither a failure nor a pass."""
        return (self.found & self.indeterminate) - self.acceptable

    @property
    def valid(self) -> bool:
        return not self.bad and not self.unproven

    def summary(self, n: int = 8) -> dict:
        """The N most interesting cases per anomaly plus counts (full cases stay in ``anomalies``); the cases'
        evidence bounded (:func:`reports.evidence.bounded`)."""
        return {
            "valid": self.valid,
            "bad": sorted(self.bad),
            "acceptable_found": sorted(self.found & self.acceptable),
            "indeterminate": sorted(self.unproven),
            "skipped_lines": list(self.skipped_lines),
            "counts": self.counts,
            "cases": {a: bounded(_most_interesting(a, c)[:n]) for a, c in self.anomalies.items() if c},
        }


def _most_interesting(anomaly: str, cases: list[dict]) -> list[dict]:
    if anomaly in ("poll-skip", "int-poll-skip", "int-send-skip"):
        return sorted(cases, key=lambda c: -c.get("delta", 0))
    if anomaly in ("nonmonotonic-poll", "int-nonmonotonic-poll", "nonmonotonic-send", "int-nonmonotonic-send"):
        return sorted(cases, key=lambda c: c.get("delta", 0))
    if anomaly in ("G0", "G1c"):  # the shortest cycles first (Jepsen: sort-by (comp count :steps))
        return sorted(cases, key=lambda c: c.get("length", 0))
    return cases



def _op_ref(ops: Sequence[dict], pos: int | None) -> dict | None:
    """Evidence form of an operation: the completion as recorded."""
    if pos is None:
        return None
    op = ops[pos]
    return {"index": op["index"], "time_ns": op["time_ns"], "process": op["process"], "type": op["type"],
            "f": op["f"], "value": op["value"]}
