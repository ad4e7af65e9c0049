"""KIP-848 consumer groups: Apache Kafka's ConsumerGroup / ConsumerGroupMember / CurrentAssignmentBuilder and the
``uniform`` and ``range`` server assignors, as a pure state machine (no clock, no I/O).

The group coordinator (group_coordinator.py) owns the groups, the timers and the offsets; this module decides.

Epochs (KIP-848):
- the *group epoch* grows whenever the group's membership, a subscription or the subscribed topics' metadata
  change; the *assignment epoch* is the group epoch the current *target assignment* was computed for (here the
  target is recomputed at once, in the heartbeat that bumped the group epoch);
- each member has a *member epoch*: the assignment epoch it has reconciled to. It never goes down.
Reconciliation (CurrentAssignmentBuilder.computeNextAssignment): a member first keeps only the partitions of its
target it already owns and is asked to revoke the others, staying at its epoch (UNREVOKED_PARTITIONS) until a
heartbeat shows it no longer owns them; then it moves to the target epoch and gets the partitions of its target
that no other member still holds (a partition has at most one owner: the *partition epochs*); partitions another
member has not released yet come later (UNRELEASED_PARTITIONS) without another epoch bump.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

STABLE_MEMBER, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"
# ConsumerGroup.ConsumerGroupState's names, as ListGroups / ConsumerGroupDescribe show them
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2
ASSIGNORS = ("uniform", "range")     # group.consumer.assignors' default, first = default

Assignment = dict[str, set[int]]     # topic name -> partitions


def copy_assignment(a: Mapping[str, Iterable[int]]) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def partitions_of(a: Mapping[str, Iterable[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


@dataclass
class ConsumerMember:
    """ConsumerGroupMember: identity, subscription and the assignment state of one member."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: str = STABLE_MEMBER
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # the member epoch at which each partition it holds was assigned to it (ConsumerGroupMember.assignmentEpoch /
    # pendingRevocationEpoch): OffsetCommit with an older member epoch is valid for partitions held since then
    assigned_epochs: dict[tuple[str, int], int] = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == STABLE_MEMBER and self.epoch == target_epoch

    def owned(self) -> set[tuple[str, int]]:
        """Partitions this member holds for the group (assigned or still to revoke)."""
        return partitions_of(self.assigned) | partitions_of(self.pending_revocation)


class ConsumerGroup:
    """One consumer group: members, epochs, the target assignment and who holds each partition."""

    protocol_type = "consumer"
    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}        # instance id -> member id
        self.target: dict[str, Assignment] = {}           # member id -> target assignment
        self.partition_epochs: dict[tuple[str, int], int] = {}
        self.subscription_metadata: dict[str, int] = {}   # subscribed topic -> partition count
        self.assignor = ASSIGNORS[0]
        self.offsets: dict = {}                           # shared with classic groups (OffsetAndMetadata)
        self.dead = False
        self.regex_search = False                         # test switch consumer.regex_search: match anywhere
        self.stored = False                               # its existence is in the offsets partition

    # -- views ------------------------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """ConsumerGroup.state: Empty, Assigning (target behind the group epoch), Reconciling (a member not yet
        at the assignment epoch), Stable."""
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def partition_epoch(self, tp: tuple[str, int]) -> int:
        return self.partition_epochs.get(tp, -1)

    def subscribed_topics(self, all_topics: Iterable[str]) -> set[str]:
        """Every topic some member subscribes to, by name or by regex."""
        topics = list(all_topics)
        names: set[str] = set()
        for m in self.members.values():
            names |= self.member_topics(m, topics)
        return names

    def member_topics(self, m: ConsumerMember, all_topics: Iterable[str]) -> set[str]:
        """A member's topics: its names, and the topics its regex matches in full (as Pattern.matches)."""
        names = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            pat = re.compile(m.subscribed_topic_regex)
            match = pat.search if self.regex_search else pat.fullmatch
            names.update(t for t in all_topics if match(t))
        return names

    # -- membership -------------------------------------------------------------------------------------------

    def put_member(self, m: ConsumerMember) -> None:
        """Add or replace a member, moving the partition epochs from its old state to its new one."""
        old = self.members.get(m.member_id)
        if old is not None:
            for tp in old.owned():
                if self.partition_epochs.get(tp) is not None:
                    self.partition_epochs.pop(tp, None)
        self.members[m.member_id] = m
        for tp in m.owned():
            self.partition_epochs[tp] = m.epoch
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        """Drop a member: its partitions are free again; the target assignment forgets it."""
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        for tp in m.owned():
            self.partition_epochs.pop(tp, None)
        self.target.pop(member_id, None)
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        return m

    # -- target assignment ------------------------------------------------------------------------------------

    def compute_target(self, topics: Mapping[str, int], assignor: str) -> None:
        """TargetAssignmentBuilder: the assignor's answer for every member at the group epoch."""
        subs = {mid: self.member_topics(m, topics) & set(topics) for mid, m in self.members.items()}
        fn = range_assign if assignor == "range" else uniform_assign
        self.target = fn(subs, {t: topics[t] for t in set().union(*subs.values()) if t in topics} if subs else {},
                         self.target)
        self.assignor = assignor
        self.assignment_epoch = self.group_epoch


# -- reconciliation (CurrentAssignmentBuilder) ----------------------------------------------------------------


def reconcile(m: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[tuple[str, int]], int],
              owned: set[tuple[str, int]] | None, *, revoke_first: bool = True) -> ConsumerMember:
    """CurrentAssignmentBuilder.build: the member's next state towards ``target`` at ``target_epoch``.
    ``owned`` is what the heartbeat says the member holds (None: not sent). ``revoke_first`` False is the test
    switch consumer.assign_before_revoke (hand out partitions another member has not revoked yet)."""
    if m.state == UNREVOKED:
        still_owns = owned is None or bool(owned & partitions_of(m.pending_revocation))
        if still_owns:
            return m
        return _next(m, m.epoch, m.assigned, target_epoch, target, partition_epoch, revoke_first)
    if m.state == UNRELEASED or m.epoch != target_epoch:
        return _next(m, m.epoch, m.assigned, target_epoch, target, partition_epoch, revoke_first)
    return m


def _next(m: ConsumerMember, epoch: int, assigned: Assignment, target_epoch: int, target: Assignment,
          partition_epoch: Callable[[tuple[str, int]], int], revoke_first: bool) -> ConsumerMember:
    """CurrentAssignmentBuilder.computeNextAssignment."""
    kept: Assignment = {}
    revoking: Assignment = {}
    new_assigned: Assignment = {}
    unreleased = False
    for topic in set(target) | set(assigned):
        want = target.get(topic, set())
        have = assigned.get(topic, set())
        both = have & want
        if both:
            kept[topic] = set(both)
        if have - want:
            revoking[topic] = have - want
        gets = set(both)
        for p in want - have:
            if partition_epoch((topic, p)) == -1 or not revoke_first:
                gets.add(p)
            else:
                unreleased = True
        if gets:
            new_assigned[topic] = gets
    out = ConsumerMember(**{**m.__dict__})
    if revoking and revoke_first:
        out.state, out.epoch, out.previous_epoch = UNREVOKED, epoch, m.previous_epoch
        out.assigned, out.pending_revocation = kept, revoking
    else:
        out.state = UNRELEASED if unreleased else STABLE_MEMBER
        out.previous_epoch, out.epoch = epoch, target_epoch
        out.assigned, out.pending_revocation = new_assigned, {}
    out.assigned_epochs = {tp: m.assigned_epochs.get(tp, out.epoch) for tp in out.owned()}
    return out


# -- server assignors ---------------------------------------------------------------------------------------


def uniform_assign(subs: Mapping[str, set[str]], topics: Mapping[str, int],
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """UniformAssignor (sticky and balanced): every partition of a subscribed topic goes to one subscribed member;
    members keep what they had as long as they stay within their share; the rest goes to whoever has fewest."""
    members = sorted(subs)
    out: dict[str, Assignment] = {mid: {} for mid in members}
    if not members:
        return out
    count = {mid: 0 for mid in members}
    all_parts = sorted((t, p) for t, n in topics.items() for p in range(n))
    # each member's share: floor(partitions it can take / members sharing them), one more for as many members as
    # the remainder allows (balanced: counts differ by at most one when subscriptions are the same)
    eligible = {tp: [mid for mid in members if tp[0] in subs[mid]] for tp in all_parts}
    total_for = {mid: sum(1 for tp in all_parts if mid in eligible[tp]) for mid in members}
    peers = {mid: max(1, sum(1 for o in members if subs[o] & subs[mid])) for mid in members}
    floor = {mid: total_for[mid] // peers[mid] for mid in members}
    extra = max((total_for[mid] % peers[mid] for mid in members), default=0)
    taken: set[tuple[str, int]] = set()
    kept: dict[str, list[tuple[str, int]]] = {mid: [] for mid in members}
    for mid in members:
        for t, ps in sorted(previous.get(mid, {}).items()):
            for p in sorted(ps):
                tp = (t, p)
                if tp in eligible and mid in eligible[tp] and tp not in taken:
                    kept[mid].append(tp)
                    taken.add(tp)
    for mid in members:                  # keep up to the floor, then one more while the remainder lasts
        limit = floor[mid] + (1 if extra > 0 and len(kept[mid]) > floor[mid] else 0)
        if limit > floor[mid]:
            extra -= 1
        for tp in kept[mid][limit:]:
            taken.discard(tp)
        for t, p in kept[mid][:limit]:
            out[mid].setdefault(t, set()).add(p)
        count[mid] = min(len(kept[mid]), limit)
    for tp in all_parts:
        if tp in taken or not eligible[tp]:
            continue
        mid = min(eligible[tp], key=lambda x: (count[x], x))
        out[mid].setdefault(tp[0], set()).add(tp[1])
        count[mid] += 1
    return out


def range_assign(subs: Mapping[str, set[str]], topics: Mapping[str, int],
                 previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """RangeAssignor: per topic, the subscribed members (by member id) get consecutive ranges; the first
    ``partitions % members`` get one more."""
    out: dict[str, Assignment] = {mid: {} for mid in subs}
    for t, n in sorted(topics.items()):
        ms = sorted(mid for mid, ts in subs.items() if t in ts)
        if not ms:
            continue
        per, extra = divmod(n, len(ms))
        start = 0
        for i, mid in enumerate(ms):
            k = per + (1 if i < extra else 0)
            if k:
                out[mid][t] = set(range(start, start + k))
            start += k
    return out
