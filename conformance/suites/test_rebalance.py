"""Classic group rebalances as Kafka's ClassicGroup runs them, observed over the wire with exact error codes.

What is checked: the state machine (Empty → PreparingRebalance → CompletingRebalance → Stable, seen through
DescribeGroups), rebalances on join / leave / session timeout, the error codes members get while a rebalance is
in progress (Heartbeat, SyncGroup, OffsetCommit), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED
(KIP-394), INVALID_SESSION_TIMEOUT, static membership (KIP-345) and cooperative incremental rebalancing
(KIP-429, with confluent-kafka's cooperative-sticky assignor).

Timing: checks need the broker's group.initial.rebalance.delay.ms and group.min.session.timeout.ms. They are read
with DescribeConfigs where the target serves it, from the settings of a reference target, else Kafka's defaults
(3000 ms, 6000 ms) are assumed and only used to size waits. Against the reference broker with default settings the
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
     "group.max.session.timeout.ms] answers INVALID_SESSION_TIMEOUT",
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
rule("GROUP-SESSION-TIMEOUT", "a member that does not heartbeat for its session timeout is removed and the group "
     "rebalances; its id is then UNKNOWN_MEMBER_ID",
     f"{CG}.GroupMetadataManager.classicGroupHeartbeatKey expiry (onExpireHeartbeat)", SUITE)
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

    async def join(self, member_id: str | None = None, **kw: Any) -> ops.Joined:
        """One JoinGroup (MEMBER_ID_REQUIRED is returned, not answered)."""
        j = await ops.join(self.conn, self.group, member_id=self.member_id if member_id is None else member_id,
                           instance_id=self.instance_id, session_ms=kw.pop("session_ms", self.session_ms),
                           timeout=self.broker.join_timeout_s, **kw)
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
        return await ops.sync(self.conn, self.group, self.generation if generation is None else generation,
                              self.member_id if member_id is None else member_id, assignments,
                              instance_id=self.instance_id, timeout=self.broker.join_timeout_s)

    async def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> int:
        return await ops.heartbeat(self.conn, self.group, self.generation if generation is None else generation,
                                   self.member_id if member_id is None else member_id, self.instance_id)

    async def commit(self, topic: str, offset: int, generation: int | None = None,
                     member_id: str | None = None) -> int:
        codes = await ops.commit(self.conn, self.group, self.generation if generation is None else generation,
                                 self.member_id if member_id is None else member_id, {(topic, 0): offset},
                                 instance_id=self.instance_id)
        return codes[(topic, 0)]

    async def leave(self) -> int:
        _top, code = await ops.leave(self.conn, self.group, self.member_id, self.instance_id)
        return code


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

    async def connect(self) -> Wire:
        c = await ops.coordinator(self.broker.bootstrap, self.group, evidence=self.evidence)
        self.conns.append(c)
        return c

    async def member(self, instance_id: str | None = None, session_ms: int | None = None) -> Member:
        return Member(await self.connect(), self.group, self.broker, instance_id,
                      session_ms or self.broker.session_ms)

    async def start(self) -> None:
        self.admin = await self.connect()
        boot = await ops.connect_bootstrap(self.broker.bootstrap, evidence=self.evidence)
        self.conns.append(boot)
        assert await ops.create_topic(boot, self.topic, 1) in (0, 36)

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
        for c in self.conns:
            with contextlib.suppress(Exception):
                await c.close()


@contextlib.asynccontextmanager
async def session(broker: GroupBroker, evidence: Evidence | None, name: str = "g") -> AsyncIterator[Session]:
    """A Session whose requests are recorded in the check's ``evidence`` (shown with any divergence)."""
    s = Session(broker, unique(name), evidence)
    try:
        await s.start()
        yield s
    finally:
        await s.close()


async def stable_single(s: Session, instance_id: str | None = None, session_ms: int | None = None) -> Member:
    """One member, joined and synced: the group is Stable at the member's generation."""
    m = await s.member(instance_id, session_ms)
    await m.join_new()
    err, assignment = await m.sync({m.member_id: b"A:" + m.member_id.encode()})
    assert err == NONE and assignment, f"leader SyncGroup failed: {err} {assignment!r}"
    return m


async def second_member_parked(s: Session, a: Member, instance_id: str | None = None,
                               session_ms: int | None = None) -> tuple[Member, asyncio.Task]:
    """A second member whose JoinGroup is parked (PreparingRebalance) until ``a`` rejoins, as Kafka parks it."""
    b = await s.member(instance_id, session_ms)
    if instance_id is None:
        first = await b.join()
        assert first.error in (NONE, MEMBER_ID_REQUIRED), f"JoinGroup of a second member: {first}"
        if first.error == NONE:
            raise AssertionError(f"JoinGroup of a second member returned at once without a rebalance: {first}")
    task = s.background(b.join())
    # DescribeGroups saying PreparingRebalance is the quick sign; the parked JoinGroup is what the rule needs
    # (GROUP-STATES checks the state names), so without the sign wait a little and require the join still parked.
    deadline = time.monotonic() + 1.0
    while not task.done() and time.monotonic() < deadline:
        if (await s.describe()).state == "PreparingRebalance":
            break
        await asyncio.sleep(0.02)
    if task.done():
        raise AssertionError(f"a new member's JoinGroup to a Stable group returned {task.result()} before the "
                             f"existing member {a.member_id} rejoined; Kafka parks it until every member rejoined "
                             "(or the rebalance timeout)")
    return b, task


async def stable_pair(s: Session, session_ms: int | None = None) -> tuple[Member, Member]:
    """Two members in one Stable generation; built from single join + second join + rejoin."""
    a = await stable_single(s, session_ms=session_ms)
    b, task = await second_member_parked(s, a, session_ms=session_ms)
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


# ------------------------------------------------------------------------------------------------- checks


@pytest.mark.rule("GROUP-DESCRIBE-DEAD")
async def test_describe_unknown_group_is_dead(group_broker: GroupBroker, evidence: Evidence) -> None:
    async with session(group_broker, evidence) as s:
        d = await s.describe()
        assert (d.error, d.state, d.members) == (NONE, "Dead", []), f"unknown group {s.group} described as {d}"


# ClassicGroupState: the states each state may move to. "Dead" first: an unknown group is described as Dead, and
# a group is created Empty (DeleteGroups, the other way to Dead, is not exercised here).
NEXT_STATES = {
    "Dead": {"Empty"},
    "Empty": {"PreparingRebalance"},
    "PreparingRebalance": {"CompletingRebalance", "Empty"},
    "CompletingRebalance": {"Stable", "PreparingRebalance"},
    "Stable": {"PreparingRebalance"},
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
        a = await s.member()
        seen.append((await s.describe()).state)
        j = await a.join()
        if j.error == MEMBER_ID_REQUIRED:     # the group now exists, Empty, with the id handed out pending
            seen.append((await s.describe()).state)
            j = await observe(s, seen, a.join())
        assert j.error == NONE, j
        await observe(s, seen, a.sync({a.member_id: b"A"}))
        b = await s.member()
        await observe(s, seen, b.join())                  # MEMBER_ID_REQUIRED (v4+) or the join itself
        task = s.background(b.join()) if b.generation < 0 else None
        await s.wait_state("PreparingRebalance")
        await observe(s, seen, a.join())
        if task is not None:
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
    if not group_broker.known:
        pytest.skip(f"target {group_broker.name!r} does not tell its group.initial.rebalance.delay.ms "
                    "(no DescribeConfigs for the broker)")
    async with session(group_broker, evidence) as s:
        a = await s.member()
        first = await a.join()
        t0 = time.monotonic()
        j = await a.join() if first.error == MEMBER_ID_REQUIRED else first
        waited_ms = (time.monotonic() - t0) * 1000
        assert j.error == NONE, j
        delay = group_broker.initial_delay_ms
        assert waited_ms >= delay * 0.9 - 20, (
            f"first JoinGroup of an Empty group completed after {waited_ms:.0f} ms; "
            f"group.initial.rebalance.delay.ms is {delay}")


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
@pytest.mark.parametrize("where", ["below-min", "above-max"])
async def test_invalid_session_timeout(group_broker: GroupBroker, evidence: Evidence, where: str) -> None:
    session_ms = group_broker.min_session_ms - 1 if where == "below-min" else group_broker.max_session_ms + 1
    async with session(group_broker, evidence) as s:
        a = await s.member()
        j = await a.join(session_ms=session_ms)
        assert j.error == INVALID_SESSION_TIMEOUT, (
            f"JoinGroup with session timeout {session_ms} ms (bounds [{group_broker.min_session_ms}, "
            f"{group_broker.max_session_ms}]{'' if group_broker.known else ', Kafka defaults assumed'}): {j}")


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
    """The generation before the current one (what a member that missed a rebalance sends) and the one after."""
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        others = [g for g in (a.generation - 1, a.generation + 1) if g >= 0]
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
@pytest.mark.parametrize("op", ["heartbeat", "sync", "commit"])
async def test_unknown_member(group_broker: GroupBroker, evidence: Evidence, op: str) -> None:
    async with session(group_broker, evidence) as s:
        a = await stable_single(s)
        ghost = "kct-not-a-member-" + secrets.token_hex(4)
        if op == "heartbeat":
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


@pytest.mark.rule("GROUP-SESSION-TIMEOUT")
async def test_session_timeout_removes_member(group_broker: GroupBroker, evidence: Evidence) -> None:
    """b goes silent; a keeps heartbeating and learns of the rebalance once b's session expired."""
    session_ms = max(group_broker.min_session_ms, 1000)
    async with session(group_broker, evidence) as s:
        a, b = await stable_pair(s, session_ms)
        silent_since = time.monotonic()
        code = NONE
        deadline = silent_since + session_ms / 1000 + 10
        while code == NONE and time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, session_ms / 5000))
            code = await a.heartbeat()
        noticed_ms = (time.monotonic() - silent_since) * 1000
        assert code == REBALANCE_IN_PROGRESS, f"a's Heartbeat answered {code} ({noticed_ms:.0f} ms after b went silent)"
        assert noticed_ms >= session_ms * 0.9, (
            f"b was removed {noticed_ms:.0f} ms after its last request; its session timeout is {session_ms} ms")
        j = await a.join()
        assert j.error == NONE and j.members == [a.member_id], f"the next generation must not contain b: {j}"
        assert await b.heartbeat() == UNKNOWN_MEMBER_ID


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
def test_cooperative_sticky_revokes_only_moved_partitions(group_broker: GroupBroker) -> None:
    """Two confluent-kafka consumers: when the second joins, the first gives up only the partitions that move."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    group, topic, partitions = unique("coop"), unique("coop-t"), 4

    async def make_topic() -> None:
        c = await ops.connect_bootstrap(group_broker.bootstrap)
        try:
            assert await ops.create_topic(c, topic, partitions) in (0, 36)
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
