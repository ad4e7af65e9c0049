"""Classic group rebalances as Kafka's ClassicGroup runs them, observed over the wire with exact error codes.

What is checked: the state machine (Empty → PreparingRebalance → CompletingRebalance → Stable, seen through
DescribeGroups), rebalances on join / leave / session timeout, the error codes members get while a rebalance is
in progress (Heartbeat, SyncGroup, OffsetCommit), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED
(KIP-394), INVALID_SESSION_TIMEOUT, static membership (KIP-345) and cooperative incremental rebalancing
(KIP-429, with confluent-kafka's cooperative-sticky assignor).

Interrupted conversations: members that disconnect while their JoinGroup or SyncGroup is parked (the leader
too), a leader that never sends the assignment, members that come back after their session expired, 20 members
joining at once. Each
is driven by a minimal classic consumer loop per member (join, sync, heartbeat, rejoin on REBALANCE_IN_PROGRESS)
until the group is Stable again; a group that does not recover within Kafka's timeouts is a divergence whose
evidence is the timeline (every request and answer with its send/answer times, ``notes.timeline``).

Timing: checks need the broker's group.initial.rebalance.delay.ms and group.min.session.timeout.ms. They are read
with DescribeConfigs where the target serves it, from the settings of a reference target, else Kafka's defaults
(3000 ms, 6000 ms) are assumed and only used to size waits. Where a target does not reveal its settings, a timing
or bound that disagrees with the defaults is measured and reported, and only called a divergence when no Kafka
configuration could produce it. Session and rebalance timeouts are the member's own (sent in JoinGroup), so the
expiry checks compare against them on every target: removal at about the session timeout, never much earlier or
later (SLACK below). Against the reference broker with default settings the
module starts its own reference broker (same faults) with a short delay and low minimum session timeout, so the
suite runs in seconds; every group name is unique, so checks never see each other's groups.
"""
from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from conformance.rules import rule
from conformance.wire import Wire
from fixtures.target import Target

SUITE = "rebalance"
CG = "org.apache.kafka.coordinator.group"

rule("GROUP-DESCRIBE-DEAD", "DescribeGroups (v0-v5) for a group the coordinator does not know answers state Dead, "
     "no members, error NONE", f"{CG}.GroupMetadataManager.describeGroups (group not found → DEAD)", SUITE)
rule("GROUP-STATES", "a classic group moves Empty → PreparingRebalance → CompletingRebalance → Stable and back to "
     "Empty when its last member leaves, as DescribeGroups reports",
     f"{CG}.classic.ClassicGroup.transitionTo / ClassicGroupState valid previous states", SUITE)
rule("GROUP-INITIAL-DELAY", "the first rebalance of an Empty group completes no earlier than "
     "group.initial.rebalance.delay.ms", f"{CG}.GroupMetadataManager.maybePrepareRebalanceOrCompleteJoin "
     "(InitialDelayedJoin; KIP-134)", SUITE)
rule("GROUP-MEMBER-ID-REQUIRED", "JoinGroup v4+ without a member id (and no group.instance.id) answers "
     "MEMBER_ID_REQUIRED with a member id; joining again with it succeeds; v3 joins at once",
     f"KIP-394; {CG}.GroupMetadataManager.classicGroupJoinToClassicGroup (requireKnownMemberId = version >= 4)",
     SUITE)
rule("GROUP-INVALID-SESSION-TIMEOUT", "JoinGroup with a session timeout outside [group.min.session.timeout.ms, "
     "group.max.session.timeout.ms] answers INVALID_SESSION_TIMEOUT; the bounds themselves are accepted",
     f"{CG}.GroupMetadataManager.classicGroupJoin (session timeout bounds)", SUITE)
rule("GROUP-JOIN-REBALANCE", "a new member joining a Stable group starts a rebalance; when every member rejoined "
     "the generation is bumped, the leader gets all members and followers none",
     f"{CG}.GroupMetadataManager.classicGroupJoinToClassicGroup / completeClassicGroupJoin", SUITE)
rule("GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS", "Heartbeat from a current member while the group is "
     "PreparingRebalance answers REBALANCE_IN_PROGRESS (that is how members learn to rejoin)",
     f"{CG}.GroupMetadataManager.classicGroupHeartbeat (PreparingRebalance case)", SUITE)
rule("GROUP-HEARTBEAT-COMPLETING", "Heartbeat from a current member while the group is CompletingRebalance "
     "answers NONE", f"{CG}.GroupMetadataManager.classicGroupHeartbeat (CompletingRebalance case)", SUITE)
rule("GROUP-SYNC-REBALANCE-IN-PROGRESS", "SyncGroup while the group is PreparingRebalance answers "
     "REBALANCE_IN_PROGRESS", f"{CG}.GroupMetadataManager.classicGroupSync (PreparingRebalance case)", SUITE)
rule("OFFSET-COMMIT-COMPLETING", "OffsetCommit from a current member while the group is CompletingRebalance "
     "answers REBALANCE_IN_PROGRESS", f"{CG}.classic.ClassicGroup.validateOffsetCommit (CompletingRebalance)",
     SUITE)
rule("OFFSET-COMMIT-PREPARING", "OffsetCommit from a current member with the current generation while the group "
     "is PreparingRebalance is accepted", f"{CG}.classic.ClassicGroup.validateOffsetCommit (only "
     "CompletingRebalance is refused)", SUITE)
rule("GROUP-ILLEGAL-GENERATION", "Heartbeat, SyncGroup and OffsetCommit naming a known member with a generation "
     "other than the group's answer ILLEGAL_GENERATION",
     f"{CG}.GroupMetadataManager.classicGroupHeartbeat / classicGroupSync; ClassicGroup.validateOffsetCommit",
     SUITE)
rule("GROUP-UNKNOWN-MEMBER", "Heartbeat, SyncGroup and OffsetCommit from a member id the group does not have "
     "answer UNKNOWN_MEMBER_ID", f"{CG}.classic.ClassicGroup.validateMember", SUITE)
rule("GROUP-LEAVE-REBALANCE", "LeaveGroup of a member of a Stable group starts a rebalance; the remaining members "
     "form the next generation without it", f"{CG}.GroupMetadataManager.classicGroupLeave → "
     "removeMemberAndUpdateClassicGroup", SUITE)
rule("GROUP-SESSION-TIMEOUT", "a member that does not heartbeat for its session timeout is removed (at about "
     "the session timeout: not much earlier, not much later) and the group rebalances",
     f"{CG}.GroupMetadataManager.classicGroupHeartbeatKey expiry (onExpireHeartbeat)", SUITE)
rule("GROUP-REBALANCE-TIMEOUT", "a join phase waits for members that have not rejoined until the rebalance "
     "timeout or their session expiry, whichever comes first, then completes without them",
     f"{CG}.GroupMetadataManager.prepareRebalance (join timer = group.rebalanceTimeoutMs) / "
     "completeClassicGroupJoin (removes dynamic members not awaiting join); onExpireHeartbeat", SUITE)
rule("GROUP-EXPIRED-REJOIN", "a member whose session expired gets UNKNOWN_MEMBER_ID for its Heartbeat; joining "
     "again with an empty member id admits it into a new generation and the group becomes Stable with it",
     f"{CG}.classic.ClassicGroup.validateMember; GroupMetadataManager.classicGroupJoinToClassicGroup (unknown "
     "member id → new member)", SUITE)
rule("GROUP-SYNC-LEADER-GONE", "when the leader never sends its SyncGroup, the followers' parked SyncGroups end "
     "with REBALANCE_IN_PROGRESS once the leader is removed (pending-sync expiry after the rebalance timeout, or "
     "its session expiry) and the rest of the group becomes Stable without it",
     f"{CG}.GroupMetadataManager.schedulePendingSync / expirePendingSync (Kafka 3.2+, KAFKA-13406) and "
     "onExpireHeartbeat; ClassicGroup resetAndPropagateAssignmentWithError", SUITE)
rule("GROUP-DISCONNECT-RECOVERS", "a member whose connection closes while its JoinGroup or SyncGroup is parked is "
     "removed within its session (or the rebalance) timeout and the rest of the group becomes Stable without it",
     f"{CG}.GroupMetadataManager.completeClassicGroupJoin (a member awaiting join is counted as joined), "
     "expirePendingSync, onExpireHeartbeat", SUITE)
rule("GROUP-JOIN-ABANDONED", "the leader of a Stable group whose connection closes while its JoinGroup is parked "
     "(no LeaveGroup) does not hold the group: within about two rebalance/session timeouts a newcomer completes "
     "JoinGroup and SyncGroup with its assignment, the group is Stable without the departed member and a member "
     "that stayed", f"{CG}.GroupMetadataManager.completeClassicGroupJoin (the departed member awaiting join is "
     "counted and may stay leader), expirePendingSync (a leader that never syncs is removed after the rebalance "
     "timeout), onExpireHeartbeat", SUITE)
rule("GROUP-MANY-MEMBERS", "20 members joining an Empty group at once form one generation: every JoinGroup "
     "answers NONE with the same generation and leader, the leader is told all 20 members, every SyncGroup returns "
     "that member's assignment and the group is Stable", f"{CG}.GroupMetadataManager.completeClassicGroupJoin "
     "(InitialDelayedJoin gathers members arriving during the delay, KIP-134)", SUITE)
rule("GROUP-SYNC-ASSIGNMENT", "SyncGroup hands every member of the generation the assignment the leader sent for "
     "it: followers parked before the leader's SyncGroup, the leader itself, and a follower whose SyncGroup comes "
     "after the group became Stable (answered at once from the stored assignment); a member the leader left out "
     "gets an empty assignment (no error)", "kafka.coordinator.group.GroupCoordinator.doSyncGroup "
     "(CompletingRebalance: 'fill any missing members with an empty assignment', then propagated to the parked "
     f"followers; Stable: the member's current assignment); {CG}.GroupMetadataManager.classicGroupSyncToClassicGroup",
     SUITE)
rule("GROUP-STATIC-REJOIN", "a static member (group.instance.id) rejoining a Stable group with an empty member id "
     "and unchanged metadata gets a new member id, the generation does not change and no rebalance starts",
     f"KIP-345; {CG}.GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin", SUITE)
rule("GROUP-STATIC-FENCED", "after a static member was replaced, its old member id with the same "
     "group.instance.id is FENCED_INSTANCE_ID for Heartbeat and OffsetCommit",
     f"KIP-345; {CG}.classic.ClassicGroup.validateMember (instance id maps to another member id)", SUITE)
rule("GROUP-COOPERATIVE-INCREMENTAL", "with the cooperative-sticky assignor only the partitions that move are "
     "revoked; the others stay assigned across the rebalance", "KIP-429 (incremental cooperative rebalancing); "
     "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", SUITE)

DEFAULT_INITIAL_DELAY_MS = 3000    # group.initial.rebalance.delay.ms default
DEFAULT_MIN_SESSION_MS = 6000      # group.min.session.timeout.ms default
DEFAULT_MAX_SESSION_MS = 1_800_000  # group.max.session.timeout.ms default
FAST = {"kafka.group.initial.rebalance.delay.ms": "300", "kafka.group.min.session.timeout.ms": "500"}
SETTING_KEYS = ["group.initial.rebalance.delay.ms", "group.min.session.timeout.ms", "group.max.session.timeout.ms"]
TIMELINE_ROWS = 400                # requests kept in a check's timeline (first and last kept)


def slack_ms(expected_ms: float) -> float:
    """How much later than a Kafka timer a removal may be observed: timer granularity, the check's polling, a
    loaded machine. Kafka-realistic, not tuned to hide load: 1.5 s or 30 %, whichever is larger."""
    return max(1500.0, 0.3 * expected_ms)


@dataclass(frozen=True)
class GroupBroker:
    """The broker the checks talk to and the group settings in force (``known`` False = Kafka defaults assumed)."""

    name: str
    bootstrap: str
    initial_delay_ms: int
    min_session_ms: int
    max_session_ms: int
    known: bool

    @property
    def session_ms(self) -> int:
        """A session timeout long enough that checks never need background heartbeats."""
        return min(max(self.min_session_ms, 10_000), self.max_session_ms)

    @property
    def join_timeout_s(self) -> float:
        return self.initial_delay_ms / 1000 + 15   # Kafka completes a join within the rebalance timeout (10 s)

    @property
    def short_session_ms(self) -> int:
        """The session timeout of checks that wait for an expiry: the broker's minimum (Kafka: 6 s), at least 1 s."""
        return max(self.min_session_ms, 1000)


async def _configs_via_describe(bootstrap: str) -> dict[str, str] | None:
    """The group settings from DescribeConfigs, or None when the target does not answer it (then they are unknown)."""
    c = await ops.connect_bootstrap(bootstrap)
    try:
        brokers, _ = await ops.metadata(c, [])
        for broker_id in sorted(brokers):
            found = await ops.broker_configs(c, broker_id, SETTING_KEYS)
            if found and "group.initial.rebalance.delay.ms" in found:
                return found
        return None
    except AssertionError:      # e.g. the broker closes the connection on DescribeConfigs
        return None
    finally:
        await c.close()


def _group_broker(name: str, bootstrap: str, settings: dict[str, str] | None) -> GroupBroker:
    s = settings or {}
    return GroupBroker(name, bootstrap,
                       int(s.get("group.initial.rebalance.delay.ms", DEFAULT_INITIAL_DELAY_MS)),
                       int(s.get("group.min.session.timeout.ms", DEFAULT_MIN_SESSION_MS)),
                       int(s.get("group.max.session.timeout.ms", DEFAULT_MAX_SESSION_MS)),
                       known=settings is not None)


@pytest.fixture(scope="module")
def group_broker(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupBroker]:
    """The session target, or for a slow-configured reference target a sibling reference broker with short group
    timings (and the same fault switches, so a fault run still exercises the broken rule)."""
    from fixtures.reference import ReferenceTarget

    if isinstance(target, ReferenceTarget):
        cfg = target.config()
        settings = {k: str(v) for k, v in cfg["settings"].items()}
        delay = int(settings.get("group.initial.rebalance.delay.ms", DEFAULT_INITIAL_DELAY_MS))
        min_session = int(settings.get("group.min.session.timeout.ms", DEFAULT_MIN_SESSION_MS))
        if delay <= 1000 and min_session <= 1000:
            yield _group_broker(target.name, target.bootstrap, settings)
            return
        sibling_cfg = {"memory": "true", **{f"kafka.{k}": v for k, v in settings.items()}, **FAST}
        if cfg.get("faults"):
            sibling_cfg["faults"] = ",".join(cfg["faults"])
        sibling = ReferenceTarget(sibling_cfg, work_dir=Path(tmp_path_factory.mktemp("rebalance-broker")))
        with sibling:
            fast = {k[len("kafka."):]: v for k, v in sibling_cfg.items() if k.startswith("kafka.")}
            yield _group_broker(f"{target.name} (sibling with {FAST})", sibling.bootstrap, fast)
        return
    found = asyncio.run(_configs_via_describe(target.bootstrap))
    yield _group_broker(target.name, target.bootstrap, found)


def unique(prefix: str) -> str:
    return f"kct-{prefix}-{secrets.token_hex(4)}"


@dataclass
class Member:
    """One group member on its own connection (Kafka serves one request per connection at a time, and a
    JoinGroup parks), remembering its member id and generation like a client does."""

    conn: Wire
    group: str
    broker: GroupBroker
    instance_id: str | None = None
    session_ms: int = 0
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: list[str] = field(default_factory=list)
    rebalance_ms: int = 10_000
    name: str = "m"
    timeline: Timeline | None = None
    synced: int = -1              # the generation whose SyncGroup this member completed

    async def _timed(self, what: str, request: dict[str, Any], call: Any) -> Any:
        """Await ``call``, adding the request and its answer (or failure) with times to the timeline."""
        sent = time.monotonic()
        try:
            answer = await call
        except BaseException as exc:
            if self.timeline is not None:
                self.timeline.add(self.name, what, request, sent, f"{type(exc).__name__}: {exc}"[:200])
            raise
        if self.timeline is not None:
            self.timeline.add(self.name, what, request, sent, answer)
        return answer

    async def join(self, member_id: str | None = None, **kw: Any) -> ops.Joined:
        """One JoinGroup (MEMBER_ID_REQUIRED is returned, not answered)."""
        mid = self.member_id if member_id is None else member_id
        session_ms, rebalance_ms = kw.pop("session_ms", self.session_ms), kw.pop("rebalance_ms", self.rebalance_ms)
        j = await self._timed("JoinGroup", {"member_id": mid, "session_ms": session_ms, "rebalance_ms": rebalance_ms},
                              ops.join(self.conn, self.group, member_id=mid, instance_id=self.instance_id,
                                       session_ms=session_ms, rebalance_ms=rebalance_ms,
                                       timeout=self.broker.join_timeout_s, **kw))
        if j.error in (NONE, MEMBER_ID_REQUIRED):
            self.member_id = j.member_id
        if j.error == NONE:
            self.generation, self.leader, self.members = j.generation, j.leader, j.members
        return j

    async def join_new(self, **kw: Any) -> ops.Joined:
        j = await self.join(**kw)
        if j.error == MEMBER_ID_REQUIRED:
            j = await self.join(**kw)
        assert j.error == NONE, f"JoinGroup of a new member failed: {j}"
        return j

    async def sync(self, assignments: dict[str, bytes] | None = None, generation: int | None = None,
                   member_id: str | None = None) -> tuple[int, bytes]:
        gen = self.generation if generation is None else generation
        mid = self.member_id if member_id is None else member_id
        err, got = await self._timed("SyncGroup", {"generation": gen, "member_id": mid,
                                                   "assigns": len(assignments or {})},
                                     ops.sync(self.conn, self.group, gen, mid, assignments,
                                              instance_id=self.instance_id, timeout=self.broker.join_timeout_s))
        if err == NONE and gen == self.generation and mid == self.member_id:
            self.synced = gen
        return err, got

    async def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> int:
        gen = self.generation if generation is None else generation
        mid = self.member_id if member_id is None else member_id
        return await self._timed("Heartbeat", {"generation": gen, "member_id": mid},
                                 ops.heartbeat(self.conn, self.group, gen, mid, self.instance_id))

    async def commit(self, topic: str, offset: int, generation: int | None = None,
                     member_id: str | None = None) -> int:
        gen = self.generation if generation is None else generation
        mid = self.member_id if member_id is None else member_id
        codes = await self._timed("OffsetCommit", {"generation": gen, "member_id": mid, "offset": offset},
                                  ops.commit(self.conn, self.group, gen, mid, {(topic, 0): offset},
                                             instance_id=self.instance_id))
        return codes[(topic, 0)]

    async def leave(self) -> int:
        _top, code = await self._timed("LeaveGroup", {"member_id": self.member_id},
                                       ops.leave(self.conn, self.group, self.member_id, self.instance_id))
        return code

    def forget(self) -> None:
        """What a client does on UNKNOWN_MEMBER_ID: drop its member id and generation and join as new."""
        self.member_id, self.generation, self.leader, self.members = "", -1, "", []


class Timeline:
    """Every group request of a check with its send and answer times (ms since the check began): the evidence of
    an interrupted conversation, where the order and spacing of requests is the point."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.rows: list[dict[str, Any]] = []
        self.dropped = 0

    def add(self, who: str, what: str, request: dict[str, Any], sent: float, answer: Any) -> None:
        if isinstance(answer, ops.Joined):
            answer = {"error": answer.error, "generation": answer.generation, "member_id": answer.member_id,
                      "leader": answer.leader, "members": len(answer.members)}
        elif isinstance(answer, tuple):
            answer = {"error": answer[0]}
        elif isinstance(answer, dict):
            answer = {"errors": sorted(set(answer.values()))}
        self.rows.append({"sent_ms": round((sent - self.t0) * 1000, 1),
                          "answered_ms": round((time.monotonic() - self.t0) * 1000, 1),
                          "who": who, "request": what, **request, "answer": answer})
        if len(self.rows) > TIMELINE_ROWS:
            del self.rows[TIMELINE_ROWS // 2]
            self.dropped += 1

    def note(self, event: str) -> None:
        """A check's own marker in the timeline ("b goes silent", "c's connection closed")."""
        self.rows.append({"at_ms": round((time.monotonic() - self.t0) * 1000, 1), "event": event})

    def since(self, t: float) -> float:
        return (time.monotonic() - t) * 1000


class Session:
    """The connections and background joins of one check; everything is closed/cancelled at the end."""

    def __init__(self, broker: GroupBroker, group: str, evidence: Evidence | None = None) -> None:
        self.broker = broker
        self.group = group
        self.evidence = evidence  # every request a check makes goes into its evidence
        self.conns: list[Wire] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.admin: Wire | None = None
        self.topic = unique("t")
        self.timeline = Timeline()
        self.names = iter("abcdefghijklmnopqrstuvwxyz")

    async def connect(self) -> Wire:
        c = await ops.coordinator(self.broker.bootstrap, self.group, evidence=self.evidence)
        self.conns.append(c)
        return c

    async def member(self, instance_id: str | None = None, session_ms: int | None = None,
                     rebalance_ms: int = 10_000, name: str | None = None) -> Member:
        return Member(await self.connect(), self.group, self.broker, instance_id,
                      session_ms or self.broker.session_ms, rebalance_ms=rebalance_ms,
                      name=name or next(self.names, "m"), timeline=self.timeline)

    async def start(self) -> None:
        self.admin = await self.connect()
        boot = await ops.connect_bootstrap(self.broker.bootstrap, evidence=self.evidence)
        self.conns.append(boot)
        assert await ops.create_topic(boot, self.topic, 1) in (0, 36)
        # a fresh Kafka answers NOT_COORDINATOR until __consumer_offsets is loaded (seen on the first check of a
        # run: JoinGroup error 16): setup, not what these rules are about
        await boot.coordinator_ready(self.group)

    def background(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.ensure_future(coro)
        self.tasks.append(t)
        return t

    async def describe(self) -> ops.Described:
        assert self.admin is not None
        return await ops.describe_group(self.admin, self.group)

    async def wait_state(self, state: str, timeout_s: float = 5) -> ops.Described:
        """Poll DescribeGroups until the group reports ``state``; the last answer is the evidence if it never does."""
        deadline = time.monotonic() + timeout_s
        d = await self.describe()
        while d.state != state and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            d = await self.describe()
        assert d.state == state, f"group {self.group} never reached {state} within {timeout_s}s; last {d}"
        return d

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        # bounded: a task that ignores its cancellation must not hang the check (it is named in the evidence)
        _, stuck = await asyncio.wait(self.tasks, timeout=10) if self.tasks else (set(), set())
        for t in self.tasks:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved: a member loop's failure was already reported by its check
        if stuck and self.evidence is not None:
            self.evidence.note("background tasks still running 10 s after cancel", [repr(t)[:200] for t in stuck])
        for c in self.conns:
            with contextlib.suppress(Exception):
                await c.close()
        if self.evidence is not None and self.timeline.rows:
            self.evidence.note("timeline", self.timeline.rows)
            if self.timeline.dropped:
                self.evidence.note("timeline_dropped", self.timeline.dropped)


@contextlib.asynccontextmanager
async def session(broker: GroupBroker, evidence: Evidence | None, name: str = "g") -> AsyncIterator[Session]:
    """A Session whose requests are recorded in the check's ``evidence`` (shown with any divergence)."""
    s = Session(broker, unique(name), evidence)
    try:
        await s.start()
        yield s
    finally:
        await s.close()


async def stable_single(s: Session, instance_id: str | None = None, session_ms: int | None = None,
                        rebalance_ms: int = 10_000) -> Member:
    """One member, joined and synced: the group is Stable at the member's generation."""
    m = await s.member(instance_id, session_ms, rebalance_ms)
    await m.join_new()
    err, assignment = await m.sync({m.member_id: b"A:" + m.member_id.encode()})
    assert err == NONE and assignment, f"leader SyncGroup failed: {err} {assignment!r}"
    return m


async def parked_join(s: Session, m: Member) -> asyncio.Task:
    """Send ``m``'s JoinGroup in the background, answering MEMBER_ID_REQUIRED (KIP-394) once if it comes, and
    return when DescribeGroups says PreparingRebalance or the join ended (at most ~1 s per attempt). The member
    id round trip is GROUP-MEMBER-ID-REQUIRED's business; here a target that skips it still gets a parked join."""
    already = (await s.describe()).state == "PreparingRebalance"   # then the state says nothing about this join
    task = s.background(m.join())
    for attempt in range(2):
        # DescribeGroups saying PreparingRebalance is the quick sign; the parked JoinGroup is what the rules need
        # (GROUP-STATES checks the state names), so without the sign wait a little and see whether it is parked.
        # (MEMBER_ID_REQUIRED comes back in one round trip; the others' sessions keep running meanwhile.)
        deadline = time.monotonic() + (0.3 if already and not attempt else 1.0)
        while not task.done() and time.monotonic() < deadline:
            if (attempt or not already) and (await s.describe()).state == "PreparingRebalance":
                break
            await asyncio.sleep(0.02)
        if not (task.done() and task.result().error == MEMBER_ID_REQUIRED and m.instance_id is None):
            break
        task = s.background(m.join())
    return task


async def second_member_parked(s: Session, a: Member, instance_id: str | None = None,
                               session_ms: int | None = None, rebalance_ms: int = 10_000
                               ) -> tuple[Member, asyncio.Task]:
    """A second member whose JoinGroup is parked (PreparingRebalance) until ``a`` rejoins, as Kafka parks it."""
    b = await s.member(instance_id, session_ms, rebalance_ms)
    task = await parked_join(s, b)
    if task.done():
        raise AssertionError(f"a new member's JoinGroup to a Stable group returned {task.result()} before the "
                             f"existing member {a.member_id} rejoined; Kafka parks it until every member rejoined "
                             "(or the rebalance timeout)")
    return b, task


async def stable_pair(s: Session, session_ms: int | None = None, rebalance_ms: int = 10_000
                      ) -> tuple[Member, Member]:
    """Two members in one Stable generation; built from single join + second join + rejoin."""
    a = await stable_single(s, session_ms=session_ms, rebalance_ms=rebalance_ms)
    b, task = await second_member_parked(s, a, session_ms=session_ms, rebalance_ms=rebalance_ms)
    ja = await a.join()
    jb = await asyncio.wait_for(task, s.broker.join_timeout_s)
    assert ja.error == NONE and jb.error == NONE and ja.generation == jb.generation, (ja, jb)
    leader, follower = (a, b) if ja.leader == a.member_id else (b, a)
    follow = s.background(follower.sync())
    err, _ = await leader.sync({a.member_id: b"A", b.member_id: b"B"})
    assert err == NONE, f"leader SyncGroup: {err}"
    err, _ = await asyncio.wait_for(follow, s.broker.join_timeout_s)
    assert err == NONE, f"follower SyncGroup: {err}"
    return a, b


def assignment_for(member_id: str) -> bytes:
    return b"A:" + member_id.encode()


async def consume(m: Member, heartbeat_s: float, leader_gate: Any = None) -> None:
    """A minimal classic consumer: (re)join, sync (a leader assigns each member ``assignment_for`` its id),
    heartbeat; rejoin on REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION, join as new on UNKNOWN_MEMBER_ID (what
    Kafka's AbstractCoordinator does). ``leader_gate(m)`` is awaited before a leader's SyncGroup."""
    need_join = m.synced != m.generation or m.generation < 0
    while True:
        if need_join:
            j = await m.join()
            if j.error in (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS):
                continue
            if j.error == UNKNOWN_MEMBER_ID:
                m.forget()
                continue
            assert j.error == NONE, f"member {m.name}: JoinGroup answered {j}"
            leading = m.leader == m.member_id
            if leading and leader_gate is not None:
                await leader_gate(m)
            err, _ = await m.sync({mid: assignment_for(mid) for mid in j.members} if leading else None)
            if err == UNKNOWN_MEMBER_ID:
                m.forget()
            elif err == NONE:
                need_join = False
            else:
                assert err in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION), f"member {m.name}: SyncGroup answered {err}"
            continue
        await asyncio.sleep(heartbeat_s)
        code = await m.heartbeat()
        if code == UNKNOWN_MEMBER_ID:
            m.forget()
        assert code in (NONE, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), \
            f"member {m.name}: Heartbeat answered {code}"
        need_join = code != NONE


async def until_stable(s: Session, members: list[Member], within_s: float, leader_gate: Any = None,
                       since: float | None = None, after: asyncio.Event | None = None) -> float:
    """Run ``consume`` for every member until DescribeGroups shows the group Stable with exactly these members,
    each synced at the current generation (only once ``after`` is set, when given). Returns the ms it took (from
    ``since``); a group that does not get there within ``within_s`` is a divergence (the timeline in the evidence
    shows where it stuck)."""
    start = time.monotonic() if since is None else since
    hb = min(max(s.broker.short_session_ms / 5000, 0.1), 1.0)
    loops = [s.background(consume(m, hb, leader_gate)) for m in members]
    deadline = start + within_s
    d = await s.describe()
    try:
        while time.monotonic() < deadline:
            for t in loops:
                if t.done():
                    t.result()       # a member's loop failed: its assertion is the divergence
            d = await s.describe()
            gens = {m.generation for m in members}
            if ((after is None or after.is_set()) and d.state == "Stable" and sorted(d.members) == sorted(m.member_id for m in members)
                    and len(gens) == 1 and all(m.synced == m.generation for m in members)):
                return (time.monotonic() - start) * 1000
            await asyncio.sleep(0.05)
    finally:
        for t in loops:
            t.cancel()
    raise AssertionError(f"group {s.group} did not become Stable with members {[m.name for m in members]} within "
                         f"{within_s:.1f} s; last DescribeGroups {d}")


def within(evidence: Evidence, what: str, measured_ms: float, lo_ms: float | None, hi_ms: float, **ctx: Any) -> str:
    """Record a measured duration with the window Kafka allows; the text for the check's message."""
    evidence.timing(what, measured_ms, expect_min_ms=lo_ms, expect_max_ms=hi_ms, **ctx)
    window = f"[{lo_ms:.0f}, {hi_ms:.0f}]" if lo_ms is not None else f"<= {hi_ms:.0f}"
    return f"{what}: measured {measured_ms:.0f} ms, Kafka allows {window} ms"


# ------------------------------------------------------------------------------------------------- checks


@pytest.mark.rule("GROUP-DESCRIBE-DEAD")
async def test_describe_unknown_group_is_dead(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        d = await s.describe()
        assert (d.error, d.state, d.members) == (NONE, "Dead", []), f"unknown group {s.group} described as {d}"


# ClassicGroupState: the states each state may move to. "Dead" first: an unknown group is described as Dead, and
# a group is created Empty (DeleteGroups, the other way to Dead, is not exercised here).
NEXT_STATES = {
    "Dead": {"Empty", "PreparingRebalance"},   # a JoinGroup creates the group Empty and moves it on at once
    "Empty": {"PreparingRebalance"},
    "PreparingRebalance": {"CompletingRebalance", "Empty"},
    "CompletingRebalance": {"Stable", "PreparingRebalance"},
    "Stable": {"PreparingRebalance", "Empty"},  # the last member leaving passes PreparingRebalance in one request
}


async def observe(s: Session, seen: list[str], work: Any) -> Any:
    """Run ``work`` while polling DescribeGroups; append each state change to ``seen``; return work's result."""
    task = s.background(work)
    while True:
        d = await s.describe()
        if not seen or seen[-1] != d.state:
            seen.append(d.state)
        if task.done():
            return task.result()
        await asyncio.sleep(0.01)


@pytest.mark.rule("GROUP-STATES")
async def test_state_transitions(group_broker: GroupBroker, evidence: Evidence) -> None:
    """Each state, and only Kafka's transitions between them, as DescribeGroups reports them to an operator."""
    async with session(group_broker, evidence) as s:
        seen: list[str] = []

        async def look() -> None:             # a state seen twice in a row is one observation, not a transition
            state = (await s.describe()).state
            if not seen or seen[-1] != state:
                seen.append(state)

        a = await s.member()
        await look()
        j = await observe(s, seen, a.join())
        if j.error == MEMBER_ID_REQUIRED:     # the group now exists, Empty, with the id handed out pending
            await look()
            j = await observe(s, seen, a.join())
        assert j.error == NONE, j
        await observe(s, seen, a.sync({a.member_id: b"A"}))
        b = await s.member()
        task = await parked_join(s, b)                    # via MEMBER_ID_REQUIRED (v4+) where the target uses it
        await look()
        await s.wait_state("PreparingRebalance")
        await look()
        await observe(s, seen, a.join())
        await asyncio.wait_for(task, group_broker.join_timeout_s)
        follow = s.background(b.sync())
        await observe(s, seen, a.sync({a.member_id: b"A", b.member_id: b"B"}))
        await asyncio.wait_for(follow, group_broker.join_timeout_s)
        await observe(s, seen, b.leave())
        await observe(s, seen, a.leave())
        await observe(s, seen, asyncio.sleep(0.3))
        bad = [(x, y) for x, y in zip(seen, seen[1:], strict=False) if y not in NEXT_STATES.get(x, set())]
        # the initial-delay PreparingRebalance may be too short to see when the delay is (near) zero
        if group_broker.initial_delay_ms < 100:
            bad = [t for t in bad if t != ("Empty", "CompletingRebalance")]
        assert not bad, f"DescribeGroups went {' → '.join(seen)}; transitions ClassicGroup never makes: {bad}"
        for state in ("CompletingRebalance", "Stable", "PreparingRebalance", "Empty"):
            assert state in seen, f"DescribeGroups never reported {state}: {' → '.join(seen)}"
        assert seen[-1] == "Empty", f"after every member left the group must be Empty: {' → '.join(seen)}"


@pytest.mark.rule("GROUP-INITIAL-DELAY")
async def test_initial_rebalance_delay(group_broker: GroupBroker, evidence: Evidence) -> None:
    """Known delay: the first join completes at about it. Unknown delay (no DescribeConfigs): any delay is a Kafka
    configuration, but InitialDelayedJoin never waits past the rebalance timeout, so only that bound can diverge."""
    rebalance_ms = 10_000
    async with session(group_broker, evidence) as s:
        a = await s.member()
        t0 = time.monotonic()
        j = await a.join()
        if j.error == MEMBER_ID_REQUIRED:
            t0 = time.monotonic()
            j = await a.join()
        waited_ms = (time.monotonic() - t0) * 1000
        assert j.error == NONE, j
        delay = group_broker.initial_delay_ms
        if group_broker.known:
            msg = within(evidence, "first join of an Empty group", waited_ms, delay * 0.9 - 20,
                         delay + slack_ms(delay), initial_delay_ms=delay)
            assert delay * 0.9 - 20 <= waited_ms <= delay + slack_ms(delay), \
                f"{msg}; group.initial.rebalance.delay.ms is {delay}"
        else:
            msg = within(evidence, "first join of an Empty group (delay not revealed)", waited_ms, None,
                         rebalance_ms + slack_ms(rebalance_ms), rebalance_ms=rebalance_ms)
            evidence.note("measured_initial_delay_ms", round(waited_ms))
            assert waited_ms <= rebalance_ms + slack_ms(rebalance_ms), \
                f"{msg}; no group.initial.rebalance.delay.ms makes a join wait past the rebalance timeout"


@pytest.mark.rule("GROUP-MEMBER-ID-REQUIRED")
async def test_member_id_required(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await s.member()
        first = await ops.join(a.conn, s.group, session_ms=group_broker.session_ms, version_=4,
                               timeout=group_broker.join_timeout_s)
        assert first.error == MEMBER_ID_REQUIRED and first.member_id, \
            f"JoinGroup v4 without a member id: {first} (KIP-394: MEMBER_ID_REQUIRED with an id)"
        again = await ops.join(a.conn, s.group, member_id=first.member_id, session_ms=group_broker.session_ms,
                               version_=4, timeout=group_broker.join_timeout_s)
        assert again.error == NONE and again.member_id == first.member_id, \
            f"JoinGroup v4 with the id handed out ({first.member_id}): {again}"
    async with session(group_broker, evidence, "g3") as s3:
        other = await s3.member()
        v3 = await ops.join(other.conn, s3.group, session_ms=group_broker.session_ms, version_=3,
                            timeout=group_broker.join_timeout_s)
        assert v3.error == NONE and v3.member_id, f"JoinGroup v3 without a member id must join at once: {v3}"


@pytest.mark.rule("GROUP-INVALID-SESSION-TIMEOUT")
@pytest.mark.parametrize("where", ["below-min", "at-min", "at-max", "above-max"])
async def test_invalid_session_timeout(group_broker: GroupBroker, evidence: Evidence, where: str) -> None:
    """Both sides of both bounds. Where the target hides its bounds (Kafka defaults assumed), an answer that another
    group.min/max.session.timeout.ms would explain is reported as a skip with what was seen, not a divergence."""
    lo, hi = group_broker.min_session_ms, group_broker.max_session_ms
    session_ms = {"below-min": lo - 1, "at-min": lo, "at-max": hi, "above-max": hi + 1}[where]
    allowed = where.startswith("at-")
    async with session(group_broker, evidence) as s:
        a = await s.member()
        j = await a.join(session_ms=session_ms)
        if j.error == MEMBER_ID_REQUIRED:     # Kafka checks the bounds first; a target that does not is judged
            j = await a.join(session_ms=session_ms)   # on the join that follows
        if allowed and j.error == NONE:
            await a.leave()
        ok = (j.error == NONE) if allowed else (j.error == INVALID_SESSION_TIMEOUT)
        seen = (f"JoinGroup with session timeout {session_ms} ms (bounds [{lo}, {hi}]"
                f"{'' if group_broker.known else ', Kafka defaults assumed'}) answered {j.error}")
        evidence.note("answer", seen)
        if not ok and not group_broker.known and j.error in (NONE, INVALID_SESSION_TIMEOUT):
            pytest.skip(f"{seen}: a Kafka with other session bounds answers this too (target hides them)")
        assert ok, f"{seen}; Kafka: {'accepted' if allowed else 'INVALID_SESSION_TIMEOUT'} ({j})"


@pytest.mark.rule("GROUP-JOIN-REBALANCE")
async def test_join_starts_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        gen = a.generation
        b, task = await second_member_parked(s, a)
        ja = await a.join()
        jb = await asyncio.wait_for(task, group_broker.join_timeout_s)
        assert ja.error == NONE and jb.error == NONE, (ja, jb)
        assert ja.generation == jb.generation == gen + 1, f"generation {gen} → {ja.generation}/{jb.generation}"
        leader, follower = (ja, jb) if ja.leader == ja.member_id else (jb, ja)
        assert leader.leader == follower.leader == leader.member_id, (ja, jb)
        assert sorted(leader.members) == sorted([a.member_id, b.member_id]) and follower.members == [], \
            f"leader must get every member, followers none: leader {leader.members}, follower {follower.members}"


@pytest.mark.rule("GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS")
async def test_heartbeat_in_preparing_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        await second_member_parked(s, a)
        code = await a.heartbeat()
        assert code == REBALANCE_IN_PROGRESS, (
            f"Heartbeat of member {a.member_id} (generation {a.generation}) while PreparingRebalance answered "
            f"{code}; Kafka answers REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS}) so the member rejoins")


@pytest.mark.rule("GROUP-SYNC-REBALANCE-IN-PROGRESS")
async def test_sync_in_preparing_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        await second_member_parked(s, a)
        err, _ = await a.sync()
        assert err == REBALANCE_IN_PROGRESS, f"SyncGroup while PreparingRebalance answered {err}"


@pytest.mark.rule("OFFSET-COMMIT-PREPARING")
async def test_commit_in_preparing_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        await second_member_parked(s, a)
        code = await a.commit(s.topic, 5)
        assert code == NONE, f"OffsetCommit with the current generation while PreparingRebalance answered {code}"


async def completing(s: Session) -> tuple[Member, Member, asyncio.Task]:
    """Two members joined into a new generation, nobody synced yet: CompletingRebalance. Returns (leader,
    follower, the follower's parked SyncGroup is not started)."""
    a = await stable_single(s)
    b, task = await second_member_parked(s, a)
    await a.join()
    await asyncio.wait_for(task, s.broker.join_timeout_s)
    # Joined and nobody synced: CompletingRebalance by definition (what DescribeGroups calls it is GROUP-STATES).
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    return leader, follower, task


@pytest.mark.rule("OFFSET-COMMIT-COMPLETING")
async def test_commit_in_completing_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        _leader, follower, _ = await completing(s)
        code = await follower.commit(s.topic, 7)
        assert code == REBALANCE_IN_PROGRESS, (
            f"OffsetCommit by {follower.member_id} (generation {follower.generation}) while CompletingRebalance "
            f"answered {code}; Kafka: REBALANCE_IN_PROGRESS")


@pytest.mark.rule("GROUP-HEARTBEAT-COMPLETING")
async def test_heartbeat_in_completing_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        _leader, follower, _ = await completing(s)
        code = await follower.heartbeat()
        assert code == NONE, f"Heartbeat while CompletingRebalance answered {code}; Kafka: NONE"


@pytest.mark.rule("GROUP-ILLEGAL-GENERATION")
@pytest.mark.parametrize("op", ["heartbeat", "sync", "commit"])
async def test_stale_generation(group_broker: GroupBroker, evidence: Evidence, op: str) -> None:
    """The generation before the current one (what a member that missed a rebalance sends), the one after, and -1
    (no generation) with a member id: Kafka allows -1 only with an empty member id in an Empty group."""
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        others = sorted({g for g in (a.generation - 1, a.generation + 1) if g >= 0} | {-1})
        for gen in others:
            if op == "heartbeat":
                code = await a.heartbeat(generation=gen)
            elif op == "sync":
                code = (await a.sync(generation=gen))[0]
            else:
                code = await a.commit(s.topic, 3, generation=gen)
            assert code == ILLEGAL_GENERATION, (
                f"{op} by member {a.member_id} with generation {gen} (group at {a.generation}) answered {code}; "
                f"Kafka: ILLEGAL_GENERATION ({ILLEGAL_GENERATION})")


@pytest.mark.rule("GROUP-UNKNOWN-MEMBER")
@pytest.mark.parametrize("op", ["heartbeat", "sync", "commit", "join"])
async def test_unknown_member(group_broker: GroupBroker, evidence: Evidence, op: str) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        ghost = "kct-not-a-member-" + secrets.token_hex(4)
        if op == "join":         # a non-empty member id the group never handed out
            code = (await a.join(member_id=ghost)).error
        elif op == "heartbeat":
            code = await a.heartbeat(member_id=ghost)
        elif op == "sync":
            code = (await a.sync(member_id=ghost))[0]
        else:
            code = await a.commit(s.topic, 3, member_id=ghost)
        assert code == UNKNOWN_MEMBER_ID, f"{op} from unknown member {ghost} answered {code}; Kafka: UNKNOWN_MEMBER_ID"


@pytest.mark.rule("GROUP-LEAVE-REBALANCE")
async def test_leave_starts_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s)
        gen = a.generation
        assert await b.leave() == NONE
        code = await a.heartbeat()
        assert code == REBALANCE_IN_PROGRESS, f"after a member left, the other's Heartbeat answered {code}"
        j = await a.join()
        assert j.error == NONE and j.generation == gen + 1 and j.members == [a.member_id], \
            f"the rejoin after a leave must form generation {gen + 1} with {a.member_id} alone: {j}"
        assert await b.heartbeat() == UNKNOWN_MEMBER_ID


async def until_removed(s: Session, keep: Member, gone: Member, limit_s: float) -> tuple[float, int]:
    """``keep`` heartbeats (staying alive) while DescribeGroups is polled, until ``gone`` is no longer a member or
    ``keep`` hears REBALANCE_IN_PROGRESS (either sign counts, so the check does not depend on how members learn of
    the rebalance). Returns (ms since ``gone``'s last request, keep's last heartbeat code)."""
    t0 = time.monotonic()
    code, next_hb = NONE, t0
    while time.monotonic() < t0 + limit_s:
        if time.monotonic() >= next_hb:
            code = await keep.heartbeat()
            next_hb = time.monotonic() + min(0.25, s.broker.short_session_ms / 5000)
            if code != NONE:
                break
        if gone.member_id not in (await s.describe()).members:
            break
        await asyncio.sleep(0.02)
    return (time.monotonic() - t0) * 1000, code


@pytest.mark.rule("GROUP-SESSION-TIMEOUT")
async def test_session_timeout_removes_member(group_broker: GroupBroker, evidence: Evidence) -> None:
    """b goes silent after its SyncGroup; a keeps heartbeating. b must be removed at about its session timeout."""
    session_ms = group_broker.short_session_ms
    hi = session_ms + slack_ms(session_ms)
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s, session_ms)
        s.timeline.note("b goes silent")
        removed_ms, code = await until_removed(s, a, b, hi / 1000 + 1)
        msg = within(evidence, "silent member removed", removed_ms, session_ms * 0.9, hi, session_ms=session_ms)
        evidence.note("a_heartbeat_at_removal", code)
        assert session_ms * 0.9 <= removed_ms <= hi, f"{msg} (session timeout {session_ms} ms)"
        j = await a.join()
        assert j.error == NONE and j.members == [a.member_id], f"the next generation must not contain b: {j}"


@pytest.mark.rule("GROUP-EXPIRED-REJOIN")
async def test_member_returns_after_session_expired(group_broker: GroupBroker, evidence: Evidence) -> None:
    """b was silent past its session; when it comes back its id is unknown, and joining as new gets it in again."""
    session_ms = group_broker.short_session_ms
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s, session_ms)
        s.timeline.note("b goes silent")
        removed_ms, _ = await until_removed(s, a, b, (session_ms + slack_ms(session_ms)) / 1000 + 1)
        assert b.member_id not in (await s.describe()).members, f"b still a member after {removed_ms:.0f} ms"
        code = await b.heartbeat()
        assert code == UNKNOWN_MEMBER_ID, (
            f"Heartbeat of member {b.member_id} {removed_ms:.0f} ms after its session ({session_ms} ms) expired "
            f"answered {code}; Kafka: UNKNOWN_MEMBER_ID ({UNKNOWN_MEMBER_ID})")
        old = b.member_id
        b.forget()
        # b joins as new (parked: the group rebalances), a rejoins as its heartbeat would tell it to; both must get
        # the new generation, and after the SyncGroups the group is Stable with b's new id.
        jb = await parked_join(s, b)         # (the state names are GROUP-STATES' business, not waited for here)
        await asyncio.sleep(0.05)            # the group is already rebalancing: no state change marks b's join
        ja = await a.join()
        await asyncio.wait_for(jb, group_broker.join_timeout_s)
        assert ja.error == NONE and b.generation == a.generation and b.member_id not in ("", old), (
            f"the returning member must get a new id in a's generation: a {ja}, b {b.member_id} gen {b.generation}")
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        follow = s.background(follower.sync())
        err, _ = await leader.sync({a.member_id: assignment_for(a.member_id), b.member_id: assignment_for(b.member_id)})
        err2, got = await asyncio.wait_for(follow, group_broker.join_timeout_s)
        assert err == err2 == NONE and got == assignment_for(follower.member_id), (err, err2, got)
        d = await s.describe()
        assert d.state == "Stable" and sorted(d.members) == sorted([a.member_id, b.member_id]), \
            f"after the returning member rejoined: {d}"


@pytest.mark.rule("GROUP-REBALANCE-TIMEOUT")
@pytest.mark.parametrize("shorter", ["rebalance", "session"])
async def test_join_phase_ends_at_the_shorter_timeout(group_broker: GroupBroker, evidence: Evidence,
                                                      shorter: str) -> None:
    """a and b are Stable; c joins, a rejoins, b stays silent. The join phase must end without b when the first of
    the rebalance timeout (counted from the rebalance start) and b's session (from b's last request) runs out."""
    short = group_broker.short_session_ms
    if shorter == "rebalance":
        session_ms, rebalance_ms = group_broker.session_ms, max(short // 2, 1000)   # session 10 s
    else:
        session_ms, rebalance_ms = short, 3 * short
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s, session_ms, rebalance_ms)
        b_silent = time.monotonic()
        s.timeline.note("b goes silent")
        c, task = await second_member_parked(s, a, session_ms=session_ms, rebalance_ms=rebalance_ms)
        started = time.monotonic()
        expected_ms, since = ((rebalance_ms, started) if shorter == "rebalance" else (session_ms, b_silent))
        hi = expected_ms + slack_ms(expected_ms)
        ja = s.background(a.join())
        done, _ = await asyncio.wait([task, ja], timeout=hi / 1000 - (time.monotonic() - since) + 0.5)
        took_ms = (time.monotonic() - since) * 1000
        # the earliest moment is only this rule's business for the rebalance timeout (an early session expiry is
        # GROUP-SESSION-TIMEOUT's); for both, the join must not wait for the longer timeout
        lo = expected_ms * 0.9 - 50 if shorter == "rebalance" else 0.0
        msg = within(evidence, f"join phase without silent b (the {shorter} timeout is shorter)", took_ms,
                     lo, hi, session_ms=session_ms, rebalance_ms=rebalance_ms)
        assert len(done) == 2, f"{msg}: the JoinGroups of a and c were still parked"
        jc, jaa = task.result(), ja.result()
        assert jc.error == NONE and jaa.error == NONE and jc.generation == jaa.generation, (jaa, jc)
        leader = jaa if jaa.leader == jaa.member_id else jc
        assert sorted(leader.members) == sorted([a.member_id, c.member_id]), \
            f"the new generation must be a and c without b: leader told {leader.members}"
        assert lo <= took_ms <= hi, msg


@pytest.mark.rule("GROUP-SYNC-LEADER-GONE")
async def test_leader_never_syncs(group_broker: GroupBroker, evidence: Evidence) -> None:
    """The leader joins the new generation and then says nothing. The follower's parked SyncGroup must end with
    REBALANCE_IN_PROGRESS once the leader is removed; Kafka 3.2+ removes it at the rebalance timeout
    (pending sync), every Kafka at its session timeout: both are the short timeout here."""
    t_ms = group_broker.short_session_ms
    hi = t_ms + slack_ms(t_ms)
    async with session(group_broker, evidence) as s:
        a = await stable_single(s, session_ms=t_ms, rebalance_ms=t_ms)
        b, task = await second_member_parked(s, a, session_ms=t_ms, rebalance_ms=t_ms)
        await a.join()
        await asyncio.wait_for(task, s.broker.join_timeout_s)
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        silent = time.monotonic()
        s.timeline.note(f"leader {leader.name} goes silent; follower {follower.name} sends SyncGroup")
        sync = s.background(follower.sync())
        done, _ = await asyncio.wait([sync], timeout=hi / 1000 + 0.5)
        took_ms = (time.monotonic() - silent) * 1000
        msg = within(evidence, "follower's SyncGroup parked behind a silent leader", took_ms, None, hi,
                     session_ms=t_ms, rebalance_ms=t_ms)
        assert done, f"{msg}: the follower's SyncGroup is still parked (the group never gives up on the leader)"
        err, _ = sync.result()
        assert err == REBALANCE_IN_PROGRESS, f"{msg}; the parked SyncGroup answered {err}, Kafka: " \
                                             f"REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS})"
        assert took_ms <= hi, msg
        took = await until_stable(s, [follower], group_broker.join_timeout_s + 2 * t_ms / 1000)
        evidence.timing("follower alone until Stable", took)


@pytest.mark.rule("GROUP-DISCONNECT-RECOVERS")
@pytest.mark.parametrize("parked", ["join", "sync"])
async def test_member_disconnects_while_parked(group_broker: GroupBroker, evidence: Evidence, parked: str) -> None:
    """a and b consume; c's connection closes while its JoinGroup (or SyncGroup) is parked. Kafka still counts a
    parked member, so it may enter the next generation; then it is removed at its session or pending-sync expiry
    and a and b must end Stable without it within about two timeouts."""
    t_ms = group_broker.short_session_ms
    bound_s = (2 * t_ms + slack_ms(2 * t_ms)) / 1000 + group_broker.initial_delay_ms / 1000
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s, t_ms, t_ms)
        c = await s.member(session_ms=t_ms, rebalance_ms=t_ms)
        c_closed = asyncio.Event()

        async def c_parks_and_closes() -> None:
            c_task = await parked_join(s, c)
            if parked == "join":
                await asyncio.sleep(0.1)              # the JoinGroup is on the wire, parked
            else:
                await c_task                          # joined the generation; its SyncGroup waits for the leader
                s.background(c.sync())
                await asyncio.sleep(0.1)
            s.timeline.note(f"c's connection closed with its {parked} parked")
            await c.conn.close()
            c_closed.set()

        async def gate(_leader: Member) -> None:      # the leader assigns only after c's SyncGroup is parked
            await asyncio.wait_for(c_closed.wait(), bound_s)

        closer = s.background(c_parks_and_closes())
        start = time.monotonic()
        took = await until_stable(s, [a, b], bound_s, leader_gate=gate if parked == "sync" else None, since=start,
                                  after=c_closed)
        assert closer.done(), "c never got to close its connection"
        msg = within(evidence, f"a and b Stable again after c closed during {parked}", took, None, bound_s * 1000,
                     session_ms=t_ms, rebalance_ms=t_ms)
        evidence.note("recovered", msg)


@pytest.mark.rule("GROUP-JOIN-ABANDONED")
async def test_leader_abandons_parked_join(group_broker: GroupBroker, evidence: Evidence) -> None:
    """a (the leader) and s are Stable; a rejoins (a leader's rejoin starts a rebalance; its JoinGroup parks until
    s rejoins) and its connection closes. Then b joins and s keeps consuming. Kafka still counts a as joined, so a
    may lead the next generation; it never syncs and is removed at its pending-sync (rebalance timeout) or session
    expiry, so s and b must end Stable without a, b holding its assignment. A broker where the departed leader
    stays (newcomers parked or told REBALANCE_IN_PROGRESS forever) is wedged."""
    t_ms = group_broker.short_session_ms
    bound_s = (2 * t_ms + slack_ms(2 * t_ms)) / 1000 + group_broker.initial_delay_ms / 1000
    async with session(group_broker, evidence) as s:
        x, y = await stable_pair(s, t_ms, t_ms)
        a, stays = (x, y) if x.leader == x.member_id else (y, x)
        a_join = await parked_join(s, a)
        assert not a_join.done(), (f"the leader's rejoin of a Stable group with two members returned "
                                   f"{a_join.result()} at once; Kafka parks it until the other member rejoins")
        await asyncio.sleep(0.1)                      # the JoinGroup is on the wire, parked
        s.timeline.note(f"leader {a.name}'s connection closed with its JoinGroup parked")
        await a.conn.close()
        closed = time.monotonic()
        b = await s.member(session_ms=t_ms, rebalance_ms=t_ms)
        took = await until_stable(s, [stays, b], bound_s, since=closed)
        msg = within(evidence, "newcomer and remaining member Stable after the leader abandoned its JoinGroup",
                     took, None, bound_s * 1000, session_ms=t_ms, rebalance_ms=t_ms)
        d = await s.describe()
        assert a.member_id not in d.members, f"{msg}; the departed leader is still a member: {d}"
        err, got = await b.sync()     # Stable: the member's stored assignment, at once
        assert (err, got) == (NONE, assignment_for(b.member_id)), \
            f"{msg}; the newcomer's SyncGroup in the Stable group answered {err} {got!r}"
        evidence.note("recovered", msg)


@pytest.mark.rule("GROUP-MANY-MEMBERS")
async def test_many_members_join_at_once(group_broker: GroupBroker, evidence: Evidence) -> None:
    n = 20
    async with session(group_broker, evidence) as s:
        members = [await s.member(name=f"m{i}") for i in range(n)]
        start = time.monotonic()
        joined = await asyncio.gather(*(m.join_new() for m in members))
        join_ms = (time.monotonic() - start) * 1000
        within(evidence, f"{n} members' first join", join_ms, None, 10_000 + slack_ms(10_000), members=n)
        gens, leaders = {j.generation for j in joined}, {j.leader for j in joined}
        assert len(gens) == 1 and len(leaders) == 1, f"{n} simultaneous joins gave generations {gens}, leaders {leaders}"
        ids = sorted(m.member_id for m in members)
        assert len(set(ids)) == n, f"member ids not distinct: {ids}"
        leader = next(m for m in members if m.member_id == m.leader)
        followers = [m for m in members if m is not leader]
        assert sorted(leader.members) == ids, (
            f"the leader was told {len(leader.members)} members, {n} joined "
            f"(missing {sorted(set(ids) - set(leader.members))[:5]})")
        follow = [s.background(m.sync()) for m in followers]
        err, mine = await leader.sync({mid: assignment_for(mid) for mid in leader.members})
        got = await asyncio.wait_for(asyncio.gather(*follow), group_broker.join_timeout_s)
        assert err == NONE and mine == assignment_for(leader.member_id), (err, mine)
        wrong = [(m.name, e, a) for m, (e, a) in zip(followers, got, strict=True)
                 if e != NONE or a != assignment_for(m.member_id)]
        assert not wrong, f"followers' SyncGroup answers (name, error, assignment) that are not their own: {wrong[:5]}"
        d = await s.describe()
        assert d.state == "Stable" and sorted(d.members) == ids, f"after every SyncGroup: {d.state}, {len(d.members)}"


@pytest.mark.rule("GROUP-SYNC-ASSIGNMENT")
@pytest.mark.parametrize("left_out_gets", ["own", "nothing"], ids=["all-assigned", "one-left-out"])
async def test_sync_hands_each_member_its_assignment(group_broker: GroupBroker, evidence: Evidence,
                                                     left_out_gets: str) -> None:
    """Four members of one generation: two followers whose SyncGroups are parked before the leader's (one of them
    left out of the leader's assignment in the second case), the leader, and a follower that syncs only after the
    group is Stable."""
    async with session(group_broker, evidence) as s:
        members = [await s.member(name=f"m{i}") for i in range(4)]
        joined = await asyncio.gather(*(m.join_new() for m in members))
        gens, leaders = {j.generation for j in joined}, {j.leader for j in joined}
        assert len(gens) == 1 and len(leaders) == 1, f"four joins at once gave generations {gens}, leaders {leaders}"
        leader = next(m for m in members if m.member_id == m.leader)
        early, left_out, late = (m for m in members if m is not leader)  # ("left_out": maybe, see the case)
        parked = [s.background(early.sync()), s.background(left_out.sync())]
        await asyncio.sleep(0.2)                  # both parked in CompletingRebalance before the leader assigns
        plan = {m.member_id: assignment_for(m.member_id)
                for m in (leader, early, late, *((left_out,) if left_out_gets == "own" else ()))}
        err, mine = await leader.sync(plan)
        (e_err, e_got), (o_err, o_got) = await asyncio.wait_for(asyncio.gather(*parked), s.broker.join_timeout_s)
        err_late, got_late = await late.sync()
        got = {"leader": (err, mine), "parked follower": (e_err, e_got), "left out": (o_err, o_got),
               "late follower": (err_late, got_late)}
        evidence.note("sync_answers", {k: [e, a.decode(errors="replace")] for k, (e, a) in got.items()})
        want = {"leader": (NONE, plan[leader.member_id]), "parked follower": (NONE, plan[early.member_id]),
                "left out": (NONE, plan.get(left_out.member_id, b"")), "late follower": (NONE, plan[late.member_id])}
        wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        assert not wrong, f"SyncGroup answers (error, assignment) that are not what the leader assigned: {wrong}"
        d = await s.describe()
        assert d.state == "Stable", f"after every member's SyncGroup the group is {d.state}"


@pytest.mark.rule("GROUP-STATIC-REJOIN")
async def test_static_member_rejoins_without_rebalance(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s, instance_id="inst-a")
        gen = a.generation
        a2 = await s.member(instance_id="inst-a")
        j = await a2.join()
        assert j.error == NONE and j.member_id and j.member_id != a.member_id and j.generation == gen, (
            f"static member inst-a rejoining with an empty member id: {j}; Kafka: a new member id, "
            f"generation stays {gen}")
        d = await s.describe()
        assert d.state == "Stable" and d.members == [a2.member_id], f"no rebalance expected; DescribeGroups {d}"
        assert await a2.heartbeat() == NONE
        err, assignment = await a2.sync()
        assert err == NONE and assignment == b"A:" + a.member_id.encode(), \
            f"the replacement keeps the instance's assignment: {err} {assignment!r}"


@pytest.mark.rule("GROUP-STATIC-FENCED")
@pytest.mark.parametrize("op", ["heartbeat", "commit"])
async def test_static_old_member_fenced(group_broker: GroupBroker, evidence: Evidence, op: str) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s, instance_id="inst-a")
        a2 = await s.member(instance_id="inst-a")
        assert (await a2.join()).error == NONE
        code = await a.heartbeat() if op == "heartbeat" else await a.commit(s.topic, 1)
        assert code == FENCED_INSTANCE_ID, (
            f"{op} by the replaced member {a.member_id} of instance inst-a answered {code}; Kafka: "
            f"FENCED_INSTANCE_ID ({FENCED_INSTANCE_ID})")


@pytest.mark.rule("GROUP-COOPERATIVE-INCREMENTAL")
def test_cooperative_sticky_revokes_only_moved_partitions(group_broker: GroupBroker, evidence: Evidence) -> None:
    """Two confluent-kafka consumers: when the second joins, the first gives up only the partitions that move.
    The evidence is each consumer's assign/revoke events (the group's requests are librdkafka's own)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    group, topic, partitions = unique("coop"), unique("coop-t"), 4

    async def make_topic() -> None:
        c = await ops.connect_bootstrap(group_broker.bootstrap, evidence=evidence)
        try:
            assert await ops.create_topic(c, topic, partitions) in (0, 36)
            await ops.describe_group(c, group)      # the group as it stands before either consumer (Dead)
        finally:
            await c.close()

    asyncio.run(make_topic())
    events: dict[str, list[tuple[str, set[int]]]] = {"a": [], "b": []}
    owned: dict[str, set[int]] = {"a": set(), "b": set()}

    def consumer(name: str) -> Any:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": group_broker.bootstrap, "group.id": group, "client.id": f"kct-{name}",
            "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False,
            "session.timeout.ms": group_broker.session_ms, "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 1000})

        def on_assign(cons: Any, parts: list[Any]) -> None:
            got = {p.partition for p in parts}
            events[name].append(("assign", got))
            owned[name] |= got
            cons.incremental_assign(parts)

        def on_revoke(cons: Any, parts: list[Any]) -> None:
            lost = {p.partition for p in parts}
            events[name].append(("revoke", lost))
            owned[name] -= lost
            cons.incremental_unassign(parts)

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def poll_until(consumers: dict[str, Any], done: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            for c in consumers.values():
                c.poll(0.05)
        assert done(), f"no settled assignment within {timeout_s}s: owned {owned}, events {events}"

    wait_s = group_broker.initial_delay_ms / 1000 + 30
    a = consumer("a")
    try:
        poll_until({"a": a}, lambda: owned["a"] == set(range(partitions)), wait_s)
        before = set(owned["a"])
        b = consumer("b")
        try:
            poll_until({"a": a, "b": b}, lambda: owned["b"] and owned["a"] | owned["b"] == before
                       and not owned["a"] & owned["b"], wait_s)
            settle = time.monotonic() + 1.0        # let a further (cooperative second) rebalance show itself
            while time.monotonic() < settle:
                a.poll(0.05)
                b.poll(0.05)
            revoked = set().union(*(p for kind, p in events["a"] if kind == "revoke"))
            moved = before - owned["a"]
            assert revoked == moved, (
                f"consumer a revoked {sorted(revoked)} but only {sorted(moved)} moved to b "
                f"(events a: {events['a']}, b: {events['b']})")
            assert owned["a"] and owned["a"] < before, f"a kept {sorted(owned['a'])} of {sorted(before)}"
            assert all(kind == "assign" or p <= moved for kind, p in events["a"]), events["a"]
        finally:
            b.close()
    finally:
        a.close()
        evidence.note("events", {k: [(kind, sorted(p)) for kind, p in v] for k, v in events.items()})
