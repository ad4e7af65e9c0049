"""ClassicGroup semantics observed over the wire with the protocol-level client (exact error codes)."""
from __future__ import annotations

import asyncio
import time

from kafka import errors as E
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
from kafka.protocol.consumer import OffsetDeleteRequest

from tests.broker._wire import create_topic

from ._proto import commit, connect, fetch_offsets, heartbeat, join, join_new, leave, sync

MEMBER_ID_REQUIRED, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC = 79, 69, 68, 86


async def describe(c, group: str):
    r = await c.request(DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False))
    return r.body.groups[0]


async def stable_single(c, group: str, **kw):
    j = await join_new(c, group, **kw)
    assert j.error_code == 0, j
    s = await sync(c, group, j.generation_id, j.member_id, {j.member_id: b"assignment-1"},
                   instance_id=kw.get("instance_id"))
    assert s.error_code == 0 and s.assignment == b"assignment-1"
    return j


async def test_member_id_required_then_join(broker):
    """KIP-394: a v4+ join without member id gets MEMBER_ID_REQUIRED and an id to come back with."""
    c = await connect(broker)
    r = await join(c, "g")
    assert r.error_code == MEMBER_ID_REQUIRED and r.member_id
    r2 = await join(c, "g", member_id=r.member_id)
    assert r2.error_code == 0 and r2.member_id == r.member_id and r2.leader == r.member_id
    assert r2.generation_id == 1 and [m.member_id for m in r2.members] == [r.member_id]
    await c.close()


async def test_invalid_session_timeout(broker):
    c = await connect(broker)
    r = await join(c, "g", session_ms=100)
    assert r.error_code == E.InvalidSessionTimeoutError.errno
    await c.close()


async def test_stale_generation_and_unknown_member(broker):
    """Heartbeat, SyncGroup and OffsetCommit: ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID as ClassicGroup returns."""
    c = await connect(broker)
    await create_topic(c, "t")
    j = await stable_single(c, "g")
    gen, me = j.generation_id, j.member_id
    assert await heartbeat(c, "g", gen, me) == 0
    assert await heartbeat(c, "g", gen - 1, me) == E.IllegalGenerationError.errno
    assert await heartbeat(c, "g", gen, "nobody") == E.UnknownMemberIdError.errno
    assert (await sync(c, "g", gen + 1, me)).error_code == E.IllegalGenerationError.errno
    assert (await sync(c, "g", gen, "nobody")).error_code == E.UnknownMemberIdError.errno
    assert await commit(c, "g", gen, me, {("t", 0): (5, "m")}) == {("t", 0): 0}
    assert await commit(c, "g", gen - 1, me, {("t", 0): (6, None)}) == {("t", 0): E.IllegalGenerationError.errno}
    assert await commit(c, "g", gen, "nobody", {("t", 0): (6, None)}) == {("t", 0): E.UnknownMemberIdError.errno}
    assert await commit(c, "g", -1, "", {("t", 0): (6, None)}) == {("t", 0): E.UnknownMemberIdError.errno}, \
        "generation -1 is only for Empty groups"
    assert await fetch_offsets(c, "g", [("t", 0)]) == {("t", 0): (5, "m", 0)}
    await c.close()


async def test_errors_during_rebalance(broker):
    """PreparingRebalance: heartbeat REBALANCE_IN_PROGRESS, sync REBALANCE_IN_PROGRESS, commit allowed.
    CompletingRebalance: heartbeat NONE, commit REBALANCE_IN_PROGRESS (ClassicGroup.validateOffsetCommit)."""
    a, b = await connect(broker), await connect(broker)
    await create_topic(a, "t")
    ja = await stable_single(a, "g", rebalance_ms=20_000)
    gen = ja.generation_id
    rb = await join(b, "g")                      # MEMBER_ID_REQUIRED
    b_join = asyncio.ensure_future(join(b, "g", member_id=rb.member_id, rebalance_ms=20_000))
    await asyncio.sleep(0.2)
    assert not b_join.done(), "join must park until every member rejoined"
    assert await heartbeat(a, "g", gen, ja.member_id) == E.RebalanceInProgressError.errno
    assert (await sync(a, "g", gen, ja.member_id)).error_code == E.RebalanceInProgressError.errno
    assert await commit(a, "g", gen, ja.member_id, {("t", 0): (1, None)}) == {("t", 0): 0}
    assert (await describe(a, "g")).group_state == "PreparingRebalance"
    ja2 = await join(a, "g", member_id=ja.member_id, rebalance_ms=20_000)
    jb = await asyncio.wait_for(b_join, 5)
    assert ja2.error_code == 0 and jb.error_code == 0 and ja2.generation_id == jb.generation_id == gen + 1
    assert ja2.leader == ja.member_id and len(ja2.members) == 2 and jb.members == []
    assert (await describe(a, "g")).group_state == "CompletingRebalance"
    assert await heartbeat(b, "g", jb.generation_id, jb.member_id) == 0
    assert await commit(b, "g", jb.generation_id, jb.member_id, {("t", 0): (2, None)}) == \
        {("t", 0): E.RebalanceInProgressError.errno}
    follower_sync = asyncio.ensure_future(sync(b, "g", jb.generation_id, jb.member_id))
    await asyncio.sleep(0.2)
    assert not follower_sync.done(), "a follower's SyncGroup parks until the leader's assignment"
    s = await sync(a, "g", ja2.generation_id, ja.member_id, {ja.member_id: b"A", jb.member_id: b"B"})
    assert s.assignment == b"A" and (await asyncio.wait_for(follower_sync, 5)).assignment == b"B"
    d = await describe(a, "g")
    assert d.group_state == "Stable" and d.protocol_data == "range" and len(d.members) == 2
    await a.close()
    await b.close()


async def joined_pair(a, b, group: str, **kw):
    """Both members in one generation: rejoin together until the join phase holds both, as clients do — a member
    told UNKNOWN_MEMBER_ID (removed at a rebalance timeout while the other was alone) asks for a new id."""
    ids = {a: (await join(a, group)).member_id, b: (await join(b, group)).member_id}
    for _ in range(6):
        ra, rb = await asyncio.wait_for(asyncio.gather(join(a, group, member_id=ids[a], **kw),
                                                       join(b, group, member_id=ids[b], **kw)), 10)
        if ra.generation_id == rb.generation_id and ra.error_code == rb.error_code == 0:
            return ra, rb
        for conn, r in ((a, ra), (b, rb)):
            if r.error_code in (E.UnknownMemberIdError.errno, MEMBER_ID_REQUIRED):
                ids[conn] = (await join(conn, group)).member_id
    raise AssertionError("two members never settled into one generation")


async def test_rebalance_timeout_removes_members_that_do_not_rejoin(broker):
    """completeClassicGroupJoin at the rebalance timeout drops dynamic members that did not rejoin. The leader's
    rejoin starts the rebalance (a follower rejoining a Stable group unchanged would just get its generation)."""
    a, b = await connect(broker), await connect(broker)
    ra, rb = await joined_pair(a, b, "g", rebalance_ms=1500, session_ms=30_000)
    gen = ra.generation_id
    (lc, lr), (fc, fr) = ((a, ra), (b, rb)) if ra.leader == ra.member_id else ((b, rb), (a, ra))
    assert (await sync(lc, "g", gen, lr.member_id, {})).error_code == 0
    t0 = time.monotonic()
    again = await join(lc, "g", member_id=lr.member_id, rebalance_ms=1500, session_ms=30_000)  # follower never does
    waited = time.monotonic() - t0
    assert again.error_code == 0 and again.generation_id == gen + 1
    assert [m.member_id for m in again.members] == [lr.member_id], "the follower must be removed at the timeout"
    assert 1.4 <= waited < 5, f"join completed after {waited:.2f}s, rebalance timeout 1.5s"
    assert await heartbeat(fc, "g", gen, fr.member_id) == E.UnknownMemberIdError.errno
    await a.close()
    await b.close()


async def test_session_timeout_evicts_member(broker):
    c = await connect(broker)
    j = await stable_single(c, "g", session_ms=800)
    await asyncio.sleep(1.6)                                   # no heartbeats
    d = await describe(c, "g")
    assert d.group_state == "Empty" and d.members == []
    assert await heartbeat(c, "g", j.generation_id, j.member_id) == E.UnknownMemberIdError.errno
    await c.close()


async def test_static_member_replaced_without_rebalance_and_old_one_fenced(broker):
    """KIP-345: the same group.instance.id rejoining gets a new member id, the group stays Stable at the same
    generation, and the old member id is FENCED_INSTANCE_ID for heartbeat, commit and sync."""
    a, b = await connect(broker), await connect(broker)
    await create_topic(a, "t")
    ja = await stable_single(a, "g", instance_id="inst-1")
    jb = await join(b, "g", instance_id="inst-1")
    assert jb.error_code == 0 and jb.member_id != ja.member_id and jb.generation_id == ja.generation_id
    assert (await describe(a, "g")).group_state == "Stable"
    gen = ja.generation_id
    assert await heartbeat(a, "g", gen, ja.member_id, "inst-1") == E.FencedInstanceIdError.errno
    assert await commit(a, "g", gen, ja.member_id, {("t", 0): (1, None)}, instance_id="inst-1") == \
        {("t", 0): E.FencedInstanceIdError.errno}
    assert (await sync(a, "g", gen, ja.member_id, instance_id="inst-1")).error_code == \
        E.FencedInstanceIdError.errno
    assert await heartbeat(b, "g", gen, jb.member_id, "inst-1") == 0
    s = await sync(b, "g", gen, jb.member_id, instance_id="inst-1")
    assert s.error_code == 0 and s.assignment == b"assignment-1", "the replacement keeps the assignment"
    lv = await leave(a, "g", [("", "inst-1")])
    assert lv.members[0].error_code == 0 and (await describe(a, "g")).group_state in ("PreparingRebalance", "Empty")
    await a.close()
    await b.close()


async def test_commits_without_group_management(broker):
    """Generation -1: accepted for a new or Empty group; a missing group with a generation is ILLEGAL_GENERATION
    (v8) or GROUP_ID_NOT_FOUND (v9); unknown partitions are UNKNOWN_TOPIC_OR_PARTITION."""
    c = await connect(broker)
    await create_topic(c, "t", partitions=2)
    assert await commit(c, "simple", -1, "", {("t", 0): (10, "x"), ("t", 1): (20, None)}) == \
        {("t", 0): 0, ("t", 1): 0}
    assert await commit(c, "simple", -1, "", {("nope", 0): (1, None)}) == \
        {("nope", 0): E.UnknownTopicOrPartitionError.errno}
    assert await commit(c, "ghost", 3, "m", {("t", 0): (1, None)}, version=8) == \
        {("t", 0): E.IllegalGenerationError.errno}
    assert await commit(c, "ghost", 3, "m", {("t", 0): (1, None)}, version=9) == {("t", 0): GROUP_ID_NOT_FOUND}
    # null metadata is stored as "" (OffsetAndMetadata.NO_METADATA); nothing committed answers -1 and ""
    assert await fetch_offsets(c, "simple", None) == {("t", 0): (10, "x", 0), ("t", 1): (20, "", 0)}
    assert await fetch_offsets(c, "ghost", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    await c.close()


async def test_delete_groups_and_offsets(broker):
    c = await connect(broker)
    await create_topic(c, "t")
    j = await stable_single(c, "g")
    await commit(c, "g", j.generation_id, j.member_id, {("t", 0): (3, None)})
    r = await c.request(DeleteGroupsRequest[2](groups_names=["g", "missing"]))
    assert {x.group_id: x.error_code for x in r.body.results} == {"g": NON_EMPTY_GROUP, "missing": GROUP_ID_NOT_FOUND}
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    od = await c.request(OffsetDeleteRequest[0](group_id="g", topics=[
        T(name="t", partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert od.body.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED_TO_TOPIC
    await leave(c, "g", [(j.member_id, None)])
    await asyncio.sleep(0.1)
    assert (await describe(c, "g")).group_state == "Empty"
    od = await c.request(OffsetDeleteRequest[0](group_id="g", topics=[
        T(name="t", partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert od.body.topics[0].partitions[0].error_code == 0
    assert await fetch_offsets(c, "g", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    await commit(c, "g", -1, "", {("t", 0): (4, None)})
    r = await c.request(DeleteGroupsRequest[2](groups_names=["g"]))
    assert r.body.results[0].error_code == 0
    assert await fetch_offsets(c, "g", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    assert (await describe(c, "g")).group_state == "Dead"
    await c.close()


async def test_offsets_survive_broker_restart(durable_broker):
    c = await connect(durable_broker)
    await create_topic(c, "t", partitions=3)
    j = await stable_single(c, "g")
    await commit(c, "g", j.generation_id, j.member_id, {("t", 0): (7, "meta-0"), ("t", 2): (9, None)})
    await commit(c, "g", j.generation_id, j.member_id, {("t", 0): (8, "meta-1")})
    await commit(c, "deleted", -1, "", {("t", 1): (1, None)})
    await c.request(DeleteGroupsRequest[2](groups_names=["deleted"]))
    await c.close()
    durable_broker.restart()
    c = await connect(durable_broker)
    assert await fetch_offsets(c, "g", None) == {("t", 0): (8, "meta-1", 0), ("t", 2): (9, "", 0)}
    assert await fetch_offsets(c, "deleted", None) == {}
    j2 = await join_new(c, "g")
    assert j2.generation_id > j.generation_id, "generations continue after a restart"
    await c.close()
