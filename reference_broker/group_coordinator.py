"""The group coordinator: Apache Kafka's ClassicGroup state machine and KIP-848 consumer groups, one home for both.

Consumer groups (``group.protocol=consumer``; decisions in consumer_group.py): ConsumerGroupHeartbeat joins (epoch
0), heartbeats and leaves (-1; -2 for a static member coming back); the coordinator keeps the timers — the session
(group.consumer.session.timeout.ms, reset by every heartbeat) and, while a member is asked to revoke partitions, its
rebalance timeout — and either one running out fences the member: it is removed, the group epoch is bumped and the
target assignment recomputed for the others. A group id names one group of either type in ``groups``: an empty
group of one type becomes the other when a member of the other protocol joins, keeping its offsets; OffsetCommit
checks member epochs for consumer groups (ConsumerGroup.validateOffsetCommit).

States (``ClassicGroupState``): Empty → PreparingRebalance → CompletingRebalance → Stable, and Dead.
- JoinGroup parks until every known member has rejoined or the rebalance timeout (max over members) passes; the
  first rebalance of an Empty group waits ``group.initial.rebalance.delay.ms`` (InitialDelayedJoin), extended by
  the delay for each member that joins meanwhile, up to the rebalance timeout. Members that did not rejoin are
  removed (dynamic ones; static members stay). Completing the join bumps the generation, picks the protocol every
  member supports with the most first-choice votes, and answers the leader with the member list.
- SyncGroup parks followers until the leader's assignment arrives (then Stable); a rebalance meanwhile answers
  them REBALANCE_IN_PROGRESS. Every member of a new generation owes a SyncGroup: those that have not sent one
  within the rebalance timeout are removed and the group rebalances (schedulePendingSync / expirePendingSync), so
  a leader that never assigns cannot hold its followers forever.
- Session timeouts expire members (not while their join/sync is parked) and trigger a rebalance.
- JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED with a fresh id (KIP-394); the id must come back within
  the session timeout.
- Static membership (KIP-345): a known ``group.instance.id`` rejoining with an empty member id gets a new member
  id and the old one is fenced (FENCED_INSTANCE_ID); a Stable group does not rebalance unless the protocol it
  would select changes (new metadata alone does not). A request naming an instance id with another member id is
  FENCED_INSTANCE_ID.
- Validation orders and codes follow GroupMetadataManager / ClassicGroup (Kafka 4): see each method.

Visibility (the new group coordinator's CoordinatorRuntime): every change is appended to the group's offsets
partition first and applied to the coordinator's latest state, which later writes validate against; readers
(OffsetFetch) see the state at the partition's high watermark, so an offset that is not replicated yet — or whose
commit timed out — is not served. Answers that report a write (OffsetCommit, OffsetDelete, DeleteGroups, the
SyncGroup that stores a generation's assignment) wait until the HW passes it, up to offsets.commit.timeout.ms. An
append that fails leaves no trace (nothing is applied before the append succeeded).

Coordination follows the partitions of ``__consumer_offsets`` this broker leads (GroupMetadataManager's
loadGroupsForPartition / removeGroupsForPartition): groups hashed to a led partition are loaded from it when the
leadership arrives and dropped when it leaves; requests for any other group are NOT_COORDINATOR.

Narrow inputs only: config, clock, RNG, fault switches and an OffsetStore ("append to / replay an offsets
partition"); it never sees the broker. Threading rule: runs on the broker's event loop; timers come from the Clock.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import random
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka import errors as E

from .clock import Clock, Timer
from .config import BrokerConfig, ConfigError
from .consumer_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    UNREVOKED,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    partitions_of,
    reconcile,
)
from .faults import Faults
from .offset_store import GROUP, AppendError, OffsetAndMetadata, OffsetStore, coordinator_error

log = logging.getLogger("reference_broker.groups")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"

NONE = 0
MEMBER_ID_REQUIRED = E.MemberIdRequiredError.errno
GROUP_ID_NOT_FOUND = E.GroupIdNotFoundError.errno
NON_EMPTY_GROUP = E.NonEmptyGroupError.errno
GROUP_SUBSCRIBED_TO_TOPIC = E.GroupSubscribedToTopicError.errno
TP = tuple[str, int]
INVALID_REGULAR_EXPRESSION = 128      # Kafka's Errors.INVALID_REGULAR_EXPRESSION (no kafka-python class)


@dataclass
class ConsumerHeartbeatResult:
    """What ConsumerGroupHeartbeat answers: an error (with Kafka's message) or the member's id, epoch and, when
    the request was a full one or the assignment changed, its assignment."""

    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def uuid_b64(rng: random.Random) -> str:
    """A Kafka Uuid's string form (URL-safe base64 of 16 random bytes, no padding): a v0 member id."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


def check_consumer_settings(config: BrokerConfig) -> None:
    """GroupCoordinatorConfig's requirements on the group.consumer.* settings (Kafka refuses to start)."""
    c = config
    pre = "group.consumer."
    for what in ("session.timeout.ms", "heartbeat.interval.ms"):
        lo, val, hi = c[f"{pre}min.{what}"], c[f"{pre}{what}"], c[f"{pre}max.{what}"]
        if not lo <= val <= hi:
            raise ConfigError(f"{pre}{what}={val} must be within [{pre}min.{what}={lo}, {pre}max.{what}={hi}]")
    if c[f"{pre}heartbeat.interval.ms"] >= c[f"{pre}session.timeout.ms"]:
        raise ConfigError(f"{pre}heartbeat.interval.ms must be less than {pre}session.timeout.ms")
    unknown = [a for a in c[f"{pre}assignors"].split(",") if a.strip() and a.strip() not in ("uniform", "range")]
    if unknown or not c[f"{pre}assignors"].strip():
        raise ConfigError(f"{pre}assignors: only uniform and range are served, got {c[pre + 'assignors']!r}")


def append_error(code: int) -> int:
    """The error a client gets for a write that failed with ``code`` (0 stays 0)."""
    return coordinator_error(code, GROUP)


@dataclass
class Uncommitted:
    """A write to an offsets partition that the HW has not passed yet: the offsets it changed, each with the value
    readers must still see (None: no offset)."""

    end: int
    group_id: str
    before: dict[TP, OffsetAndMetadata | None]


class GroupError(Exception):
    """A Kafka error code raised out of validation."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code


@dataclass
class JoinResult:
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    session_timer: Timer | None = None
    is_new: bool = False
    sync_refused: bool = False  # (test-only switch group.left_out_member_refused: left out by the leader)
    abandoned: bool = False     # (test-only switch group.abandoned_leader_kept: its parked join's connection closed)

    def sync_answer(self) -> tuple[int, bytes]:
        """(error, assignment) of this member's SyncGroup once the leader assigned: parked or arriving when Stable."""
        return (E.RebalanceInProgressError.errno, b"") if self.sync_refused else (NONE, self.assignment)

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


class ClassicGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}    # group.instance.id -> member id
        self.pending_members: dict[str, Timer | None] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.join_timer: Timer | None = None
        self.initial_delay_remaining_ms = 0
        self.new_member_added = False
        self.in_initial_delay = False
        self.pending_sync: set[str] = set()   # members of this generation that have not sent SyncGroup yet
        self.sync_timer: Timer | None = None
        self.expired: set[str] = set()        # ids removed by session expiry (only for group.expired_member_zombie)

    # -- views ------------------------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """ClassicGroup.supportsProtocols: same type, and a protocol in common with every member."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return (protocol_type == self.protocol_type
                and bool({n for n, _ in protocols} & self.candidate_protocols()))

    def select_protocol(self) -> str:
        """ClassicGroup.selectProtocol: each member votes for its first candidate; most votes wins."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            vote = next(n for n, _ in m.protocols if n in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """ClassicGroup.validateMember: static members are checked by instance id first."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise GroupError(E.UnknownMemberIdError.errno, f"unknown group.instance.id {instance_id}")
            if existing != member_id:
                raise GroupError(E.FencedInstanceIdError.errno,
                                 f"instance {instance_id} is now member {existing}, not {member_id}")
        elif member_id not in self.members:
            raise GroupError(E.UnknownMemberIdError.errno, f"unknown member {member_id!r}")


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, clock: Clock, rng: random.Random, faults: Faults,
                 store: OffsetStore) -> None:
        self.config = config
        self.clock = clock
        self.rng = rng
        self.faults = faults
        self.groups: dict[str, ClassicGroup] = {}
        self.store = store
        self.owned: set[int] = set()
        self.uncommitted: dict[int, list[Uncommitted]] = {}   # offsets partition -> writes above its HW, in order
        # offsets partition -> producer id -> group -> offsets of its open transaction (TxnOffsetCommit, KIP-98);
        # applied by the COMMIT marker, dropped by ABORT (pendingTransactionalOffsetCommits)
        self.pending_txn: dict[int, dict[int, dict[str, dict[TP, OffsetAndMetadata]]]] = {}
        self._tasks: set[asyncio.Task] = set()
        self.assignors = [a.strip() for a in config["group.consumer.assignors"].split(",") if a.strip()]
        self._cg_timers: dict[tuple[str, str, str], Timer] = {}   # (group, member, "session"|"rebalance")
        check_consumer_settings(config)

    # -- ownership (GroupMetadataManager.loadGroupsForPartition / removeGroupsForPartition) --------------------

    def partition_of(self, group_id: str) -> int:
        return self.store.index_of(group_id)

    def owns(self, group_id: str) -> bool:
        return self.partition_of(group_id) in self.owned

    def load_partition(self, index: int) -> None:
        """This broker became leader of offsets partition ``index``: its groups come back from the log."""
        if index in self.owned:
            return
        self.owned.add(index)
        if not self.faults.on("offsets.forget_on_restart"):
            self._load(index)

    def unload_partition(self, index: int) -> None:
        """Leadership of offsets partition ``index`` moved away: its groups go (members rediscover the new
        coordinator on NOT_COORDINATOR)."""
        self.owned.discard(index)
        self.uncommitted.pop(index, None)
        self.pending_txn.pop(index, None)
        for gid in [g for g in self.groups if self.partition_of(g) == index]:
            g = self.groups.pop(gid)
            if isinstance(g, ConsumerGroup):
                for mid in list(g.members):
                    self._cancel_cg_timers(gid, mid)
                continue
            for m in list(g.members.values()):
                self._release(m, E.NotCoordinatorError.errno)
            for t in g.pending_members.values():
                if t is not None:
                    t.cancel()
            if g.join_timer is not None:
                g.join_timer.cancel()
            self._cancel_pending_sync(g)

    # -- loading ----------------------------------------------------------------------------------------------

    def _load(self, index: int) -> None:
        """Replay one __consumer_offsets partition to its log end: offsets and generations come back; members do
        not (they rejoin). Records at or above the HW are not committed yet: readers see them once it passes
        (Kafka's CoordinatorLoader replays to the log end and marks the HW as the last committed offset)."""
        hw = self.store.high_watermark(index)
        pending = self.uncommitted.setdefault(index, [])
        for offset, key, value in self.store.replay(index):
            gid = key.get("group")
            if key.get("type") == "consumer_group" and value is not None:
                old = self.groups.get(gid)
                cg = old if isinstance(old, ConsumerGroup) else ConsumerGroup(gid)
                if old is not None and old is not cg:
                    cg.offsets = old.offsets
                cg.group_epoch = cg.assignment_epoch = max(cg.group_epoch, value["group_epoch"])
                cg.stored = True
                self.groups[gid] = cg
                continue
            if key.get("type") == "group":
                if value is None:
                    self.groups.pop(gid, None)
                    continue
                if isinstance(self.groups.get(gid), ConsumerGroup):    # became a classic group again
                    classic = ClassicGroup(gid)
                    classic.offsets = self.groups[gid].offsets
                    self.groups[gid] = classic
                g = self.groups.setdefault(gid, ClassicGroup(gid))
                g.generation_id = value["generation"]
                g.protocol_type = value.get("protocol_type")
                g.protocol_name = value.get("protocol_name")
            elif key.get("type") == "marker":
                self.complete_txn(index, key["producer_id"], key["commit"], offset + 1, replaying=offset < hw)
            elif key.get("type") == "offset" and "producer_id" in key:
                if value is not None:
                    self.pending_txn.setdefault(index, {}).setdefault(key["producer_id"], {}).setdefault(gid, {})[
                        (key["topic"], key["partition"])] = OffsetAndMetadata(
                            value["offset"], value["leader_epoch"], value["metadata"], value["commit_timestamp"])
            elif key.get("type") == "offset":
                tp = (key["topic"], key["partition"])
                old = self.groups[gid].offsets.get(tp) if gid in self.groups else None
                if offset >= hw:
                    pending.append(Uncommitted(offset + 1, gid, {tp: old}))
                if value is None:
                    if gid in self.groups:
                        self.groups[gid].offsets.pop(tp, None)
                    continue
                g = self.groups.setdefault(gid, ClassicGroup(gid))
                g.offsets[tp] = OffsetAndMetadata(value["offset"], value["leader_epoch"], value["metadata"],
                                                  value["commit_timestamp"])

    # -- writes and what readers see (CoordinatorRuntime: writes visible at the HW) ---------------------------

    def _wrote(self, group_id: str, end: int, before: dict[TP, OffsetAndMetadata | None]) -> int:
        """Note an append that ended at ``end``; returns the offsets partition it went to."""
        index = self.partition_of(group_id)
        self.uncommitted.setdefault(index, []).append(Uncommitted(end, group_id, before))
        return index

    async def _committed(self, index: int, end: int) -> int:
        """Wait (up to offsets.commit.timeout.ms) for the HW to pass a write: 0 or the error a client gets."""
        timeout = self.config["offsets.commit.timeout.ms"] / 1000
        return append_error(await self.store.wait_committed(index, end, timeout))

    def _pending(self, index: int) -> list[Uncommitted]:
        """The writes to ``index`` the HW has not passed yet (those it passed are forgotten)."""
        writes = self.uncommitted.get(index, [])
        hw = self.store.high_watermark(index)
        while writes and writes[0].end <= hw:
            writes.pop(0)
        return writes

    def committed_offsets(self, group_id: str) -> dict[TP, OffsetAndMetadata]:
        """The group's offsets as of the HW of its offsets partition: the latest ones with every write above the HW
        undone, newest first."""
        g = self.groups.get(group_id)
        view = dict(g.offsets) if g is not None else {}
        for w in reversed(self._pending(self.partition_of(group_id))):
            if w.group_id != group_id:
                continue
            for tp, old in w.before.items():
                if old is None:
                    view.pop(tp, None)
                else:
                    view[tp] = old
        return view

    async def wait_stable(self, group_id: str) -> int:
        """OffsetFetch with require_stable: wait until every write to the group's partition is committed (Kafka
        schedules it as a write operation); 0 or an error."""
        index = self.partition_of(group_id)
        pending = self._pending(index)
        if not pending:
            return 0
        timeout = self.config["offsets.commit.timeout.ms"] / 1000
        return await self.store.wait_committed(index, pending[-1].end, timeout)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- timers -----------------------------------------------------------------------------------------------

    def _later(self, delay_ms: int, fn, *args) -> Timer:
        return self.clock.call_later(max(delay_ms, 0) / 1000, fn, *args)

    def _schedule_session(self, g: ClassicGroup, m: Member) -> None:
        if m.session_timer is not None:
            m.session_timer.cancel()
        ms = m.session_timeout_ms // 2 if self.faults.on("group.session_expires_early") else m.session_timeout_ms
        m.session_timer = self._later(ms, self._on_session_expired, g, m.member_id)

    def _on_session_expired(self, g: ClassicGroup, member_id: str) -> None:
        m = g.members.get(member_id)
        if m is None:
            return
        if m.awaiting_join or m.awaiting_sync or (
                member_id in g.pending_sync and self.faults.on("group.owed_sync_never_expires")) or (
                self._kept_abandoned(g, m)):
            # GroupCoordinator.shouldKeepAlive: a member parked in join/sync is alive; check again later
            self._schedule_session(g, m)
            return
        if self.faults.on("group.expired_member_zombie"):
            g.expired.add(member_id)
        self._remove_member(g, m, "session timeout")

    def _schedule_pending_sync(self, g: ClassicGroup) -> None:
        """GroupMetadataManager.schedulePendingSync: every member must send SyncGroup within the rebalance timeout."""
        self._cancel_pending_sync(g)
        g.pending_sync = set(g.members)
        if not self.faults.on("group.owed_sync_never_expires"):
            g.sync_timer = self._later(g.rebalance_timeout_ms(), self._expire_pending_sync, g, g.generation_id)

    @staticmethod
    def _cancel_pending_sync(g: ClassicGroup) -> None:
        g.pending_sync = set()
        if g.sync_timer is not None:
            g.sync_timer.cancel()
            g.sync_timer = None

    def _expire_pending_sync(self, g: ClassicGroup, generation: int) -> None:
        """GroupMetadataManager.expirePendingSync: members that never synced leave; the group rebalances."""
        g.sync_timer = None
        if g.state not in (COMPLETING, STABLE) or g.generation_id != generation or not g.pending_sync:
            return
        for mid in sorted(g.pending_sync):
            m = g.members.get(mid)
            if m is not None and not self._kept_abandoned(g, m):
                self._remove_member(g, m, "no SyncGroup within the rebalance timeout")

    def join_abandoned(self, group_id: str, member_id: str) -> None:
        """The connection of ``member_id``'s parked JoinGroup closed (reported only under the test-only switch
        group.abandoned_leader_kept; Kafka never looks): mark it so the switch can keep it as leader."""
        g = self.groups.get(group_id)
        if isinstance(g, ClassicGroup) and member_id in g.members:
            g.members[member_id].abandoned = True

    def _kept_abandoned(self, g: ClassicGroup, m: Member) -> bool:
        """Test-only switch group.abandoned_leader_kept: a leader whose connection closed while its JoinGroup was
        parked is never expired (session or pending sync), so it stays leader and the group waits for it forever
        (Kafka removes it: GROUP-JOIN-ABANDONED)."""
        return m.abandoned and g.leader_id == m.member_id and self.faults.on("group.abandoned_leader_kept")

    # -- membership changes -----------------------------------------------------------------------------------

    def _new_member_id(self, client_id: str, instance_id: str | None = None) -> str:
        """ClassicGroup.generateMemberId: the instance id (static) or client id, then a UUID."""
        return f"{instance_id or client_id}-{uuid.UUID(int=self.rng.getrandbits(128))}"

    def _add_member(self, g: ClassicGroup, m: Member) -> None:
        if not g.members:
            g.protocol_type = m.protocol_type
        g.members[m.member_id] = m
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = m.member_id
        if g.leader_id is None:
            g.leader_id = m.member_id
        m.is_new = True
        g.new_member_added = True

    @staticmethod
    def _release(m: Member, code: int) -> None:
        """Stop a member's session timer and answer its parked JoinGroup/SyncGroup with ``code``."""
        if m.session_timer is not None:
            m.session_timer.cancel()
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(JoinResult(code) if fut is m.join_future else (code, b""))

    def _remove_member(self, g: ClassicGroup, m: Member, why: str, rebalance: bool = True) -> None:
        g.members.pop(m.member_id, None)
        g.pending_sync.discard(m.member_id)
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        self._release(m, E.UnknownMemberIdError.errno)
        if g.leader_id == m.member_id:
            g.leader_id = next(iter(g.members), None)
        if not rebalance:
            return
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, f"removing member {m.member_id}: {why}")
        elif g.state == PREPARING:
            self._maybe_complete_join(g)

    def _prepare_rebalance(self, g: ClassicGroup, reason: str) -> None:
        self._cancel_pending_sync(g)
        if g.state == COMPLETING:
            # resetAndPropagateAssignmentWithError: parked syncs learn a rebalance started
            for m in g.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    self._answer_sync(g, m, (E.RebalanceInProgressError.errno, b""))
        if g.join_timer is not None:
            g.join_timer.cancel()
        was_empty = g.state == EMPTY
        g.state = PREPARING
        g.new_member_added = False
        if was_empty:
            delay = self._initial_delay_ms()
            timeout = g.rebalance_timeout_ms()
            first = min(delay, timeout)
            g.in_initial_delay = True
            g.initial_delay_remaining_ms = max(timeout - delay, 0)
            g.join_timer = self._later(first, self._on_initial_delay, g)
        else:
            g.in_initial_delay = False
            timeout = g.rebalance_timeout_ms()
            if self.faults.on("group.join_waits_session"):
                timeout = max([timeout, *(m.session_timeout_ms for m in g.members.values())]) * 3
            g.join_timer = self._later(timeout, self._complete_join, g)
            self._maybe_complete_join(g)

    def _initial_delay_ms(self) -> int:
        delay = self.config["group.initial.rebalance.delay.ms"]
        return delay // 4 if self.faults.on("group.initial_delay_quarter") else delay

    def _on_initial_delay(self, g: ClassicGroup) -> None:
        """InitialDelayedJoin.onComplete: extend while members keep arriving and time remains."""
        delay = self._initial_delay_ms()
        if g.new_member_added and g.initial_delay_remaining_ms > 0:
            g.new_member_added = False
            step = min(delay, g.initial_delay_remaining_ms)
            g.initial_delay_remaining_ms -= step
            g.join_timer = self._later(step, self._on_initial_delay, g)
        else:
            g.in_initial_delay = False
            self._complete_join(g)

    def _maybe_complete_join(self, g: ClassicGroup) -> None:
        if g.state == PREPARING and not g.in_initial_delay and g.all_joined():
            self._complete_join(g)

    def _complete_join(self, g: ClassicGroup) -> None:
        """GroupMetadataManager.completeClassicGroupJoin."""
        if g.state != PREPARING:
            return
        if g.join_timer is not None:
            g.join_timer.cancel()
            g.join_timer = None
        g.in_initial_delay = False
        if g.members and not any(m.awaiting_join for m in g.members.values()) and all(
                m.group_instance_id is not None for m in g.members.values()):
            # maybeElectNewJoinedLeader fails: only static members, none rejoined. Wait another rebalance timeout
            # for them (or for their sessions to expire) instead of moving to a generation nobody joined.
            g.join_timer = self._later(g.rebalance_timeout_ms(), self._complete_join, g)
            return
        for m in list(g.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                self._remove_member_quietly(g, m)
        # Pending members (MEMBER_ID_REQUIRED handed out, not yet back) stay pending across the generation, as in
        # ClassicGroup: they join later (starting another rebalance) or expire after their session timeout.
        g.generation_id += 1
        if not g.members:
            g.state = EMPTY
            g.protocol_name = None
            g.leader_id = None
            # Nobody waits for this one (GroupMetadataManager.completeClassicGroupJoin only logs a failure).
            try:
                self._wrote(g.group_id, self.store.write_group(g.group_id, g.generation_id, g.protocol_type, None), {})
            except AppendError as e:
                log.warning("group %s: empty generation %d not stored: %s", g.group_id, g.generation_id, e)
            return
        if g.leader_id not in g.members or not g.members[g.leader_id].awaiting_join:
            joined = [mid for mid, m in g.members.items() if m.awaiting_join]
            g.leader_id = joined[0] if joined else next(iter(g.members))
        g.protocol_name = g.select_protocol()
        g.state = COMPLETING
        everyone = self._members_view(g)
        if self.faults.on("group.leader_member_list_capped"):
            everyone = everyone[:16]
        to_all = self.faults.on("group.followers_get_members")
        for mid, m in g.members.items():
            if m.awaiting_join:
                m.join_future.set_result(JoinResult(
                    NONE, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id, mid,
                    everyone if mid == g.leader_id or to_all else []))
            m.is_new = False
            self._schedule_session(g, m)
        self._schedule_pending_sync(g)

    def _remove_member_quietly(self, g: ClassicGroup, m: Member) -> None:
        g.members.pop(m.member_id, None)
        g.pending_sync.discard(m.member_id)
        if m.session_timer is not None:
            m.session_timer.cancel()
        if g.leader_id == m.member_id:
            g.leader_id = None

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    # -- JoinGroup --------------------------------------------------------------------------------------------

    async def join(self, version: int, group_id: str, member_id: str, instance_id: str | None,
                   client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]]) -> JoinResult:
        cfg = self.config
        if not group_id:
            return JoinResult(E.InvalidGroupIdError.errno, member_id=member_id)
        lo, hi = cfg["group.min.session.timeout.ms"], cfg["group.max.session.timeout.ms"]
        if self.faults.on("group.session_bounds_exclusive"):
            lo, hi = lo + 1, hi - 1
        if not (lo <= session_timeout_ms <= hi) and not self.faults.on("group.session_timeout_unchecked"):
            return JoinResult(E.InvalidSessionTimeoutError.errno, member_id=member_id)
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            if g.members:
                # Kafka 4.4.0 admits classic members into a consumer group (group.consumer.migration.policy);
                # the reference does not (GAPS.md)
                return JoinResult(E.InconsistentGroupProtocolError.errno, member_id=member_id)
            classic = ClassicGroup(group_id)         # an empty consumer group becomes a classic one
            classic.offsets = g.offsets
            g = self.groups[group_id] = classic
        if g is None:
            if member_id:
                return JoinResult(E.UnknownMemberIdError.errno, member_id=member_id)
            g = self.groups[group_id] = ClassicGroup(group_id)
        if g.state == DEAD:
            return JoinResult(E.CoordinatorNotAvailableError.errno, member_id=member_id)
        if not g.supports(protocol_type, protocols):
            return JoinResult(E.InconsistentGroupProtocolError.errno, member_id=member_id)
        member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, protocols)
        if not member_id:
            return await self._join_unknown(version, g, member)
        return await self._join_known(g, member)

    async def _join_unknown(self, version: int, g: ClassicGroup, new: Member) -> JoinResult:
        new.member_id = self._new_member_id(new.client_id, new.group_instance_id)
        if new.group_instance_id is not None:
            old_id = g.static_members.get(new.group_instance_id)
            if old_id is not None and old_id in g.members:
                return await self._replace_static(version, g, g.members[old_id], new)
        elif version >= 4 and not self.faults.on("group.no_member_id_required"):
            # KIP-394: hand out the id first; the member must come back with it
            g.pending_members[new.member_id] = self._later(new.session_timeout_ms, self._expire_pending, g,
                                                           new.member_id)
            return JoinResult(MEMBER_ID_REQUIRED, member_id=new.member_id)
        return await self._add_and_join(g, new)

    def _expire_pending(self, g: ClassicGroup, member_id: str) -> None:
        if g.pending_members.pop(member_id, None) is not None or member_id not in g.members:
            self._maybe_complete_join(g)

    async def _add_and_join(self, g: ClassicGroup, m: Member) -> JoinResult:
        m.join_future = asyncio.get_running_loop().create_future()
        self._add_member(g, m)
        self._schedule_session(g, m)
        if g.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(g, f"adding member {m.member_id}")
        else:
            self._maybe_complete_join(g)
        return await m.join_future

    async def _replace_static(self, version: int, g: ClassicGroup, old: Member, new: Member) -> JoinResult:
        """KIP-345 (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin): the new member id takes
        the instance's place — with the old member's client id, host and assignment (ClassicGroup.
        replaceStaticMember), the request's protocols and timeouts — and the old id is fenced. A Stable group
        rebalances only when the protocol it would select changes; otherwise it answers at once: v9+ with the
        (possibly new) leader id, the member list for the leader and skip_assignment (KIP-814), v0-v8 with the
        leader id as it was before the replacement (``currentLeader``), which is the old id when the leader
        rejoined."""
        current_leader = g.leader_id
        del g.members[old.member_id]
        if old.member_id in g.pending_sync:
            g.pending_sync.discard(old.member_id)
            g.pending_sync.add(new.member_id)
        if old.session_timer is not None:
            old.session_timer.cancel()
        new.assignment = old.assignment
        new.client_id, new.client_host = old.client_id, old.client_host
        g.members[new.member_id] = new
        g.static_members[new.group_instance_id] = new.member_id
        if g.leader_id == old.member_id:
            g.leader_id = new.member_id
        for fut, fenced in ((old.join_future, JoinResult(E.FencedInstanceIdError.errno, member_id=old.member_id)),
                            (old.sync_future, (E.FencedInstanceIdError.errno, b""))):
            if fut is not None and not fut.done():
                fut.set_result(fenced)
        self._schedule_session(g, new)
        if g.state == STABLE and g.select_protocol() == g.protocol_name and \
                not self.faults.on("group.static_rejoin_rebalances"):
            # the selected protocol stays: no rebalance; the member keeps its assignment
            if version >= 9:
                leads = g.leader_id == new.member_id
                return JoinResult(NONE, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                                  new.member_id, self._members_view(g) if leads else [], skip_assignment=leads)
            return JoinResult(NONE, g.generation_id, g.protocol_type, g.protocol_name, current_leader or "",
                              new.member_id, [])
        new.join_future = asyncio.get_running_loop().create_future()
        if g.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(g, f"static member {new.group_instance_id} rejoined with new metadata")
        else:
            self._maybe_complete_join(g)
        return await new.join_future

    async def _join_known(self, g: ClassicGroup, req: Member) -> JoinResult:
        mid = req.member_id
        if mid in g.pending_members:
            timer = g.pending_members.pop(mid)
            if timer is not None:
                timer.cancel()
            return await self._add_and_join(g, req)
        try:
            g.validate_member(mid, req.group_instance_id)
        except GroupError as e:
            return JoinResult(e.code, member_id=mid)
        if g.state in (EMPTY, DEAD):
            return JoinResult(E.UnknownMemberIdError.errno, member_id=mid)
        m = g.members[mid]
        if not m.matches(req.protocols) and self.faults.on("group.fence_on_metadata_change"):
            self._remove_member(g, m, "rejoined with changed metadata")
            return JoinResult(E.UnknownMemberIdError.errno, member_id=mid)
        if m.awaiting_join and not m.join_future.done():
            m.join_future.set_result(JoinResult(E.UnknownMemberIdError.errno, member_id=mid))  # superseded
        m.join_future = asyncio.get_running_loop().create_future()
        fut = m.join_future
        changed = not m.matches(req.protocols)
        m.protocols = req.protocols
        m.session_timeout_ms = req.session_timeout_ms
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._schedule_session(g, m)
        if g.state == PREPARING:
            self._maybe_complete_join(g)
        elif g.state == COMPLETING:
            if not changed:
                # the member missed its JoinGroup answer: send the current one again
                fut.set_result(JoinResult(NONE, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                                          mid, self._members_view(g) if mid == g.leader_id else []))
            else:
                self._prepare_rebalance(g, f"member {mid} changed its protocols")
        elif g.state == STABLE:
            if mid == g.leader_id or changed:
                self._prepare_rebalance(g, f"member {mid} rejoined ({'leader' if not changed else 'new metadata'})")
            else:
                fut.set_result(JoinResult(NONE, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                                          mid, []))
        return await fut

    def _members_view(self, g: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
        return [(mid, m.group_instance_id, m.metadata_for(g.protocol_name)) for mid, m in g.members.items()]

    # -- SyncGroup --------------------------------------------------------------------------------------------

    async def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> tuple[int, bytes, ClassicGroup | None]:
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return E.UnknownMemberIdError.errno, b"", None
        if g is None or g.state == EMPTY:
            return E.UnknownMemberIdError.errno, b"", g
        if g.state == DEAD:
            return E.CoordinatorNotAvailableError.errno, b"", g
        try:
            g.validate_member(member_id, instance_id)
        except GroupError as e:
            if self.faults.on("group.sync_unknown_member_ok") and e.code == E.UnknownMemberIdError.errno:
                return NONE, b"", g
            return e.code, b"", g
        if generation_id != g.generation_id and not self.faults.on("group.ignore_generation"):
            return E.IllegalGenerationError.errno, b"", g
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
                protocol_name is not None and protocol_name != g.protocol_name):
            return E.InconsistentGroupProtocolError.errno, b"", g
        m = g.members[member_id]
        if g.state == PREPARING:
            if self.faults.on("group.sync_in_preparing_ok"):
                return NONE, m.assignment, g
            return E.RebalanceInProgressError.errno, b"", g
        g.pending_sync.discard(member_id)       # removePendingSyncMember (CompletingRebalance and Stable)
        if not g.pending_sync and g.sync_timer is not None:
            g.sync_timer.cancel()
            g.sync_timer = None
        if g.state == STABLE:
            self._schedule_session(g, m)
            return *m.sync_answer(), g
        # CompletingRebalance: park until the leader's assignment arrives
        m.sync_future = asyncio.get_running_loop().create_future()
        fut = m.sync_future
        self._schedule_session(g, m)
        if member_id == g.leader_id:
            self._store_assignment(g, assignments)
        err, assignment = await fut
        return err, assignment, g

    def _store_assignment(self, g: ClassicGroup, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup: write the generation with its assignment, and only once that is committed move
        to Stable and answer the parked syncs (GroupMetadataManager.classicGroupSyncToClassicGroup's appendFuture);
        a write that fails or times out answers them with the error and the group rebalances."""
        generation = g.generation_id
        try:
            end = self.store.write_group(g.group_id, generation, g.protocol_type, g.protocol_name)
        except AppendError as e:
            self._assignment_failed(g, append_error(e.code))
            return
        index = self._wrote(g.group_id, end, {})
        self._spawn(self._await_assignment(g, generation, dict(assignments), index, end))

    async def _await_assignment(self, g: ClassicGroup, generation: int, assignments: dict[str, bytes], index: int,
                                end: int) -> None:
        err = await self._committed(index, end)
        if self.groups.get(g.group_id) is not g or g.state != COMPLETING or g.generation_id != generation:
            return      # another member joined meanwhile, or the group moved away: that path answered everyone
        if err:
            self._assignment_failed(g, err)
            return
        refuse = self.faults.on("group.left_out_member_refused")
        for mid, mem in g.members.items():
            mem.assignment = assignments.get(mid, b"")  # members the leader left out: empty, no error
            mem.sync_refused = refuse and mid not in assignments
        g.state = STABLE
        for mem in g.members.values():
            if mem.awaiting_sync:
                self._answer_sync(g, mem, mem.sync_answer())

    def _assignment_failed(self, g: ClassicGroup, err: int) -> None:
        """resetAndPropagateAssignmentWithError, then a new rebalance."""
        for m in g.members.values():
            m.assignment = b""
            if m.awaiting_sync:
                self._answer_sync(g, m, (err, b""))
        self._prepare_rebalance(g, f"error {err} storing the assignment")

    def _answer_sync(self, g: ClassicGroup, m: Member, answer: tuple[int, bytes]) -> None:
        """Answer a parked SyncGroup and restart the member's session (GroupMetadataManager.propagateAssignment):
        its session may have run out while it was parked, when expiry only checks again later."""
        m.sync_future.set_result(answer)
        self._schedule_session(g, m)

    # -- Heartbeat --------------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        """GroupMetadataManager.classicGroupHeartbeat."""
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return E.UnknownMemberIdError.errno           # not a classic member (Kafka 4.4.0, as observed)
        if g is not None and member_id in g.expired and member_id not in g.members:
            return NONE                                   # group.expired_member_zombie
        if g is None or g.state == EMPTY:
            return E.UnknownMemberIdError.errno
        if g.state == DEAD:
            return E.CoordinatorNotAvailableError.errno
        try:
            g.validate_member(member_id, instance_id)
        except GroupError as e:
            return self._fenced_code(e.code)
        if generation_id != g.generation_id and not self.faults.on("group.ignore_generation"):
            return E.IllegalGenerationError.errno
        self._schedule_session(g, g.members[member_id])
        if g.state == PREPARING and not self.faults.on("group.no_rebalance_signal"):
            return E.RebalanceInProgressError.errno
        if g.state == COMPLETING and self.faults.on("group.heartbeat_completing_rebalancing"):
            return E.RebalanceInProgressError.errno
        return NONE

    def _fenced_code(self, code: int) -> int:
        if code == E.FencedInstanceIdError.errno and self.faults.on("group.fenced_as_unknown"):
            return E.UnknownMemberIdError.errno
        return code

    # -- LeaveGroup -------------------------------------------------------------------------------------------

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors). A static member may be removed by instance id alone."""
        g = self.groups.get(group_id)
        if g is None or isinstance(g, ConsumerGroup):
            return NONE, [E.UnknownMemberIdError.errno for _ in members]
        if g.state == DEAD:
            return E.CoordinatorNotAvailableError.errno, []
        errors = []
        for mid, iid in members:
            if iid is not None:
                existing = g.static_members.get(iid)
                if existing is None:
                    errors.append(E.UnknownMemberIdError.errno)
                    continue
                if mid and mid != existing:
                    errors.append(E.FencedInstanceIdError.errno)
                    continue
                mid = existing
            if mid in g.pending_members:
                timer = g.pending_members.pop(mid)
                if timer is not None:
                    timer.cancel()
                self._maybe_complete_join(g)
                errors.append(NONE)
                continue
            m = g.members.get(mid)
            if m is None:
                errors.append(E.UnknownMemberIdError.errno)
                continue
            quiet = self.faults.on("group.leave_no_rebalance") and g.state == STABLE and len(g.members) > 1
            self._remove_member(g, m, "left the group", rebalance=not quiet)
            errors.append(NONE)
        return NONE, errors


    # -- ConsumerGroupHeartbeat (KIP-848; GroupMetadataManager.consumerGroupHeartbeat) --------------------------

    def consumer_heartbeat(self, version: int, group_id: str, member_id: str, member_epoch: int,
                           instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                           subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                           server_assignor: str | None, owned: Assignment | None, client_id: str,
                           client_host: str, topics: dict[str, int]) -> ConsumerHeartbeatResult:
        """One heartbeat; ``owned`` the partitions the member says it holds (None: not sent), ``topics`` every
        non-internal topic with its partition count (the metadata the assignment is computed from)."""
        bad = self.validate_consumer_heartbeat(version, group_id, member_id, member_epoch, instance_id, rack_id,
                                               rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                               server_assignor, owned)
        if bad is not None:
            return bad
        if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._consumer_leave(group_id, member_id, instance_id, member_epoch, topics)
        try:
            return self._consumer_heartbeat(group_id, member_id, member_epoch, instance_id, rack_id,
                                            rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                            server_assignor, owned, client_id, client_host, topics)
        except GroupError as e:
            return ConsumerHeartbeatResult(e.code, str(e))

    def validate_consumer_heartbeat(self, version, group_id, member_id, member_epoch, instance_id, rack_id,
                                    rebalance_timeout_ms, names, regex, assignor,
                                    owned) -> ConsumerHeartbeatResult | None:
        """throwIfConsumerGroupHeartbeatRequestIsInvalid, in Kafka's order and words."""
        def invalid(msg: str) -> ConsumerHeartbeatResult:
            return ConsumerHeartbeatResult(E.InvalidRequestError.errno, msg)
        if version >= 1 and not member_id:
            return invalid("MemberId can't be empty.")
        if not group_id:
            return invalid("GroupId can't be empty.")
        if instance_id == "":
            return invalid("InstanceId can't be empty.")
        if rack_id == "":
            return invalid("RackId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_EPOCH:
            if not member_id:
                return invalid("MemberId can't be empty.")
        elif member_epoch == 0:
            if rebalance_timeout_ms == -1:
                return invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                return invalid("TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                               "(re-)joining.")
        elif member_epoch == LEAVE_STATIC_EPOCH:
            if not member_id:
                return invalid("MemberId can't be empty.")
            if instance_id is None:
                return invalid("InstanceId can't be null.")
        else:
            return invalid("MemberEpoch is invalid.")
        if regex:
            try:
                re.compile(regex)
            except re.error as e:
                return ConsumerHeartbeatResult(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is "
                                               f"not a valid regular expression: {e}.")
        if assignor is not None and assignor not in self.assignors and not self.faults.on("consumer.any_assignor"):
            return ConsumerHeartbeatResult(E.UnsupportedAssignorError.errno,
                                           f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                           f"{', '.join(self.assignors)}.")
        return None

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup:
        """getOrMaybeCreateConsumerGroup: an empty classic group (offsets only) becomes a consumer group keeping
        its offsets; a classic group with members is not a consumer group (online migration is a GAPS row)."""
        g = self.groups.get(group_id)
        if g is None and not create:
            raise GroupError(E.GroupIdNotFoundError.errno, f"Consumer group {group_id} not found.")
        if isinstance(g, ConsumerGroup):
            return g
        if g is not None and not (create and g.state in (EMPTY, DEAD)):
            raise GroupError(E.GroupIdNotFoundError.errno, f"Group {group_id} is not a consumer group.")
        cg = ConsumerGroup(group_id)
        cg.regex_search = self.faults.on("consumer.regex_search")
        if g is not None:
            cg.offsets = g.offsets
        self.groups[group_id] = cg
        return cg

    def _store_consumer_group(self, g: ConsumerGroup) -> None:
        """Write the group's existence to its offsets partition (once), so a coordinator that takes over (failover,
        restart) knows it: its members then get UNKNOWN_MEMBER_ID and rejoin, instead of GROUP_ID_NOT_FOUND, which
        the Java client treats as fatal (AbstractHeartbeatRequestManager). Nobody waits for it."""
        if g.stored:
            return
        try:
            self._wrote(g.group_id, self.store.write_consumer_group(g.group_id, g.group_epoch), {})
            g.stored = True
        except AppendError as e:
            log.warning("group %s: consumer group not stored: %s", g.group_id, e)

    def _consumer_heartbeat(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                            names, regex, assignor, owned, client_id, client_host,
                            topics) -> ConsumerHeartbeatResult:
        create = member_epoch == 0
        existed = group_id in self.groups
        g = self._consumer_group(group_id, create)
        try:
            r = self._consumer_heartbeat_in(g, member_id, member_epoch, instance_id, rack_id,
                                            rebalance_timeout_ms, names, regex, assignor, owned, client_id,
                                            client_host, topics)
            self._store_consumer_group(g)
            return r
        except GroupError:
            if not existed and not g.members and self.groups.get(group_id) is g:
                del self.groups[group_id]       # a group created by a refused join leaves no trace
            raise

    def _consumer_heartbeat_in(self, g: ConsumerGroup, member_id, member_epoch, instance_id, rack_id,
                               rebalance_timeout_ms, names, regex, assignor, owned, client_id, client_host,
                               topics) -> ConsumerHeartbeatResult:
        cfg = self.config
        if len(g.members) >= cfg["group.consumer.max.size"] and (not member_id or member_id not in g.members):
            raise GroupError(E.GroupMaxSizeReachedError.errno, "The consumer group has reached its maximum "
                             f"capacity of {cfg['group.consumer.max.size']} members.")
        if not member_id:
            member_id = str(uuid_b64(self.rng))              # v0: the coordinator names the member
        owned_set = partitions_of(owned) if owned is not None else None
        replaced: ConsumerMember | None = None
        if instance_id is None:
            member = g.members.get(member_id)
            if member is None:
                if member_epoch != 0:
                    raise GroupError(E.UnknownMemberIdError.errno,
                                     f"Member {member_id} is not a member of group {g.group_id}.")
                member = ConsumerMember(member_id)
            elif member_epoch == 0:
                member = self._rejoined(g, member)
            else:
                self._check_epoch(member, member_epoch, owned_set)
        else:
            existing_id = g.static_members.get(instance_id)
            existing = g.members.get(existing_id) if existing_id is not None else None
            if member_epoch == 0:
                if existing is None:
                    member = g.members.get(member_id) or ConsumerMember(member_id)
                elif existing.epoch != LEAVE_STATIC_EPOCH and not self.faults.on("consumer.static_replace_live"):
                    raise GroupError(E.UnreleasedInstanceIdError.errno,
                                     f"Static member {existing.member_id} with instance id {instance_id} is not "
                                     "released yet.")
                else:
                    # the new instance takes over the old one's assignment (ConsumerGroupMember.Builder(existing,
                    # memberId) with epoch 0): no rebalance
                    replaced = existing
                    member = ConsumerMember(**{**existing.__dict__, "member_id": member_id, "epoch": 0,
                                                "previous_epoch": 0})
            else:
                if existing is None:
                    raise GroupError(E.UnknownMemberIdError.errno,
                                     f"Instance id {instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise GroupError(E.FencedInstanceIdError.errno,
                                     f"Static member {member_id} with instance id {instance_id} was fenced by "
                                     f"member {existing.member_id}.")
                member = existing
                self._check_epoch(member, member_epoch, owned_set)
        updated = ConsumerMember(**{**member.__dict__})
        if instance_id is not None:
            updated.instance_id = instance_id
        if rack_id is not None:
            updated.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = rebalance_timeout_ms
        if assignor is not None:
            updated.server_assignor = assignor
        if names is not None:
            updated.subscribed_topic_names = sorted(set(names))
        if regex is not None:
            updated.subscribed_topic_regex = regex or None
        updated.client_id, updated.client_host = client_id, client_host
        is_new = member_id not in g.members and replaced is None
        bump = is_new or (updated.subscribed_topic_names != member.subscribed_topic_names
                          or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        if replaced is not None:
            target = g.target.get(replaced.member_id, {})
            g.remove_member(replaced.member_id)
            self._cancel_cg_timers(g.group_id, replaced.member_id)
            g.target[member_id] = target
        g.put_member(updated)
        metadata = self._subscription_metadata(g, topics)
        if self.faults.on("consumer.metadata_not_refreshed") and not bump:
            metadata = g.subscription_metadata
        if metadata != g.subscription_metadata:
            g.subscription_metadata = metadata
            bump = True
        chosen = self._group_assignor(g)
        if bump or chosen != g.assignor:          # another assignor is another target: a new group epoch
            g.group_epoch += 1
        if g.group_epoch > g.assignment_epoch:
            g.compute_target(topics, chosen)
        target = g.target.get(member_id, {})
        before = g.members[member_id]
        after = reconcile(before, g.assignment_epoch, target, g.partition_epoch, owned_set,
                          revoke_first=not self.faults.on("consumer.assign_before_revoke"))
        if after is not before:
            g.put_member(after)
            if after.state == UNREVOKED and not self.faults.on("consumer.no_rebalance_timeout"):
                if before.state != UNREVOKED or before.epoch != after.epoch:
                    self._cg_timer(g, member_id, "rebalance", after.rebalance_timeout_ms, after.epoch)
            else:
                self._cancel_cg_timer(g.group_id, member_id, "rebalance")
        self._cg_timer(g, member_id, "session", self._session_ms(), None)
        full = member_epoch == 0 or (rebalance_timeout_ms != -1 and names is not None and owned is not None)
        changed = after.assigned != before.assigned
        if member_epoch == 0 and self.faults.on("consumer.join_answer_no_assignment"):
            full = changed = False
        return ConsumerHeartbeatResult(
            NONE, None, member_id, after.epoch, cfg["group.consumer.heartbeat.interval.ms"],
            {t: set(ps) for t, ps in after.assigned.items()} if full or changed else None)

    def _rejoined(self, g: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
        """A known member joining again with epoch 0 (it lost its state, e.g. after FENCED_MEMBER_EPOCH): it holds
        nothing any more, so its partitions are released and it reconciles from scratch (Kafka 4.4.0 accepts it)."""
        fresh = ConsumerMember(**{**member.__dict__, "epoch": 0, "previous_epoch": 0, "state": "STABLE",
                                  "assigned": {}, "pending_revocation": {},
                                  "assigned_epochs": {}})
        g.put_member(fresh)
        return fresh

    def _check_epoch(self, member: ConsumerMember, epoch: int, owned: set[TP] | None) -> None:
        """throwIfConsumerGroupMemberEpochIsInvalid: a greater epoch is fenced; a smaller one only passes when it
        is the previous epoch and the member owns no more than its assignment (the answer that bumped it may
        have been lost)."""
        if self.faults.on("consumer.accept_any_epoch"):
            return
        if epoch > member.epoch:
            raise GroupError(E.FencedMemberEpochError.errno, f"The consumer group member has a greater member "
                             f"epoch ({epoch}) than the one known by the group coordinator ({member.epoch}). The "
                             "member must abandon all its partitions and rejoin.")
        if epoch < member.epoch and (epoch != member.previous_epoch or owned is None
                                     or not owned <= partitions_of(member.assigned)):
            raise GroupError(E.FencedMemberEpochError.errno, f"The consumer group member has a smaller member "
                             f"epoch ({epoch}) than the one known by the group coordinator ({member.epoch}). The "
                             "member must abandon all its partitions and rejoin.")

    def _subscription_metadata(self, g: ConsumerGroup, topics: dict[str, int]) -> dict[str, int]:
        return {t: topics[t] for t in g.subscribed_topics(topics) if t in topics}

    def _group_assignor(self, g: ConsumerGroup) -> str:
        """ConsumerGroup.computePreferredServerAssignor: the assignor most members ask for, else the default."""
        votes: dict[str, int] = {}
        for m in g.members.values():
            if m.server_assignor in self.assignors:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.assignors[0]
        return max(sorted(votes), key=lambda a: votes[a])

    def _session_ms(self) -> int:
        ms = self.config["group.consumer.session.timeout.ms"]
        if self.faults.on("consumer.session_expires_early"):
            return ms // 2
        return ms * 4 if self.faults.on("consumer.session_never_expires") else ms

    def _cg_timer(self, g: ConsumerGroup, member_id: str, kind: str, ms: int, epoch: int | None) -> None:
        self._cancel_cg_timer(g.group_id, member_id, kind)
        self._cg_timers[(g.group_id, member_id, kind)] = self._later(
            ms, self._on_cg_timeout, g, member_id, kind, epoch)

    def _cancel_cg_timer(self, group_id: str, member_id: str, kind: str) -> None:
        t = self._cg_timers.pop((group_id, member_id, kind), None)
        if t is not None:
            t.cancel()

    def _cancel_cg_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("session", "rebalance"):
            self._cancel_cg_timer(group_id, member_id, kind)

    def _on_cg_timeout(self, g: ConsumerGroup, member_id: str, kind: str, epoch: int | None) -> None:
        """Session expiry, or a member that did not revoke within its rebalance timeout: it is fenced (removed)
        and the group epoch bumped so the others take its partitions (GroupMetadataManager.
        consumerGroupFenceMember)."""
        self._cg_timers.pop((g.group_id, member_id, kind), None)
        m = g.members.get(member_id)
        if self.groups.get(g.group_id) is not g or m is None:
            return
        if kind == "rebalance" and (m.state != UNREVOKED or m.epoch != epoch):
            return
        if kind == "session" and m.state == UNREVOKED and self.faults.on("consumer.unrevoked_member_kept"):
            self._cg_timer(g, member_id, "session", self._session_ms(), None)   # (test-only: the wedge)
            return
        log.info("group %s: consumer member %s fenced (%s timeout)", g.group_id, member_id, kind)
        self._fence_member(g, member_id)

    def _fence_member(self, g: ConsumerGroup, member_id: str, topics: dict[str, int] | None = None) -> None:
        self._cancel_cg_timers(g.group_id, member_id)
        g.remove_member(member_id)
        g.group_epoch += 1
        known = topics if topics is not None else g.subscription_metadata
        g.subscription_metadata = self._subscription_metadata(g, known)
        g.compute_target(known, self._group_assignor(g))

    def _consumer_leave(self, group_id: str, member_id: str, instance_id: str | None, epoch: int,
                        topics: dict[str, int]) -> ConsumerHeartbeatResult:
        """consumerGroupLeave: -1 removes the member (the group rebalances); -2 (static) keeps its assignment for
        the instance's next member until the session times out."""
        g = self.groups.get(group_id)
        if not isinstance(g, ConsumerGroup):
            return ConsumerHeartbeatResult(E.GroupIdNotFoundError.errno, f"Consumer group {group_id} not found.")
        if instance_id is not None:
            mid = g.static_members.get(instance_id)
            if mid is None:
                return ConsumerHeartbeatResult(E.UnknownMemberIdError.errno, f"Instance id {instance_id} is unknown.")
            if mid != member_id:
                return ConsumerHeartbeatResult(E.FencedInstanceIdError.errno, f"Static member {member_id} with "
                                               f"instance id {instance_id} was fenced by member {mid}.")
        m = g.members.get(member_id)
        if m is None:
            return ConsumerHeartbeatResult(E.UnknownMemberIdError.errno,
                                           f"Member {member_id} is not a member of group {group_id}.")
        if epoch == LEAVE_STATIC_EPOCH and not self.faults.on("consumer.static_leave_is_leave"):
            g.members[member_id] = ConsumerMember(**{**m.__dict__, "epoch": LEAVE_STATIC_EPOCH})
            self._cancel_cg_timer(group_id, member_id, "rebalance")
            self._cg_timer(g, member_id, "session", self._session_ms(), None)
        elif self.faults.on("consumer.leave_no_rebalance"):
            self._cancel_cg_timers(group_id, member_id)
            g.remove_member(member_id)
        else:
            self._fence_member(g, member_id, topics)
            if self.faults.on("consumer.group_epoch_reset_on_leave"):
                g.group_epoch = g.assignment_epoch = len(g.members)
        return ConsumerHeartbeatResult(NONE, None, member_id, epoch, 0, None)

    # -- offsets ----------------------------------------------------------------------------------------------

    def validate_commit(self, group_id: str, generation_id: int, member_id: str,
                        instance_id: str | None, version: int, *,
                        transactional: bool = False) -> tuple[int, ClassicGroup | None]:
        """OffsetMetadataManager.validateOffsetCommit / validateTransactionalOffsetCommit + ClassicGroup.
        validateOffsetCommit (Kafka 4). ``transactional`` (TxnOffsetCommit): an unknown group with a generation is
        ILLEGAL_GENERATION at every version (abortable for the producer, where GROUP_ID_NOT_FOUND would be fatal),
        and neither the group's state (no member id: no UNKNOWN_MEMBER_ID) nor a rebalance being completed
        refuses the commit."""
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return self._validate_consumer_commit(g, generation_id, member_id, version, transactional), g
        if g is None:
            if generation_id < 0:
                g = self.groups[group_id] = ClassicGroup(group_id)   # a "simple" group: offsets only
                return NONE, g
            if transactional and not self.faults.on("txn.offset_commit_group_not_found"):
                return E.IllegalGenerationError.errno, None
            return (GROUP_ID_NOT_FOUND if transactional or version >= 9 else E.IllegalGenerationError.errno), None
        if g.state == DEAD:
            return E.CoordinatorNotAvailableError.errno, g
        if generation_id < 0 and g.state == EMPTY:
            return NONE, g
        if generation_id >= 0 or member_id or instance_id is not None:
            try:
                g.validate_member(member_id, instance_id)
            except GroupError as e:
                return self._fenced_code(e.code), g
            if generation_id != g.generation_id and not self.faults.on("offsets.accept_stale_generation"):
                return E.IllegalGenerationError.errno, g
        elif g.state != EMPTY and not transactional:
            return E.UnknownMemberIdError.errno, g
        if transactional:
            return NONE, g
        if g.state == COMPLETING and not self.faults.on("group.commit_in_completing_ok"):
            return E.RebalanceInProgressError.errno, g
        if g.state == PREPARING and self.faults.on("group.commit_in_preparing_refused"):
            return E.RebalanceInProgressError.errno, g
        return NONE, g

    def _validate_consumer_commit(self, g: ConsumerGroup, epoch: int, member_id: str, version: int,
                                  transactional: bool) -> int:
        """ConsumerGroup.validateOffsetCommit / validateTransactionalOffsetCommit (Kafka 4.4.0, as observed): an
        empty group takes commits without a member (epoch < 0); otherwise the member must exist (UNKNOWN_MEMBER_ID),
        commit with OffsetCommit v9+ (UNSUPPORTED_VERSION) and name its current member epoch
        (STALE_MEMBER_EPOCH, whatever the direction of the difference)."""
        if epoch < 0 and (not g.members or (transactional and not member_id)):
            return NONE
        m = g.members.get(member_id)
        if m is None:
            return E.UnknownMemberIdError.errno
        if not transactional and version < 9:
            return E.UnsupportedVersionError.errno
        if epoch > m.epoch and not self.faults.on("consumer.commit_ignores_member_epoch"):
            return E.StaleMemberEpochError.errno
        return NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int:
        """OffsetFetch v9+: ConsumerGroup.validateOffsetFetch (Kafka 4.4.0) — no member id and a negative epoch is an
        admin; otherwise the member must exist at exactly that epoch. Classic and unknown groups: no check."""
        g = self.groups.get(group_id)
        if not isinstance(g, ConsumerGroup) or (member_id is None and epoch < 0):
            return NONE
        m = g.members.get(member_id or "")
        if m is None:
            return E.UnknownMemberIdError.errno
        if epoch != m.epoch and not self.faults.on("consumer.commit_ignores_member_epoch"):
            return E.StaleMemberEpochError.errno
        return NONE

    def consumer_commit_partition_error(self, g: ConsumerGroup | ClassicGroup, member_id: str, epoch: int,
                                        tp: TP) -> int:
        """ConsumerGroup's per-partition check of a commit with an older member epoch (Kafka 4.4.0's
        createAssignmentEpochValidator, read from its behaviour): the partition must be assigned to (or being
        revoked from) the member since an epoch no later than the one committed with, else STALE_MEMBER_EPOCH."""
        if not isinstance(g, ConsumerGroup) or self.faults.on("consumer.commit_ignores_member_epoch"):
            return NONE
        m = g.members.get(member_id)
        if m is None or epoch < 0 and not g.members or epoch >= m.epoch:
            return NONE
        since = m.assigned_epochs.get(tp)
        if since is None or epoch < since:
            return E.StaleMemberEpochError.errno
        return NONE

    async def commit(self, g: ClassicGroup, offsets: dict[TP, OffsetAndMetadata]) -> int:
        """Append the commit to the group's offsets partition and wait until it is committed; 0 or the error for
        every partition of the request. Readers see the offsets once the HW passed them, whatever this answer."""
        if not offsets:
            return 0
        before = {tp: g.offsets.get(tp) for tp in offsets}
        try:
            end = self.store.write_offsets(g.group_id, offsets)
        except AppendError as e:
            return append_error(e.code)
        g.offsets.update(offsets)
        return await self._committed(self._wrote(g.group_id, end, before), end)

    async def txn_commit(self, g: ClassicGroup, producer_id: int, producer_epoch: int,
                         offsets: dict[TP, OffsetAndMetadata]) -> int:
        """TxnOffsetCommit: append the offsets as the producer's transactional batch; they stay pending (invisible
        to OffsetFetch, UNSTABLE_OFFSET_COMMIT for require_stable) until the transaction's marker arrives."""
        if not offsets:
            return 0
        if self.faults.on("txn.offsets_eager"):
            return await self.commit(g, offsets)
        try:
            end = self.store.write_txn_offsets(g.group_id, producer_id, producer_epoch, offsets)
        except AppendError as e:
            return append_error(e.code)
        index = self.partition_of(g.group_id)
        self.pending_txn.setdefault(index, {}).setdefault(producer_id, {}).setdefault(g.group_id, {}).update(offsets)
        return await self._committed(index, end)

    def complete_txn(self, index: int, producer_id: int, commit: bool, end: int, replaying: bool = False) -> None:
        """A transaction marker was appended to offsets partition ``index`` (ending at ``end``): the producer's
        pending offsets apply (COMMIT), visible once the HW passes the marker, or are dropped (ABORT)
        (GroupCoordinator.onTransactionCompleted / OffsetMetadataManager.replayEndTransactionMarker)."""
        pending = self.pending_txn.get(index, {}).pop(producer_id, {})
        if not commit:
            return
        for gid, offsets in pending.items():
            g = self.groups.get(gid)
            if g is None:
                g = self.groups[gid] = ClassicGroup(gid)
            before = {tp: g.offsets.get(tp) for tp in offsets}
            g.offsets.update(offsets)
            if not replaying:
                self._wrote(gid, end, before)

    def has_pending_txn(self, group_id: str, tp: TP) -> bool:
        """A transactional offset commit for ``tp`` waits for its marker (hasPendingTransactionalOffsets)."""
        if self.faults.on("txn.ignore_require_stable"):
            return False
        return any(tp in by_group.get(group_id, {})
                   for by_group in self.pending_txn.get(self.partition_of(group_id), {}).values())

    def fetch_offsets(self, group_id: str, stable: bool = False) -> dict[TP, OffsetAndMetadata]:
        """What OffsetFetch serves: the committed offsets (``stable``: the latest, after :meth:`wait_stable`)."""
        if stable or self.faults.on("offsets.visible_before_committed"):
            g = self.groups.get(group_id)
            return dict(g.offsets) if g is not None else {}
        return self.committed_offsets(group_id)

    # -- admin ------------------------------------------------------------------------------------------------

    def describe(self, group_id: str) -> dict[str, Any]:
        """GroupMetadataManager.describeGroups: the protocol and member metadata only when Stable; each member's
        assignment in every state — the last generation's, kept through PreparingRebalance and CompletingRebalance
        until a rebalance starts from CompletingRebalance or storing the next one fails (both clear it)."""
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            # GroupMetadataManager.describeGroups: not a classic group → Dead (v6+: GROUP_ID_NOT_FOUND)
            return {"state": DEAD, "protocol_type": "", "protocol": "", "members": []}
        if g is None:
            dead = EMPTY if self.faults.on("group.describe_unknown_empty") else DEAD
            return {"state": dead, "protocol_type": "", "protocol": "", "members": []}
        stable = g.state == STABLE
        state = STABLE if g.state == COMPLETING and self.faults.on("group.describe_completing_as_stable") else g.state
        return {"state": state, "protocol_type": g.protocol_type or "",
                "protocol": g.protocol_name or "" if stable else "",
                "members": [(mid, m.group_instance_id, m.client_id, m.client_host,
                             m.metadata_for(g.protocol_name) if stable else b"",
                             m.assignment) for mid, m in g.members.items()]}

    async def delete_group(self, group_id: str) -> int:
        """DeleteGroups: tombstones for the group and its offsets; answered once they are committed (readers keep
        seeing the offsets until then)."""
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return GROUP_ID_NOT_FOUND
        if g.state != EMPTY:
            return NON_EMPTY_GROUP
        try:
            end = self.store.delete_group(group_id, list(g.offsets))
        except AppendError as e:
            return append_error(e.code)
        if isinstance(g, ConsumerGroup):
            g.dead = True
        else:
            g.state = DEAD
        del self.groups[group_id]
        return await self._committed(self._wrote(group_id, end, dict(g.offsets)), end)

    def subscribed_topics(self, g: ClassicGroup) -> set[str] | None:
        """Topics the group's members subscribe to (consumer protocol), or None if unknown."""
        if isinstance(g, ConsumerGroup):
            return set(g.subscription_metadata) | {t for m in g.members.values() for t in m.subscribed_topic_names}
        if g.protocol_type != "consumer" or g.protocol_name is None:
            return None
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub
        topics: set[str] = set()
        for m in g.members.values():
            meta = m.metadata_for(g.protocol_name)
            try:
                version = min(int.from_bytes(meta[:2], "big", signed=True), Sub.max_version)
                topics.update(Sub.decode(meta[2:], version=version).topics)
            except Exception:   # not the consumer embedded protocol we know: be conservative
                return None
        return topics

    def validate_offset_delete(self, g: ClassicGroup | None) -> int:
        """ClassicGroup.validateOffsetDelete: Dead/unknown → GROUP_ID_NOT_FOUND; a non-empty group that does not
        use the consumer protocol → NON_EMPTY_GROUP (its subscriptions cannot be known)."""
        if g is None or g.state == DEAD:
            return GROUP_ID_NOT_FOUND
        if g.state != EMPTY and g.protocol_type != "consumer":
            return NON_EMPTY_GROUP
        return NONE

    async def delete_offsets(self, g: ClassicGroup, tps: list[TP]) -> tuple[int, dict[TP, int]]:
        """OffsetDelete: (error, per-partition errors); GROUP_SUBSCRIBED_TO_TOPIC for topics a non-empty consumer
        group subscribes to; the answer waits until the tombstones are committed."""
        result = {}
        subscribed = self.subscribed_topics(g) if g.state != EMPTY else set()
        deletable = []
        for tp in tps:
            if g.state != EMPTY and (subscribed is None or tp[0] in subscribed):
                result[tp] = GROUP_SUBSCRIBED_TO_TOPIC
            else:
                result[tp] = NONE
                if tp in g.offsets:
                    deletable.append(tp)
        if not deletable:
            return NONE, result
        before = {tp: g.offsets.get(tp) for tp in deletable}
        try:
            end = self.store.delete_offsets(g.group_id, deletable)
        except AppendError as e:
            return append_error(e.code), result
        for tp in deletable:
            g.offsets.pop(tp, None)
        return await self._committed(self._wrote(g.group_id, end, before), end), result
