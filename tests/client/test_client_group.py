"""Group consumer against real brokers: sharing, leave vs kill takeover, resume from commits, static membership,
max.poll.interval, auto-commit. Brokers come from the ``group_broker`` fixture (reference with fast group timers,
and Tansu)."""

from __future__ import annotations

import asyncio
import time

import kafka.errors as Errors
import pytest
from kct_client_helpers import run
from kct_group_helpers import HEARTBEAT_MS, SESSION_MS, Member, covers, create_topic, produce, unique, until

from reference_broker.client.group import GroupConsumer
from reference_broker.client.types import TopicPartition

PARTS = 6


def values(members: list[Member]) -> list[bytes]:
    return [v for m in members for _, _, v in m.records]


def rebalance_noticed(m: Member, since_ns: int) -> float:
    """Seconds from ``since_ns`` until ``m``'s heartbeat first saw REBALANCE_IN_PROGRESS (the rebalance began)."""
    for t, e, d in m.consumer.events:
        if t >= since_ns and e == "rejoin_needed" and "REBALANCE_IN_PROGRESS" in str(d):
            return (t - since_ns) / 1e9
    raise AssertionError(f"{m.name} never saw a rebalance start: {m.consumer.events[-5:]}")


def test_three_members_leave_and_kill_exactly_once(group_broker: tuple[str, str]) -> None:
    """3 members share 6 partitions; one leaves (fast takeover), one is killed (takeover only after the session
    timeout); every record is consumed exactly once because each member commits synchronously after processing."""
    _, bootstrap = group_broker
    session_ms = 2000  # the rebalance after LeaveGroup starts within ~1 heartbeat, far below this

    async def go() -> None:
        topic = await create_topic(bootstrap, PARTS)
        group = unique("g")
        a, b, c = (Member(bootstrap, group, topic, n, session_timeout_ms=session_ms).start() for n in "abc")
        everyone = [a, b, c]
        await until(lambda: covers(everyone, PARTS, topic), 20, "3 members sharing 6 partitions")
        assert all(len(m.assigned) == 2 for m in everyone), [m.assigned for m in everyone]
        sent = await produce(bootstrap, topic, PARTS, 120, "one")
        await until(lambda: set(values(everyone)) >= sent, 15, "phase one consumed")

        # a leaves with LeaveGroup: the coordinator starts the rebalance at once, not after a session timeout
        t_leave = time.monotonic_ns()
        await a.close()
        await until(lambda: covers([b, c], PARTS, topic), 15, "b and c owning all partitions")
        began = rebalance_noticed(b, t_leave)
        assert began < session_ms / 2000, f"rebalance after LeaveGroup began only after {began:.2f}s"
        sent |= await produce(bootstrap, topic, PARTS, 120, "two")
        await until(lambda: set(values(everyone)) >= sent, 15, "phase two consumed")

        # b is killed right after its last commit: no LeaveGroup, only the session timeout removes it
        t_kill = time.monotonic_ns()
        await b.kill()
        await until(lambda: covers([c], PARTS, topic), 20, "c owning all partitions")
        began = rebalance_noticed(c, t_kill)
        assert began >= (session_ms - HEARTBEAT_MS) / 1000 - 0.2, f"kill noticed after {began:.2f}s: before the session"
        sent |= await produce(bootstrap, topic, PARTS, 60, "three")
        await until(lambda: set(values(everyone)) >= sent, 15, "phase three consumed")
        await asyncio.sleep(0.3)  # anything delivered twice shows up now
        await c.close()

        got = values(everyone)
        assert set(got) == sent
        dups = sorted(v for v in set(got) if got.count(v) > 1)
        assert not dups, f"{len(dups)} records consumed twice, e.g. {dups[:5]}"
        # per partition, each member saw increasing offsets
        for m in everyone:
            for p in range(PARTS):
                offs = [o for part, o, _ in m.records if part == p]
                assert offs == sorted(offs), (m.name, p, offs)

    run(go(), timeout=60)


def test_restarted_consumer_resumes_from_committed(group_broker: tuple[str, str]) -> None:
    """A consumer in the same group after a clean close starts exactly at the committed offsets."""
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        first = await produce(bootstrap, topic, 2, 40, "first")
        m = Member(bootstrap, group, topic, "one").start()
        await until(lambda: set(values([m])) >= first, 20, "first half consumed")
        await m.close()
        second = await produce(bootstrap, topic, 2, 40, "second")
        m2 = Member(bootstrap, group, topic, "two").start()
        await until(lambda: set(values([m2])) >= second, 20, "second half consumed")
        await asyncio.sleep(0.3)
        await m2.close()
        assert sorted(values([m2])) == sorted(second)  # nothing from the first half again

    run(go(), timeout=60)


def test_auto_commit_and_close_commit(group_broker: tuple[str, str]) -> None:
    """enable_auto_commit commits consumed positions at the interval, and close() commits the rest."""
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, 1)
        tp = TopicPartition(topic, 0)
        group = unique("g")
        await produce(bootstrap, topic, 1, 10, "a")
        c = GroupConsumer(bootstrap, group, enable_auto_commit=True, auto_commit_interval_ms=200,
                          auto_offset_reset="earliest", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                          fetch_max_wait_ms=50)
        async with c:
            c.subscribe([topic])
            got: list = []
            while len(got) < 10:
                got.extend((await c.poll(200, max_records=4)).get(tp, []))
            loop = asyncio.get_running_loop()
            t_end = loop.time() + 0.6
            while loop.time() < t_end:  # polls with nothing new: the interval elapses, auto-commit fires
                await c.poll(50)
            async with GroupConsumer(bootstrap, group) as probe:
                assert await probe.committed([tp]) == {tp: 10}
            await produce(bootstrap, topic, 1, 3, "b")
            more: list = []
            while len(more) < 3:
                more.extend((await c.poll(200)).get(tp, []))
            c.auto_commit_interval_ms = 60_000  # only close() can commit offset 13 now
        async with GroupConsumer(bootstrap, group) as probe:
            assert await probe.committed([tp]) == {tp: 13}

    run(go(), timeout=40)


def test_static_member_fenced_by_new_instance(group_broker: tuple[str, str], group_quirk) -> None:
    """KIP-345: a second consumer with the same group.instance.id takes over; the old one gets FENCED_INSTANCE_ID."""
    _, bootstrap = group_broker
    group_quirk("tansu", "JoinGroup with a known group.instance.id and an empty member id answers the OLD member's "
                "id and the same generation (observed: both get 'inst-1-<uuid>', generation 0), so nothing is fenced")

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        opts = dict(group_instance_id="inst-1", session_timeout_ms=1000, heartbeat_interval_ms=200,
                    auto_offset_reset="earliest")
        old = GroupConsumer(bootstrap, group, **opts)
        new = GroupConsumer(bootstrap, group, **opts)
        try:
            old.subscribe([topic])
            loop = asyncio.get_running_loop()
            while not old.stable:
                await old.poll(50)
            first_member = old.member_id
            new.subscribe([topic])
            quick = loop.time() + 2  # a known instance id is replaced at once, no rebalance round (KIP-345)
            while not new.stable:
                await new.poll(50)
                assert loop.time() < quick, "replacing a static member took a rebalance round"
            assert new.member_id != first_member
            assert new.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            deadline = loop.time() + 3
            while True:
                try:
                    await old.poll(100)
                except Errors.FencedInstanceIdError:
                    break
                assert loop.time() < deadline, "old static member was never fenced"
        finally:
            await new.close()
            await old.abort()

    run(go(), timeout=30)


def test_max_poll_interval_leaves_group(group_broker: tuple[str, str]) -> None:
    """A member that stops polling longer than max.poll.interval.ms leaves; the other takes its partitions, and
    the stalled member rejoins on its next poll."""
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        busy = Member(bootstrap, group, topic, "busy").start()
        # heartbeats keep a 2 s session alive forever: only the poll interval can make this member leave
        slow = GroupConsumer(bootstrap, group, max_poll_interval_ms=1500, session_timeout_ms=2000,
                             heartbeat_interval_ms=200, auto_offset_reset="earliest")
        try:
            slow.subscribe([topic])
            loop = asyncio.get_running_loop()
            end = loop.time() + 20
            while not (slow.stable and len(slow.assignment()) == 1 and len(busy.assigned) == 1):
                await slow.poll(50)
                assert loop.time() < end, "never shared"
            # stop polling: heartbeats alone must not keep the member in the group past max.poll.interval.ms
            await until(lambda: len(busy.assigned) == 2 and busy.consumer.stable, 10, "busy owning both partitions")
            assert any(e == "poll_timeout" for _, e, _ in slow.events)
            assert not slow.stable
            while not (slow.stable and len(slow.assignment()) == 1):
                await slow.poll(50)
                assert loop.time() < end + 10, "stalled member did not rejoin"
        finally:
            await slow.close()
            await busy.close()

    run(go(), timeout=45)


def test_member_id_required_round_trip(group_broker: tuple[str, str]) -> None:
    """KIP-394: JoinGroup v4+ with an empty member id is answered MEMBER_ID_REQUIRED; the client retries with it."""
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, 1)
        async with GroupConsumer(bootstrap, unique("g"), session_timeout_ms=SESSION_MS) as c:
            c.subscribe([topic])
            while not c.stable:
                await c.poll(50)
            required = [d for _, e, d in c.events if e == "member_id_required"]
            assert required == [c.member_id]

    run(go(), timeout=30)


def test_rebalance_completes_when_all_members_rejoined(group_broker: tuple[str, str], group_quirk) -> None:
    """ClassicGroup completes a join as soon as every known member has rejoined (tryCompleteJoin), not at a timer:
    a second member joining a Stable group is in within about one heartbeat interval, far below the session."""
    _, bootstrap = group_broker
    group_quirk("tansu", "a rebalance of a Stable group completes only ~session.timeout.ms/2 after it began even "
                "when every member rejoined within ~0.2 s (observed: joins answered 1.0 s later with a 2 s session, "
                "5.0 s later with a 10 s session); and followers' SyncGroup is answered ~1 s after the leader's (bench: "
                "leader assigned at 225.64 s, followers at 226.62 s)")

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        first = Member(bootstrap, group, topic, "first", session_timeout_ms=6000, heartbeat_interval_ms=100).start()
        second = Member(bootstrap, group, topic, "second", session_timeout_ms=6000, heartbeat_interval_ms=100)
        try:
            await until(lambda: len(first.assigned) == 2 and first.consumer.stable, 20, "first member stable")
            second.start()
            took = await until(lambda: covers([first, second], 2, topic), 10, "both members sharing")
            assert took < 2.0, f"join of a second member took {took:.2f}s with everyone rejoining promptly"
            # SyncGroup: a follower is answered as soon as the leader's assignment arrives
            assigned = {m.name: max(t for t, e, _ in m.consumer.events if e == "assigned") for m in (first, second)}
            gap = abs(assigned["first"] - assigned["second"]) / 1e9
            assert gap < 0.5, f"follower got its assignment {gap:.2f}s after the leader"
        finally:
            await second.close()
            await first.close()

    run(go(), timeout=40)


def test_expired_member_rejoins_after_unknown_member_id(group_broker: tuple[str, str], group_quirk) -> None:
    """A member whose session expired between heartbeats (a pause longer than session.timeout.ms) is told
    UNKNOWN_MEMBER_ID by its next heartbeat, drops its member id and rejoins with a fresh one (Java's
    resetStateAndRejoin), getting its partitions back."""
    _, bootstrap = group_broker
    group_quirk("tansu", "a lone member heartbeating every 2.5 s with a 1 s session is never expired: its late "
                "heartbeats and auto-commits keep succeeding (no UNKNOWN_MEMBER_ID in 5.5 s)")

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        # heartbeats every 2.5 s against a 1 s session: the coordinator expires the member between heartbeats
        c = GroupConsumer(bootstrap, unique("g"), session_timeout_ms=1000, heartbeat_interval_ms=2500,
                          auto_offset_reset="earliest")
        async with c:
            c.subscribe([topic])
            loop = asyncio.get_running_loop()
            end = loop.time() + 5.5
            while not c.stable:
                await c.poll(50)
            first_id = c.member_id
            while not any(e == "heartbeat_error" and d == "UnknownMemberIdError" for _, e, d in c.events):
                await c.poll(50)
                assert loop.time() < end, f"no UNKNOWN_MEMBER_ID heartbeat: {c.events[-5:]}"
            while not c.stable:
                await c.poll(50)
                assert loop.time() < end, "did not rejoin"
            assert c.member_id != first_id
            assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}

    run(go(), timeout=40)


def test_static_member_restart_keeps_generation_and_partitions(group_broker: tuple[str, str], group_quirk) -> None:
    """KIP-345: a static member that goes away without LeaveGroup and comes back (same group.instance.id, same
    subscription) within the session timeout gets its old partitions back at once; the group does not rebalance."""
    _, bootstrap = group_broker
    group_quirk("tansu", "the returning static member triggers a full rebalance: the other member's heartbeat gets "
                "REBALANCE_IN_PROGRESS, generation 0 -> 1, ~6 s until both are back")

    async def go() -> None:
        topic = await create_topic(bootstrap, 4)
        group = unique("g")
        a = Member(bootstrap, group, topic, "a", group_instance_id="A").start()
        b = Member(bootstrap, group, topic, "b", group_instance_id="B").start()
        b2 = Member(bootstrap, group, topic, "b2", group_instance_id="B")
        try:
            await until(lambda: covers([a, b], 4, topic), 20, "a and b sharing")
            generation, b_parts = a.consumer.generation_id, set(b.assigned)
            await b.close()  # static: close() sends no LeaveGroup
            b2.start()
            await until(lambda: covers([a, b2], 4, topic), 2, "b's partitions back to the returning instance")
            assert b2.assigned == b_parts
            assert a.consumer.generation_id == generation
            assert not any(e == "heartbeat_error" for _, e, _ in a.consumer.events)
        finally:
            await b2.close()
            await a.close()

    run(go(), timeout=40)


def test_poll_returns_at_its_timeout_while_join_is_parked(group_broker: tuple[str, str]) -> None:
    """A JoinGroup parked at the coordinator (waiting for another member to rejoin) does not hold poll past its
    timeout; the join continues in the background and a later poll completes it."""
    kind, bootstrap = group_broker
    if kind == "tansu":
        pytest.skip("client-only behaviour (poll bounded while a join is parked), run against the reference broker; "
                    "on Tansu every join round costs seconds (see test_rebalance_completes_when_all_members_rejoined)")

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        opts = dict(session_timeout_ms=2000, heartbeat_interval_ms=200, max_poll_interval_ms=20_000,
                    auto_offset_reset="earliest")
        async with GroupConsumer(bootstrap, group, **opts) as a, GroupConsumer(bootstrap, group, **opts) as b:
            a.subscribe([topic])
            loop = asyncio.get_running_loop()
            end = loop.time() + 20
            while not a.stable:
                await a.poll(50)
                assert loop.time() < end
            # a stops polling: it sees the rebalance by heartbeat but cannot rejoin, so b's JoinGroup stays parked
            b.subscribe([topic])
            t0 = loop.time()
            for _ in range(3):
                assert await b.poll(100) == {}
            elapsed = loop.time() - t0
            assert elapsed < 1.0, f"three poll(100) calls took {elapsed:.2f}s while b's join was parked"
            assert not b.stable and any(e == "join_sent" for _, e, _ in b.events)
            while not (a.stable and b.stable and len(b.assignment()) == 1):
                await asyncio.gather(a.poll(50), b.poll(50))
                assert loop.time() < end, "join never completed"
            assert a.assignment() | b.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}

    run(go(), timeout=40)


def test_heartbeats_continue_while_a_rebalance_waits_for_poll(group_broker: tuple[str, str]) -> None:
    """A member busy longer than its session timeout when a rebalance starts keeps heartbeating (answered
    REBALANCE_IN_PROGRESS), so it is not expired: on its next poll it rejoins under the same member id."""
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, 2)
        group = unique("g")
        opts = dict(session_timeout_ms=1500, heartbeat_interval_ms=200, max_poll_interval_ms=20_000,
                    auto_offset_reset="earliest")
        async with GroupConsumer(bootstrap, group, **opts) as a, GroupConsumer(bootstrap, group, **opts) as b:
            a.subscribe([topic])
            loop = asyncio.get_running_loop()
            end = loop.time() + 25
            while not a.stable:
                await a.poll(50)
            a_id = a.member_id
            b.subscribe([topic])
            busy_until = loop.time() + 3.0  # twice the session timeout without a poll from a
            while loop.time() < busy_until:
                await b.poll(100)
            while not (a.stable and b.stable and len(b.assignment()) == 1):
                await asyncio.gather(a.poll(50), b.poll(50))
                assert loop.time() < end, "join never completed"
            assert a.member_id == a_id, "a was expired although it kept heartbeating"
            assert not any(d == "UnknownMemberIdError" for _, e, d in a.events if e == "heartbeat_error")

    run(go(), timeout=40)


def test_heartbeat_and_commit_share_one_coordinator_connection(group_broker: tuple[str, str]) -> None:
    """The heartbeat task and the poll path may both find no coordinator connection at once (e.g. after it was
    lost): they must end up on one connection, not open one each and leak all but the last."""
    _, bootstrap = group_broker

    async def go() -> tuple[int, bool]:
        c = GroupConsumer(bootstrap, unique("g"))
        try:
            conns = await asyncio.gather(*(c._ensure_coordinator() for _ in range(4)))  # noqa: SLF001
            return len({id(x) for x in conns}), any(x.closed for x in conns)
        finally:
            await c.close()

    distinct, closed = run(go())
    assert distinct == 1 and not closed
