"""Hypothesis state machines that drive a real broker and compare every answer with ``model``.

``LogMachine``: produce / fetch / list_offsets / delete_records on topics it creates. ``GroupMachine``: join /
leave / heartbeat / commit / fetch_offsets on one classic group. Every rule compares the broker's answer with the
model; invariants re-check what a client can read after every step.

How they run: each machine instance owns one asyncio event loop and runs every step's requests to completion on
it (hypothesis rules are synchronous). The broker address is class configuration (``configure``), not a
constructor argument, so hypothesis's printed counterexample — ``state = LogMachine()`` followed by the steps — is
a runnable program once ``LogMachine.configure(bootstrap)`` ran; ``conformance.properties.replay`` writes exactly
that file. Bundle values are plain tuples and strings, so their reprs are valid Python.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from conformance.wire import Wire

from . import ops
from .model import EARLIEST, LATEST, NONE, GroupModel, PartitionModel

STEP_TIMEOUT_S = 20.0    # a join completes within the rebalance timeout (10 s) plus any initial delay
values_st = st.lists(st.one_of(st.binary(max_size=6), st.none()), min_size=1, max_size=4)
offsets_st = st.integers(min_value=0, max_value=16)


class _BrokerMachine(RuleBasedStateMachine):
    """Common plumbing: the event loop, connections, and the bootstrap address (class configuration)."""

    bootstrap: ClassVar[str | None] = None
    _seq: ClassVar[itertools.count] = itertools.count()

    @classmethod
    def configure(cls, bootstrap: str) -> None:
        """Point every later instance at a broker (the test fixture, or a replay script, calls this)."""
        cls.bootstrap = bootstrap

    def __init__(self) -> None:
        super().__init__()
        if self.bootstrap is None:
            raise RuntimeError(f"{type(self).__name__}.configure(bootstrap) was not called")
        self.loop = asyncio.new_event_loop()
        self.conns: list[Wire] = []
        self.prefix = f"prop-{secrets.token_hex(3)}-{next(self._seq)}"

    def run(self, coro: Any) -> Any:
        """Run one step's requests on this machine's loop."""
        return self.loop.run_until_complete(asyncio.wait_for(coro, STEP_TIMEOUT_S))

    def connect(self, to_coordinator_of: str | None = None) -> Wire:
        assert self.bootstrap is not None
        if to_coordinator_of is None:
            c = self.run(ops.connect_bootstrap(self.bootstrap, client_id="kct-property"))
            c.pin_leader = True    # the model is one log per partition on the broker this connection talks to
        else:
            c = self.run(ops.coordinator(self.bootstrap, to_coordinator_of, client_id="kct-property"))
        self.conns.append(c)
        return c

    def teardown(self) -> None:
        """Close connections and the loop; safe to call twice (a replay script calls it on failure too)."""
        if self.loop.is_closed():
            return
        for c in self.conns:
            with contextlib.suppress(Exception):
                self.run(c.close())
        self.loop.close()


class LogMachine(_BrokerMachine):
    """Produce (acks=all), fetch, list offsets and delete records on a few partitions; the model is a list each."""

    partitions = Bundle("partitions")

    def __init__(self) -> None:
        super().__init__()
        self.conn = self.connect()
        self.model: dict[tuple[str, int], PartitionModel] = {}
        self.touched: tuple[str, int] | None = None
        self.topics = 0

    @precondition(lambda self: self.topics < 2)      # a few partitions, reused: sequences build up history
    @rule(target=partitions, count=st.integers(min_value=1, max_value=2))
    def create_topic(self, count: int) -> Any:
        self.topics += 1
        name = f"{self.prefix}-t{self.topics}"
        err = self.run(ops.create_topic(self.conn, name, count, replication_factor=-1))
        assert err == NONE, f"CreateTopics {name} answered {err}"
        tps = [(name, p) for p in range(count)]
        for tp in tps:
            self.model[tp] = PartitionModel()
        self.run(self._wait_leaders(name, count))
        return multiple(*tps)

    async def _wait_leaders(self, name: str, count: int) -> None:
        # leaders in Metadata *and* serving: Kafka's replica manager applies a new topic just after its Metadata
        # cache does, so a produce right away may meet NOT_LEADER_OR_FOLLOWER (Wire.wait_topic_ready)
        await self.conn.wait_topic_ready(name, count)

    @rule(tp=partitions, values=values_st)
    def produce(self, tp: tuple[str, int], values: list[bytes | None]) -> None:
        self.touched = tp
        m = self.model[tp]
        err, base, log_start = self.run(ops.produce(self.conn, tp[0], tp[1], values, acks=-1))
        expected = m.produce(values)
        assert (err, base) == (NONE, expected), \
            f"Produce {len(values)} records to {tp}: broker (error {err}, base offset {base}), model (0, {expected})"
        assert log_start in (-1, m.log_start), f"Produce answer log_start_offset {log_start}, model {m.log_start}"

    @rule(tp=partitions, offset=offsets_st)
    def fetch(self, tp: tuple[str, int], offset: int) -> None:
        self.touched = tp
        m = self.model[tp]
        f = self.run(ops.fetch(self.conn, tp[0], tp[1], offset, max_wait_ms=1))
        err, records = m.fetch(offset)
        got = [(o, v) for o, v in f.records if o >= offset]
        assert f.error == err, (f"Fetch {tp} at {offset}: broker error {f.error}, model {err} "
                                f"(log start {m.log_start}, HW {m.hw})")
        if err == NONE:
            assert (f.high_watermark, f.log_start) == (m.hw, m.log_start), (
                f"Fetch {tp} at {offset}: broker HW {f.high_watermark} / log start {f.log_start}, "
                f"model {m.hw} / {m.log_start}")
            assert got == records, f"Fetch {tp} at {offset}: broker records {got}, model {records}"

    @rule(tp=partitions, which=st.sampled_from([EARLIEST, LATEST]))
    def list_offsets(self, tp: tuple[str, int], which: int) -> None:
        self.touched = tp
        err, offset = self.run(ops.list_offsets(self.conn, tp[0], tp[1], which))
        expected = self.model[tp].list_offsets(which)
        assert (err, offset) == (NONE, expected), (
            f"ListOffsets {'EARLIEST' if which == EARLIEST else 'LATEST'} {tp}: broker (error {err}, offset "
            f"{offset}), model (0, {expected})")

    @rule(tp=partitions, offset=st.one_of(st.just(-1), offsets_st))
    def delete_records(self, tp: tuple[str, int], offset: int) -> None:
        self.touched = tp
        m = self.model[tp]
        err, low = self.run(ops.delete_records(self.conn, tp[0], tp[1], offset))
        exp_err, exp_low = m.delete_records(offset)
        assert err == exp_err, f"DeleteRecords {tp} before {offset}: broker error {err}, model {exp_err} (HW {m.hw})"
        if err == NONE:
            assert low == exp_low, f"DeleteRecords {tp} before {offset}: broker low watermark {low}, model {exp_low}"

    @invariant()
    def touched_partition_offsets_match(self) -> None:
        """After every step, the partition just used reports the model's log start and HW."""
        if self.touched is None:
            return
        tp, m = self.touched, self.model[self.touched]
        e1, earliest = self.run(ops.list_offsets(self.conn, tp[0], tp[1], EARLIEST))
        e2, latest = self.run(ops.list_offsets(self.conn, tp[0], tp[1], LATEST))
        assert (e1, earliest, e2, latest) == (NONE, m.log_start, NONE, m.hw), (
            f"{tp} after the step: ListOffsets EARLIEST {earliest} (error {e1}), LATEST {latest} (error {e2}); "
            f"model log start {m.log_start}, HW {m.hw}")


class GroupMachine(_BrokerMachine):
    """One classic group driven through complete rebalances; members join, leave, heartbeat and commit."""

    members = Bundle("members")
    departed = Bundle("departed")
    session_ms: ClassVar[int] = 10_000

    def __init__(self) -> None:
        super().__init__()
        self.group = f"{self.prefix}-g"
        self.topic = f"{self.prefix}-t"
        self.admin = self.connect(self.group)
        self.model = GroupModel()
        self.conn_of: dict[str, Wire] = {}
        self.id_of: dict[str, str] = {}
        self.names = itertools.count(1)

    @initialize()
    def create_topic(self) -> None:
        err = self.run(ops.create_topic(self.admin, self.topic, 2, replication_factor=-1))
        assert err == NONE, f"CreateTopics {self.topic} answered {err}"
        # Kafka's CreateTopics answers once the controller committed the topic; a broker's metadata cache may lag,
        # and OffsetCommit refuses a topic it does not know (UNKNOWN_TOPIC_OR_PARTITION, KafkaApis)
        self.run(self.admin.wait_topic_ready(self.topic, 2))

    async def _rebalance(self, joining: dict[str, str], first: str | None = None) -> list[ops.Joined]:
        """Everyone in ``joining`` (name → member id) joins, then the leader assigns and all sync.

        ``first`` (a new member) joins alone until the group is PreparingRebalance, then the others: a follower
        whose JoinGroup reaches a Stable group with unchanged metadata is answered at once with the current
        generation and no rebalance (ClassicGroup, GroupMetadataManager.classicGroupJoinExistingMember), so
        sending every join at once would make the generations each member sees depend on arrival order."""
        def join(n: str) -> Any:
            return ops.join(self.conn_of[n], self.group, member_id=joining[n], session_ms=self.session_ms,
                            rebalance_ms=10_000, timeout=STEP_TIMEOUT_S)

        head = None
        if first is not None:
            head = asyncio.ensure_future(join(first))
            for _ in range(200):
                if (await ops.describe_group(self.admin, self.group)).state == "PreparingRebalance" or head.done():
                    break
                await asyncio.sleep(0.01)
        rest = [n for n in joining if n != first]
        results_rest = await asyncio.gather(*(join(n) for n in rest))
        by_name = dict(zip(rest, results_rest, strict=True))
        if head is not None:
            by_name[first] = await head
        results = [by_name[n] for n in joining]
        errors = {n: j.error for n, j in zip(joining, results, strict=True)}
        assert set(errors.values()) == {NONE}, f"JoinGroup answers during a rebalance: {errors}"
        for n, j in zip(joining, results, strict=True):
            self.id_of[n] = j.member_id
        gens = {j.generation for j in results}
        assert gens == {self.model.generation + 1}, (
            f"rebalance of {sorted(joining)}: generations {gens}, model {self.model.generation + 1}")
        leaders = {j.leader for j in results}
        assert len(leaders) == 1 and next(iter(leaders)) in self.id_of.values(), f"leaders {leaders}"
        leader = next(iter(leaders))
        lj = next(j for j in results if j.member_id == leader)
        assert sorted(lj.members) == sorted(j.member_id for j in results), (
            f"the leader was told of {sorted(lj.members)}, members are {sorted(j.member_id for j in results)}")
        gen = next(iter(gens))
        assignments = {j.member_id: f"a-{j.member_id}".encode() for j in results}
        syncs = await asyncio.gather(*(
            ops.sync(self.conn_of[n], self.group, gen, self.id_of[n],
                     assignments if self.id_of[n] == leader else None, timeout=STEP_TIMEOUT_S) for n in joining))
        for n, (err, assignment) in zip(joining, syncs, strict=True):
            assert (err, assignment) == (NONE, assignments[self.id_of[n]]), \
                f"SyncGroup of {n}: error {err}, assignment {assignment!r}"
        return results

    @precondition(lambda self: len(self.model.members) < 4)
    @rule(target=members)
    def join(self) -> str:
        name = f"m{next(self.names)}"
        self.conn_of[name] = self.connect(self.group)
        first = self.run(ops.join(self.conn_of[name], self.group, session_ms=self.session_ms, rebalance_ms=10_000,
                                  timeout=STEP_TIMEOUT_S))
        assert first.error in (NONE, ops.MEMBER_ID_REQUIRED) and first.member_id, f"first JoinGroup: {first}"
        if first.error == NONE:
            raise AssertionError(f"JoinGroup v4+ without a member id must answer MEMBER_ID_REQUIRED: {first}")
        joining = {n: self.id_of[n] for n in self.model_names()}
        joining[name] = first.member_id
        self.run(self._rebalance(joining, first=name))
        self.model.rebalanced([self.id_of[n] for n in joining])
        return name

    def model_names(self) -> list[str]:
        return [n for n, mid in self.id_of.items() if mid in self.model.members]

    @rule(target=departed, name=consumes(members))
    def leave(self, name: str) -> str:
        _top, err = self.run(ops.leave(self.conn_of[name], self.group, self.id_of[name]))
        assert err == NONE, f"LeaveGroup of {name}: {err}"
        rest = [n for n in self.model_names() if n != name]
        if rest:
            self.run(self._rebalance({n: self.id_of[n] for n in rest}))
        self.model.rebalanced([self.id_of[n] for n in rest])
        return name

    @rule(name=members, partition=st.integers(0, 1), offset=st.integers(0, 1000), stale=st.booleans())
    def commit(self, name: str, partition: int, offset: int, stale: bool) -> None:
        gen = self.model.generation - (1 if stale else 0)
        codes = self.run(ops.commit(self.conn_of[name], self.group, gen, self.id_of[name],
                                    {(self.topic, partition): offset}))
        expected = self.model.commit(self.id_of[name], gen, (self.topic, partition), offset)
        got = codes[(self.topic, partition)]
        assert got == expected, (f"OffsetCommit by {name} with generation {gen} (group at {self.model.generation}): "
                                 f"broker {got}, model {expected}")

    @rule(name=departed, partition=st.integers(0, 1), offset=st.integers(0, 1000))
    def commit_departed(self, name: str, partition: int, offset: int) -> None:
        codes = self.run(ops.commit(self.admin, self.group, self.model.generation, self.id_of[name],
                                    {(self.topic, partition): offset}))
        expected = self.model.commit(self.id_of[name], self.model.generation, (self.topic, partition), offset)
        assert codes[(self.topic, partition)] == expected, \
            f"OffsetCommit by departed {name}: broker {codes[(self.topic, partition)]}, model {expected}"

    @rule(partition=st.integers(0, 1), offset=st.integers(0, 1000))
    def simple_commit(self, partition: int, offset: int) -> None:
        """Generation -1, no member id: accepted only while the group has no members (a "simple" group)."""
        codes = self.run(ops.commit(self.admin, self.group, -1, "", {(self.topic, partition): offset}))
        expected = self.model.commit(None, -1, (self.topic, partition), offset)
        assert codes[(self.topic, partition)] == expected, \
            f"generation-less OffsetCommit (members {len(self.model.members)}): broker " \
            f"{codes[(self.topic, partition)]}, model {expected}"

    @precondition(lambda self: self.model.generation > 0)
    @rule(name=members, stale=st.booleans())
    def heartbeat(self, name: str, stale: bool) -> None:
        gen = self.model.generation - (1 if stale else 0)
        code = self.run(ops.heartbeat(self.conn_of[name], self.group, gen, self.id_of[name]))
        expected = self.model.heartbeat(self.id_of[name], gen)
        assert code == expected, f"Heartbeat by {name} with generation {gen}: broker {code}, model {expected}"

    @invariant()
    def group_matches_model(self) -> None:
        """DescribeGroups and OffsetFetch agree with the model after every step."""
        if self.model.generation == 0 and not self.model.committed:
            return                        # the coordinator does not know the group yet
        d = self.run(ops.describe_group(self.admin, self.group))
        assert (d.state, sorted(d.members)) == (self.model.state, sorted(self.model.members)), (
            f"DescribeGroups: {d.state} {sorted(d.members)}; model {self.model.state} {sorted(self.model.members)}")
        tps = [(self.topic, 0), (self.topic, 1)]
        got = self.run(ops.fetch_offsets(self.admin, self.group, tps))
        want = {tp: (self.model.committed.get(tp, -1), NONE) for tp in tps}
        assert got == want, f"OffsetFetch {got}; model {want}"
