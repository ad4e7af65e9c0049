"""KIP-848 consumer groups (``group.protocol=consumer``) as Kafka's GroupMetadataManager runs them, over the wire
with ConsumerGroupHeartbeat (API 68).

What is checked: a join gets a member epoch and, within a bound, the partitions; a second member gets a partition
only after the member that held it stopped reporting it (revoke before assign: no partition owned by two members
at one epoch); member epochs never go down; FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID for epochs and ids the group
does not know, Kafka's "previous epoch" allowance; a member that stops heartbeating is removed within its session
timeout and its partitions go to the others; leaving (epoch -1); UNRELEASED_INSTANCE_ID for a static member's
instance id still in use; UNSUPPORTED_ASSIGNOR; OffsetCommit with a stale member epoch (STALE_MEMBER_EPOCH).

Members are driven by a minimal KIP-848 client loop per member (``CMember``): each heartbeat reports the partitions
it holds, a member "revokes" by dropping partitions from what it reports. Apache Kafka 4.4.0 may compute the target
assignment after the heartbeat that bumped the group epoch (state Assigning), so checks wait for assignments by
heartbeating, bounded by heartbeat intervals and the session timeout, never by fixed sleeps.

Timing: the session timeout and heartbeat interval are the broker's (group.consumer.session.timeout.ms,
group.consumer.heartbeat.interval.ms), read with DescribeConfigs (the kafka target runs with 3000 / 500 ms,
fixtures/kafka.py). Against a reference target with Kafka's long defaults the module starts a sibling reference
broker with the kafka target's short settings and the same fault switches.
"""
from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import errors as E
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.rules import rule
from conformance.wire import Wire
from fixtures.target import Target
from reference_broker.messages import ConsumerGroupHeartbeatRequest

SUITE = "consumer_protocol"
CG = "org.apache.kafka.coordinator.group"
NONE = 0
FENCED_MEMBER_EPOCH = E.FencedMemberEpochError.errno
UNKNOWN_MEMBER_ID = E.UnknownMemberIdError.errno
UNRELEASED_INSTANCE_ID = E.UnreleasedInstanceIdError.errno
UNSUPPORTED_ASSIGNOR = E.UnsupportedAssignorError.errno
STALE_MEMBER_EPOCH = E.StaleMemberEpochError.errno

rule("CGP-JOIN-ASSIGNMENT", "a member joining an empty consumer group (ConsumerGroupHeartbeat epoch 0, v1 with its "
     "own member id) gets NONE, its member id, an epoch > 0 and the heartbeat interval, and — heartbeating — every "
     "partition of the topic it subscribes to", f"KIP-848; {CG}.GroupMetadataManager.consumerGroupHeartbeat; "
     f"{CG}.assignor.UniformAssignor", SUITE)
rule("CGP-REVOKE-BEFORE-ASSIGN", "when a second member joins, the partitions moving to it are first taken out of "
     "the first member's assignment and given to the second only once the first stops reporting them as owned: no "
     "partition is in the second's assignment while the first still owns it; in the end the two assignments are "
     "disjoint and cover the topic", f"KIP-848 (reconciliation); {CG}.modern.consumer.CurrentAssignmentBuilder "
     "(UNREVOKED_PARTITIONS / UNRELEASED_PARTITIONS, partition epochs)", SUITE)
rule("CGP-EPOCHS-GROW", "a member's epoch in ConsumerGroupHeartbeat answers never goes down, through other members "
     "joining and leaving; a member leaving bumps the epoch the others reach",
     f"KIP-848 (group epoch / member epoch); {CG}.GroupMetadataManager.consumerGroupLeave (group epoch + 1)", SUITE)
rule("CGP-FENCED-EPOCH", "a heartbeat with an epoch above the member's is FENCED_MEMBER_EPOCH; one with the "
     "member's previous epoch and owned partitions within its assignment is accepted (the answer that bumped it "
     "may have been lost); an unknown member id is UNKNOWN_MEMBER_ID",
     f"{CG}.GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid; "
     f"{CG}.modern.consumer.ConsumerGroup.getOrMaybeCreateMember", SUITE)
rule("CGP-SESSION-EXPIRY", "a member that stops heartbeating is removed once group.consumer.session.timeout.ms "
     "passes (not much earlier, not much later): the member that keeps heartbeating owns every partition within the session timeout "
     "plus slack, and the silent one's next heartbeat is UNKNOWN_MEMBER_ID",
     f"{CG}.GroupMetadataManager.scheduleConsumerGroupSessionTimeout (fences the member)", SUITE)
rule("CGP-LEAVE", "ConsumerGroupHeartbeat with epoch -1 answers NONE with epoch -1; the member is gone "
     "(UNKNOWN_MEMBER_ID afterwards) and its partitions go to the remaining member within a few heartbeats",
     f"{CG}.GroupMetadataManager.consumerGroupLeave", SUITE)
rule("CGP-STATIC-UNRELEASED", "a member joining with the group.instance.id of a static member that has not left "
     "(epoch -2) is UNRELEASED_INSTANCE_ID", f"KIP-848 static membership; {CG}.GroupMetadataManager."
     "throwIfInstanceIdIsUnreleased", SUITE)
rule("CGP-UNSUPPORTED-ASSIGNOR", "a ServerAssignor the broker does not have is UNSUPPORTED_ASSIGNOR; `range` and "
     "`uniform` (Kafka's default group.consumer.assignors) are accepted",
     f"{CG}.GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid", SUITE)
rule("CGP-OFFSET-STALE-EPOCH", "OffsetCommit v9+ from a consumer-group member is accepted with its current member "
     "epoch; a greater epoch is STALE_MEMBER_EPOCH; an older one is STALE_MEMBER_EPOCH for a partition the member "
     "does not hold or was assigned after that epoch (Kafka 4.4.0 accepts it for partitions held since then); an "
     "unknown member id is UNKNOWN_MEMBER_ID. OffsetFetch v9+ naming the member answers with its current epoch, "
     "STALE_MEMBER_EPOCH with another, UNKNOWN_MEMBER_ID for an unknown member, and serves an admin (no member id, "
     "epoch -1)", f"{CG}.modern.consumer.ConsumerGroup.validateOffsetCommit (createAssignmentEpochValidator: "
     "assignment epoch per partition) / validateOffsetFetch", SUITE)

rule("CGP-REBALANCE-TIMEOUT", "a member asked to revoke partitions that keeps heartbeating but never stops "
     "reporting them is fenced once its rebalance timeout passes (its heartbeat is then UNKNOWN_MEMBER_ID or "
     "FENCED_MEMBER_EPOCH) and the other member gets every partition",
     f"{CG}.GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout (UNREVOKED_PARTITIONS)", SUITE)
rule("CGP-VANISH-MID-RECONCILIATION", "a member asked to give up partitions whose connection then closes (no "
     "leave, no more heartbeats, nothing revoked) is removed at its session timeout, not held until its (longer) "
     "rebalance timeout: the newcomer owns every partition within the session timeout plus slack",
     f"{CG}.GroupMetadataManager.scheduleConsumerGroupSessionTimeout (runs whatever the member's state; "
     "UNREVOKED_PARTITIONS does not keep a silent member)", SUITE)
rule("CGP-TOPIC-CREATED", "a member subscribed to a topic name that does not exist yet is assigned its partitions "
     "once the topic is created, without rejoining", f"KIP-848 (metadata changes bump the group epoch); "
     f"{CG}.GroupMetadataManager.onNewMetadataImage / subscription metadata refresh", SUITE)
rule("CGP-STATIC-REJOIN", "a static member leaving with epoch -2 keeps its partitions reserved (the other member's "
     "assignment does not change, meanwhile or after); rejoining (epoch 0, same group.instance.id, new member id) "
     "it gets the same partitions back",
     f"KIP-848 static membership; {CG}.GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember", SUITE)

rule("CGP-REGEX", "a member subscribed with SubscribedTopicRegex (v1) is assigned the partitions of the topics the "
     "regex matches in full — one existing at the join and one created afterwards — and none of a topic it does "
     "not match", f"KIP-848 (regex subscriptions, broker-side); {CG}.GroupMetadataManager (regex resolution "
     "refreshed on metadata changes)", SUITE)

SETTING_KEYS = ["group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms"]
DEFAULTS = {"group.consumer.session.timeout.ms": "45000", "group.consumer.heartbeat.interval.ms": "5000"}
FAST = {"group.consumer.session.timeout.ms": "3000", "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100"}
PARTITIONS = 4


@dataclass(frozen=True)
class CgpBroker:
    name: str
    bootstrap: str
    session_ms: int
    heartbeat_ms: int

    @property
    def settle_s(self) -> float:
        """How long a group may take to hand out partitions that are free: Kafka 4.4.0 computes the target
        assignment asynchronously (Assigning), within a few heartbeats; generous for loaded machines."""
        return max(10.0, 4 * self.session_ms / 1000)

    def expiry_bound_s(self) -> float:
        """The session timeout plus slack (timer granularity, a heartbeat interval, a loaded machine): 1.5 s or
        30 %, whichever is larger, as the classic suite's GROUP-SESSION-TIMEOUT."""
        s = self.session_ms / 1000
        return s + max(1.5, 0.3 * s) + self.heartbeat_ms / 1000


async def _settings(bootstrap: str) -> dict[str, str]:
    c = await ops.connect_bootstrap(bootstrap)
    try:
        brokers, _ = await ops.metadata(c, [])
        for broker_id in sorted(brokers):
            found = await ops.broker_configs(c, broker_id, SETTING_KEYS)
            if found and SETTING_KEYS[0] in found:
                return found
    except AssertionError:
        pass
    finally:
        await c.close()
    return dict(DEFAULTS)


def _broker(name: str, bootstrap: str, s: dict[str, str]) -> CgpBroker:
    return CgpBroker(name, bootstrap, int(s.get(SETTING_KEYS[0], DEFAULTS[SETTING_KEYS[0]])),
                     int(s.get(SETTING_KEYS[1], DEFAULTS[SETTING_KEYS[1]])))


@pytest.fixture(scope="module")
def cgp_broker(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CgpBroker]:
    """The session target, or for a reference target with long consumer-group timings a sibling reference broker
    with short ones (and the same fault switches)."""
    from fixtures.reference import ReferenceTarget

    if isinstance(target, ReferenceTarget):
        cfg = target.config()
        settings = {k: str(v) for k, v in cfg["settings"].items()}
        if int(settings.get(SETTING_KEYS[0], DEFAULTS[SETTING_KEYS[0]])) <= 10_000:
            yield _broker(target.name, target.bootstrap, settings)
            return
        sibling_cfg = {"memory": "true", **{f"kafka.{k}": v for k, v in settings.items()},
                       **{f"kafka.{k}": v for k, v in FAST.items()}}
        if cfg.get("faults"):
            sibling_cfg["faults"] = ",".join(cfg["faults"])
        with ReferenceTarget(sibling_cfg, work_dir=Path(tmp_path_factory.mktemp("cgp-broker"))) as sibling:
            yield _broker(f"{target.name} (sibling with {FAST})", sibling.bootstrap, FAST)
        return
    yield _broker(target.name, target.bootstrap, asyncio.run(_settings(target.bootstrap)))


TP = tuple[uuid.UUID, int]


@dataclass
class CMember:
    """One KIP-848 member on its own connection: a client-generated member id (v1), its epoch, what the broker
    assigned it, and what it reports as owned (``owned``; a member revokes by dropping partitions from it)."""

    conn: Wire
    group: str
    topic: str
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex[:22])
    instance_id: str | None = None
    epoch: int = 0
    assigned: set[TP] = field(default_factory=set)
    owned: set[TP] = field(default_factory=set)
    epochs: list[int] = field(default_factory=list)
    interval_ms: int = 0

    rebalance_timeout_ms: int = 30_000

    regex: str | None = None

    async def heartbeat(self, epoch: int | None = None, *, full: bool = False, assignor: str | None = None,
                        owned: set[TP] | None = None, member_id: str | None = None) -> Any:
        """One ConsumerGroupHeartbeat; a join (epoch 0) or ``full`` sends every field, else only the owned
        partitions. Updates the member's epoch and assignment from a NONE answer; returns the answer."""
        e = self.epoch if epoch is None else epoch
        own = self.owned if owned is None else owned
        join = e == 0 or full
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in sorted(own):
            by_topic.setdefault(tid, []).append(p)
        R = ConsumerGroupHeartbeatRequest
        req = R(group_id=self.group, member_id=self.member_id if member_id is None else member_id, member_epoch=e,
                instance_id=self.instance_id, rack_id=None, rebalance_timeout_ms=self.rebalance_timeout_ms if join else -1,
                subscribed_topic_names=[self.topic] if join and self.regex is None else None,
                subscribed_topic_regex=self.regex if join else None,
                server_assignor=assignor,
                topic_partitions=[] if e == 0 else [R.TopicPartitions(topic_id=t, partitions=ps)
                                                    for t, ps in by_topic.items()])
        r = (await self.conn.request("ConsumerGroupHeartbeat", req)).body
        if r.error_code == NONE and e >= 0 and (member_id is None or member_id == self.member_id):
            if e == 0:
                self.epochs.clear()
            self.epoch = r.member_epoch
            self.epochs.append(r.member_epoch)
            self.interval_ms = r.heartbeat_interval_ms
            if r.assignment is not None:
                self.assigned = {(tp.topic_id, p) for tp in r.assignment.topic_partitions for p in tp.partitions}
                self.owned |= self.assigned          # takes new ones at once, gives up old ones in revoke()
        return r

    def revoke(self) -> None:
        """Stop owning what the broker no longer assigns (the client's onPartitionsRevoked)."""
        self.owned &= self.assigned

    async def until(self, cond: Any, within_s: float, what: str, *, revoke: bool = True,
                    others: tuple[CMember, ...] = ()) -> None:
        """Heartbeat (this member and ``others``, each revoking what it lost unless ``revoke`` is False) at the
        broker's interval until ``cond()``; fail after ``within_s``."""
        deadline = time.monotonic() + within_s
        while True:
            for m in (self, *others):
                r = await m.heartbeat()
                assert r.error_code == NONE, f"{what}: heartbeat of {m.member_id} answered {r}"
                if revoke:
                    m.revoke()
            if cond():
                return
            assert time.monotonic() < deadline, f"{what} not within {within_s:.1f} s (assigned {self.assigned})"
            await asyncio.sleep(max(self.interval_ms, 50) / 1000)


def unique(prefix: str) -> str:
    return f"kct-{prefix}-{secrets.token_hex(4)}"


@asynccontextmanager
async def group(b: CgpBroker, evidence: Evidence) -> AsyncIterator[tuple[Wire, str, str]]:
    """A topic of PARTITIONS partitions, a fresh group name and a Wire to its coordinator (ready)."""
    boot = await Wire.connect(b.bootstrap, evidence=evidence)
    try:
        topic = await boot.create_topic(unique("cgp-t"), partitions=PARTITIONS)
        name = unique("cgp")
        await boot.coordinator_ready(name)
        yield boot, topic, name
    finally:
        await boot.close()


async def member(boot: Wire, name: str, topic: str, **kw: Any) -> CMember:
    """A member on a connection of its own to the group's coordinator."""
    co = await boot.coordinator(name)
    own = await Wire.connect(f"{co.conn.host}:{co.conn.port}", evidence=boot.evidence)
    boot._others.append(own)
    return CMember(own, name, topic, **kw)


async def joined(b: CgpBroker, boot: Wire, name: str, topic: str, **kw: Any) -> CMember:
    m = await member(boot, name, topic, **kw)
    r = await m.heartbeat(0)
    assert r.error_code == NONE, f"join (epoch 0) answered {r}"
    return m


async def stable_pair(b: CgpBroker, boot: Wire, name: str, topic: str) -> tuple[CMember, CMember]:
    """Two members sharing the topic, each with a non-empty assignment, disjoint and complete."""
    a = await joined(b, boot, name, topic)
    await a.until(lambda: len(a.assigned) == PARTITIONS, b.settle_s, "the first member getting every partition")
    c = await joined(b, boot, name, topic)
    await a.until(lambda: a.assigned and c.assigned and len(a.assigned | c.assigned) == PARTITIONS
                  and not a.assigned & c.assigned and a.owned == a.assigned, b.settle_s,
                  "two members sharing the partitions", others=(c,))
    return a, c


@pytest.mark.rule("CGP-JOIN-ASSIGNMENT")
async def test_join_gets_every_partition(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    async with group(cgp_broker, evidence) as (boot, topic, name):
        m = await member(boot, name, topic)
        r = await m.heartbeat(0)
        assert (r.error_code, r.member_id) == (NONE, m.member_id), f"join answered {r}"
        assert r.member_epoch > 0 and r.heartbeat_interval_ms == cgp_broker.heartbeat_ms, r
        assert r.assignment is not None, f"a join is a full request: the answer carries the assignment: {r}"
        await m.until(lambda: len(m.assigned) == PARTITIONS, cgp_broker.settle_s, "every partition assigned")


@pytest.mark.rule("CGP-REVOKE-BEFORE-ASSIGN")
async def test_revoke_before_assign(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a = await joined(b, boot, name, topic)
        await a.until(lambda: len(a.assigned) == PARTITIONS, b.settle_s, "the first member getting every partition")
        c = await joined(b, boot, name, topic)
        # the first member keeps reporting every partition (it has not revoked yet): the newcomer must get none of
        # them, however often both heartbeat, while the first member's assignment shrinks
        deadline = time.monotonic() + b.settle_s
        while len(a.assigned) == PARTITIONS:
            await a.heartbeat()
            await c.heartbeat()
            assert not c.assigned & a.owned, (f"partitions {sorted(c.assigned & a.owned)} assigned to the newcomer "
                                              "while the first member still owns them")
            assert time.monotonic() < deadline, "the first member was never asked to give up partitions"
            await asyncio.sleep(b.heartbeat_ms / 1000)
        for _ in range(3):                               # a few more rounds, still without revoking
            await c.heartbeat()
            await a.heartbeat()
            assert not c.assigned & a.owned, (f"partitions {sorted(c.assigned & a.owned)} assigned to the newcomer "
                                              "while the first member still owns them")
            await asyncio.sleep(b.heartbeat_ms / 1000)
        # now it revokes: the newcomer gets them
        await c.until(lambda: c.assigned and not c.assigned & a.assigned
                      and len(c.assigned | a.assigned) == PARTITIONS, b.settle_s,
                      "the newcomer getting the revoked partitions", others=(a,))


@pytest.mark.rule("CGP-EPOCHS-GROW")
async def test_epochs_only_grow(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a, c = await stable_pair(b, boot, name, topic)
        d = await joined(b, boot, name, topic)
        await a.until(lambda: all(m.assigned for m in (a, c, d)) and a.epoch == c.epoch == d.epoch, b.settle_s,
                      "three members at one epoch", others=(c, d))
        before = a.epoch
        r = await d.heartbeat(-1)
        assert r.error_code == NONE, r
        await a.until(lambda: a.epoch > before and c.epoch > before, b.settle_s,
                      "the remaining members reaching the epoch after the leave", others=(c,))
        for m in (a, c, d):
            down = [(x, y) for x, y in zip(m.epochs, m.epochs[1:], strict=False) if y < x]
            assert not down, f"member {m.member_id}'s epochs went down: {m.epochs}"


@pytest.mark.rule("CGP-FENCED-EPOCH")
async def test_fenced_member_epoch(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a, c = await stable_pair(b, boot, name, topic)
        r = await a.heartbeat(a.epoch + 1)
        assert r.error_code == FENCED_MEMBER_EPOCH, f"a heartbeat with epoch {a.epoch + 1} (member at {a.epoch}): {r}"
        previous = [e for e in a.epochs if e < a.epoch]
        if previous:
            r = await a.heartbeat(previous[-1], owned=a.owned & a.assigned)
            assert r.error_code == NONE, (f"the previous epoch {previous[-1]} with owned partitions inside the "
                                          f"assignment must be accepted: {r}")
        r = await a.heartbeat(a.epoch, member_id=uuid.uuid4().hex[:22])
        assert r.error_code == UNKNOWN_MEMBER_ID, f"an unknown member id: {r}"


@pytest.mark.rule("CGP-SESSION-EXPIRY")
async def test_session_expiry_reassigns(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a, c = await stable_pair(b, boot, name, topic)
        await c.heartbeat()                     # c's last heartbeat: its session runs from here
        silent_since = time.monotonic()
        await a.until(lambda: len(a.assigned) == PARTITIONS, b.expiry_bound_s(),
                      "the member that keeps heartbeating owning every partition after the other's session expired")
        took = time.monotonic() - silent_since
        assert took >= 0.8 * b.session_ms / 1000, (f"the silent member's partitions moved after {took:.1f} s, well "
                                                   f"before its session timeout ({b.session_ms} ms)")
        r = await c.heartbeat()
        assert r.error_code == UNKNOWN_MEMBER_ID, f"the expired member's heartbeat after {took:.1f} s: {r}"


@pytest.mark.rule("CGP-LEAVE")
async def test_leave(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a, c = await stable_pair(b, boot, name, topic)
        r = await c.heartbeat(-1)
        assert (r.error_code, r.member_epoch) == (NONE, -1), f"leave answered {r}"
        # within a few heartbeat intervals, well inside the session timeout: leaving is not expiring
        await a.until(lambda: len(a.assigned) == PARTITIONS, b.session_ms / 1000,
                      "the remaining member owning every partition after the other left")
        r = await c.heartbeat(c.epoch)
        assert r.error_code == UNKNOWN_MEMBER_ID, f"the member that left: {r}"


@pytest.mark.rule("CGP-STATIC-UNRELEASED")
async def test_static_instance_unreleased(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        instance = unique("inst")
        await joined(b, boot, name, topic, instance_id=instance)
        other = await member(boot, name, topic, instance_id=instance)
        r = await other.heartbeat(0)
        assert r.error_code == UNRELEASED_INSTANCE_ID, f"a second member with instance id {instance}: {r}"


@pytest.mark.rule("CGP-UNSUPPORTED-ASSIGNOR")
async def test_unsupported_assignor(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        m = await member(boot, name, topic)
        r = await m.heartbeat(0, assignor="kct-no-such-assignor")
        assert r.error_code == UNSUPPORTED_ASSIGNOR, f"an unknown server assignor: {r}"
        for assignor in ("range", "uniform"):
            r = await m.heartbeat(0, assignor=assignor)
            assert r.error_code == NONE, f"server assignor {assignor}: {r}"


@pytest.mark.rule("CGP-OFFSET-STALE-EPOCH")
async def test_offset_commit_member_epoch(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        a, c = await stable_pair(b, boot, name, topic)
        if (a.conn.broker_max_version("OffsetCommit") or 0) < 9:
            raise AssertionError("the target does not serve OffsetCommit v9 (member epochs, KIP-848)")
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition

        async def commit(epoch: int, member_id: str, partition: int) -> int:
            req = OffsetCommitRequest(group_id=name, generation_id_or_member_epoch=epoch, member_id=member_id,
                                      group_instance_id=None, topics=[T(name=topic, partitions=[
                                          P(partition_index=partition, committed_offset=0, committed_leader_epoch=-1,
                                            committed_metadata="")])])
            r = await a.conn.request("OffsetCommit", req, version=9)
            return r.body.topics[0].partitions[0].error_code

        mine = sorted(p for _, p in a.assigned)[0]
        theirs = sorted(p for _, p in c.assigned)[0]
        assert await commit(a.epoch, a.member_id, mine) == NONE, "a commit with the member's epoch"
        assert await commit(a.epoch, a.member_id, theirs) == NONE, "the member's epoch, another member's partition"
        for stale, p, what in ((a.epoch + 1, mine, "a greater epoch"),
                               (0, mine, "an epoch older than the partition's assignment"),
                               (a.epoch - 1, theirs, "an older epoch for a partition the member does not hold")):
            code = await commit(stale, a.member_id, p)
            assert code == STALE_MEMBER_EPOCH, f"{what}: epoch {stale} (member at {a.epoch}), partition {p}: {code}"
        code = await commit(a.epoch, uuid.uuid4().hex[:22], mine)
        assert code == UNKNOWN_MEMBER_ID, f"a commit from an unknown member: {code}"
        if (a.conn.broker_max_version("OffsetFetch") or 0) < 9:
            raise AssertionError("the target does not serve OffsetFetch v9 (member epochs, KIP-848)")
        G = OffsetFetchRequest.OffsetFetchRequestGroup

        async def fetch(member_id: str | None, epoch: int) -> int:
            req = OffsetFetchRequest(groups=[G(group_id=name, member_id=member_id, member_epoch=epoch, topics=[
                G.OffsetFetchRequestTopics(name=topic, partition_indexes=[mine])])], require_stable=False)
            return (await a.conn.request("OffsetFetch", req, version=9)).body.groups[0].error_code

        for member_id, epoch, want, what in ((a.member_id, a.epoch, NONE, "the member at its epoch"),
                                             (a.member_id, a.epoch - 1, STALE_MEMBER_EPOCH, "an older epoch"),
                                             (a.member_id, a.epoch + 1, STALE_MEMBER_EPOCH, "a greater epoch"),
                                             (uuid.uuid4().hex[:22], a.epoch, UNKNOWN_MEMBER_ID, "an unknown member"),
                                             (None, -1, NONE, "an admin (no member id, epoch -1)")):
            code = await fetch(member_id, epoch)
            assert code == want, f"OffsetFetch v9 from {what} (epoch {epoch}, member at {a.epoch}): {code}"


@pytest.mark.rule("CGP-VANISH-MID-RECONCILIATION")
async def test_member_vanishes_mid_reconciliation(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    """The KIP-848 side of GROUP-JOIN-ABANDONED: a owns every partition; c joins; once a is told to give some up,
    a's connection closes without revoking. a's rebalance timeout is three times the bound, so only its session
    expiry can free the partitions in time; a broker that keeps a revoking member alive is wedged."""
    b = cgp_broker
    bound = b.expiry_bound_s()
    async with group(b, evidence) as (boot, topic, name):
        a = await member(boot, name, topic, rebalance_timeout_ms=int(3 * bound * 1000))
        assert (await a.heartbeat(0)).error_code == NONE
        await a.until(lambda: len(a.assigned) == PARTITIONS, b.settle_s, "the first member getting every partition")
        c = await joined(b, boot, name, topic)
        await a.until(lambda: len(a.assigned) < PARTITIONS, b.settle_s, "the first member asked to give partitions up",
                      revoke=False, others=(c,))
        last = time.monotonic()                 # a's last heartbeat: its session runs from here
        assert a.owned - a.assigned, "a must still own the partitions it was asked to revoke"
        await a.conn.close()
        await c.until(lambda: len(c.assigned) == PARTITIONS, bound,
                      "the newcomer owning every partition after the revoking member's connection closed")
        took = time.monotonic() - last
        evidence.timing("newcomer owns every partition after the revoking member vanished", took * 1000,
                        expect_max_ms=bound * 1000, session_ms=b.session_ms, rebalance_ms=int(3 * bound * 1000))


@pytest.mark.rule("CGP-REBALANCE-TIMEOUT")
async def test_rebalance_timeout_fences(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        rebalance_ms = max(2 * b.heartbeat_ms, 2000)
        a = await member(boot, name, topic, rebalance_timeout_ms=rebalance_ms)
        assert (await a.heartbeat(0)).error_code == NONE
        await a.until(lambda: len(a.assigned) == PARTITIONS, b.settle_s, "the first member getting every partition")
        c = await joined(b, boot, name, topic)
        # a heartbeats on without revoking: once asked to give partitions up, its rebalance timeout runs
        deadline = time.monotonic() + b.settle_s
        while len(a.assigned) == PARTITIONS:
            assert (await a.heartbeat()).error_code == NONE
            await c.heartbeat()
            assert time.monotonic() < deadline, "the first member was never asked to give up partitions"
            await asyncio.sleep(b.heartbeat_ms / 1000)
        asked = time.monotonic()
        bound = rebalance_ms / 1000 + max(1.5, 0.3 * rebalance_ms / 1000) + b.heartbeat_ms / 1000
        fenced = None
        while fenced is None:
            r = await a.heartbeat()
            if r.error_code != NONE:
                fenced = r.error_code
                break
            await c.heartbeat()
            c.revoke()
            assert time.monotonic() - asked < bound, (f"a member that never revoked was not fenced within its "
                                                      f"rebalance timeout ({rebalance_ms} ms) + slack")
            await asyncio.sleep(b.heartbeat_ms / 1000)
        assert fenced in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH), f"the member's heartbeat after the timeout: {fenced}"
        await c.until(lambda: len(c.assigned) == PARTITIONS, b.settle_s,
                      "the other member getting every partition after the fenced one")


@pytest.mark.rule("CGP-TOPIC-CREATED")
async def test_topic_created_later(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        later = unique("cgp-later")
        m = await member(boot, name, later)
        r = await m.heartbeat(0)
        assert r.error_code == NONE and not m.assigned, f"a join subscribed to a topic that does not exist: {r}"
        await boot.create_topic(later, partitions=2)
        await m.until(lambda: len(m.assigned) == 2, b.settle_s, "the partitions of the topic created after the join")


@pytest.mark.rule("CGP-STATIC-REJOIN")
async def test_static_rejoin_keeps_assignment(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        instance = unique("inst")
        s = await joined(b, boot, name, topic, instance_id=instance)
        await s.until(lambda: len(s.assigned) == PARTITIONS, b.settle_s, "the static member getting every partition")
        o = await joined(b, boot, name, topic)
        await s.until(lambda: s.assigned and o.assigned and not s.assigned & o.assigned
                      and len(s.assigned | o.assigned) == PARTITIONS and s.owned == s.assigned, b.settle_s,
                      "two members sharing the partitions", others=(o,))
        had, others_had = set(s.assigned), set(o.assigned)
        r = await s.heartbeat(-2)
        assert (r.error_code, r.member_epoch) == (NONE, -2), f"a static member leaving to come back: {r}"
        for _ in range(3):          # meanwhile its partitions stay reserved for the instance: nothing moves
            await o.heartbeat()
            o.revoke()
            assert o.assigned == others_had, (f"the other member's assignment changed while the static member was "
                                              f"away: {others_had} → {o.assigned}")
            await asyncio.sleep(b.heartbeat_ms / 1000)
        back = await member(boot, name, topic, instance_id=instance)
        r = await back.heartbeat(0)
        assert r.error_code == NONE, f"the instance rejoining with a new member id: {r}"
        await back.until(lambda: back.assigned == had, b.settle_s, "the rejoined instance getting its partitions back",
                         others=(o,))
        assert o.assigned == others_had, f"the other member's assignment changed: {others_had} → {o.assigned}"


@pytest.mark.rule("CGP-REGEX")
async def test_regex_subscription(cgp_broker: CgpBroker, evidence: Evidence) -> None:
    b = cgp_broker
    async with group(b, evidence) as (boot, topic, name):
        prefix = unique("cgp-rx")
        await boot.create_topic(f"{prefix}-a", partitions=2)
        await boot.create_topic(f"x{prefix}-b", partitions=1)          # matches the regex only in part
        m = await member(boot, name, topic, regex=f"{prefix}-.*")
        r = await m.heartbeat(0)
        assert r.error_code == NONE, f"a join subscribed by regex: {r}"
        await m.until(lambda: len(m.assigned) == 2, b.settle_s, "the partitions of the topic the regex matches")
        await boot.create_topic(f"{prefix}-c", partitions=3)
        await m.until(lambda: len(m.assigned) == 5, b.settle_s,
                      "the partitions of a matching topic created after the join")
