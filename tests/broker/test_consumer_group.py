"""KIP-848's decisions without a broker: the server assignors and CurrentAssignmentBuilder's reconciliation
(reference_broker/consumer_group.py), the rules the consumer_protocol suite checks over the wire."""
from __future__ import annotations

import random

from reference_broker.consumer_group import (
    STABLE_MEMBER,
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerMember,
    partitions_of,
    range_assign,
    reconcile,
    uniform_assign,
)


def _owners(result: dict) -> dict:
    owners: dict = {}
    for mid, a in result.items():
        for tp in partitions_of(a):
            assert tp not in owners, f"{tp} assigned to {owners[tp]} and {mid}"
            owners[tp] = mid
    return owners


def test_uniform_is_complete_balanced_and_sticky() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n, parts = rng.randint(1, 7), rng.randint(0, 20)
        subs = {f"m{i}": {"t"} for i in range(n)}
        previous = uniform_assign({f"m{i}": {"t"} for i in range(rng.randint(1, 7))}, {"t": parts}, {})
        result = uniform_assign(subs, {"t": parts}, previous)
        assert len(_owners(result)) == parts
        counts = [len(partitions_of(a)) for a in result.values()]
        assert max(counts) - min(counts) <= 1, (n, parts, counts)
        # sticky: a member that stays keeps min(what it had, its share) of its partitions
        for mid, a in previous.items():
            if mid in result:
                kept = partitions_of(a) & partitions_of(result[mid])
                assert len(kept) >= min(len(partitions_of(a)), parts // n), (mid, a, result[mid])


def test_uniform_only_gives_subscribed_topics() -> None:
    result = uniform_assign({"a": {"x"}, "b": {"x", "y"}}, {"x": 2, "y": 3}, {})
    assert _owners(result) and all(t == "x" for t, _ in partitions_of(result["a"]))
    assert {tp for tp in _owners(result)} == {("x", 0), ("x", 1), ("y", 0), ("y", 1), ("y", 2)}


def test_range_gives_consecutive_ranges_by_member_id() -> None:
    assert range_assign({"b": {"t"}, "a": {"t"}, "c": {"t"}}, {"t": 7}, {}) == {
        "a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}, "c": {"t": {5, 6}}}


def test_revoke_before_assign() -> None:
    """A member first gives up what moves (keeping its epoch), then moves on; the other gets the partitions only
    once they are released, without another epoch bump."""
    g = ConsumerGroup("g")
    a = ConsumerMember("a", epoch=1, assigned={"t": {0, 1, 2, 3}}, assigned_epochs={("t", p): 1 for p in range(4)})
    b = ConsumerMember("b", epoch=0)
    g.put_member(a)
    g.put_member(b)
    target = {"a": {"t": {0, 1}}, "b": {"t": {2, 3}}}
    b2 = reconcile(b, 2, target["b"], g.partition_epoch, set())
    assert (b2.state, b2.epoch, b2.assigned) == (UNRELEASED, 2, {}), b2
    g.put_member(b2)
    a2 = reconcile(a, 2, target["a"], g.partition_epoch, partitions_of(a.assigned))
    assert (a2.state, a2.epoch, a2.assigned, a2.pending_revocation) == (UNREVOKED, 1, {"t": {0, 1}},
                                                                         {"t": {2, 3}}), a2
    g.put_member(a2)
    assert reconcile(a2, 2, target["a"], g.partition_epoch, partitions_of(a.assigned)) is a2   # still owns them
    assert reconcile(b2, 2, target["b"], g.partition_epoch, set()).assigned == {}             # not released yet
    a3 = reconcile(a2, 2, target["a"], g.partition_epoch, {("t", 0), ("t", 1)})              # revoked
    assert (a3.state, a3.epoch, a3.previous_epoch, a3.assigned) == (STABLE_MEMBER, 2, 1, {"t": {0, 1}}), a3
    assert a3.assigned_epochs == {("t", 0): 1, ("t", 1): 1}
    g.put_member(a3)
    b3 = reconcile(b2, 2, target["b"], g.partition_epoch, set())
    assert (b3.state, b3.epoch, b3.assigned) == (STABLE_MEMBER, 2, {"t": {2, 3}}), b3
    assert b3.assigned_epochs == {("t", 2): 2, ("t", 3): 2}
