"""A hypothesis state machine that drives two targets in lockstep and shrinks a difference to the shortest program.

Every rule sends the same requests to both targets at once (through ``conformance.wire``/``ops``, each target on
its own connections and with its own member ids) and compares the two answers field by field exactly as a replayed
conversation is compared (``conformance.diff.normalise`` and ``compare``). A difference no GAPS.md row explains
fails the step; hypothesis then shrinks the sequence, and the printed counterexample (``state = DiffMachine()``,
``state.produce(...)``, ...) is a runnable program once ``DiffMachine.configure(a_bootstrap, b_bootstrap)`` ran —
:func:`script_text` writes exactly that file. Known gaps are tallied, never a failure, so the search goes past them.

The rules go where the suites' own conversations do not: many partitions per request, odd sizes and offsets,
timestamps, compressed and keyed batches, names that do not exist, offset metadata near its limit, stale and
unknown group members. Requests that need time to settle on both targets (a new topic becoming readable) are
awaited with the exchange log paused, so only the requests a rule is about are compared.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, precondition, rule
from kafka import errors as E
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeTopicPartitionsRequest,
)
from kafka.protocol.consumer import JoinGroupRequest, OffsetDeleteRequest
from kafka.protocol.producer import InitProducerIdRequest

from conformance.properties import ops
from conformance.wire import GZIP, Wire, keyed_batch
from reference_broker.client.protocol import Response

from .codec import api_name, request_tree, response_tree
from .compare import OUTCOME, Difference, Tally
from .normalise import SideNames, normalise

# Profiles: ``kct-diff-ci`` is bounded for CI and the CLI's default (each example creates topics and a group on two
# targets, about a second of work per example against a reference broker); ``kct-diff-thorough`` for long runs.
DIFF_CI, DIFF_THOROUGH = "kct-diff-ci", "kct-diff-thorough"
# No "explain" phase: it reruns examples (each a few requests on two targets) only to annotate the report.
_COMMON: dict[str, Any] = {"deadline": None, "database": None, "print_blob": False,
                           "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much]}
settings.register_profile(DIFF_CI, max_examples=30, stateful_step_count=15, **_COMMON)
settings.register_profile(DIFF_THOROUGH, max_examples=200, stateful_step_count=40, **_COMMON)
STEP_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 10.0
values_st = st.lists(st.one_of(st.binary(max_size=8), st.none()), min_size=1, max_size=5)


@dataclass
class Logged:
    api_key: int
    version: int
    request: Any
    response: Response | None = None
    failure: str | None = None


@dataclass
class ExchangeLog:
    """An ``ExchangeTap`` keeping one target's exchanges in send order (``paused``: readiness waits, not kept)."""

    entries: list[Logged] = field(default_factory=list)
    paused: bool = False

    def opened(self, wire: Wire) -> None:
        pass

    def closed(self, wire: Wire) -> None:
        pass

    def sent(self, wire: Wire, api_key: int, version: int, request: Any, timeout_s: float) -> Logged | None:
        if self.paused:
            return None
        entry = Logged(api_key, version, request_tree(request))
        self.entries.append(entry)
        return entry

    def answered(self, token: Logged | None, response: Response | None, failure: str | None) -> None:
        if token is not None:
            token.response, token.failure = response, failure


class DiffMachine(RuleBasedStateMachine):
    """Both targets, one event loop, the tally every compared answer goes into (class configuration)."""

    a_bootstrap: ClassVar[str | None] = None
    b_bootstrap: ClassVar[str | None] = None
    tally: ClassVar[Tally] = Tally()
    # (api key, field) pairs already reported: still tallied, no longer a failure, so a next round searches on
    ignore: ClassVar[set[tuple[int, str]]] = set()
    failed_fields: ClassVar[set[tuple[int, str]]] = set()
    _seq: ClassVar[itertools.count] = itertools.count()

    topics = Bundle("topics")
    partitions = Bundle("partitions")
    members = Bundle("members")

    @classmethod
    def configure(cls, a_bootstrap: str, b_bootstrap: str, tally: Tally | None = None,
                  ignore: set[tuple[int, str]] | None = None) -> None:
        """Point every later instance at two targets (the CLI, a test or a replay script calls this)."""
        cls.a_bootstrap, cls.b_bootstrap = a_bootstrap, b_bootstrap
        cls.tally = tally if tally is not None else Tally()
        cls.ignore = set(ignore or ())
        cls.failed_fields = set()

    def __init__(self) -> None:
        super().__init__()
        if self.a_bootstrap is None or self.b_bootstrap is None:
            raise RuntimeError("DiffMachine.configure(a_bootstrap, b_bootstrap) was not called")
        self.loop = asyncio.new_event_loop()
        self.logs = (ExchangeLog(), ExchangeLog())
        self.names = (SideNames(), SideNames())
        self.compared = 0
        self.prefix = f"diffm-{secrets.token_hex(3)}-{next(self._seq)}"
        self.count = itertools.count(1)
        self.conns: tuple[list[Wire], list[Wire]] = ([], [])
        self.admin = self._connect_both()
        self.group = f"{self.prefix}-g"
        self.member_conn: dict[str, tuple[Wire, Wire]] = {}
        self.member_id: dict[str, list[str]] = {}
        self.generation: list[int] = [-1, -1]
        self.active: list[str] = []
        self.created = 0
        self.partition_count: dict[str, int] = {}

    # -- plumbing -------------------------------------------------------------------------------------------
    def _run(self, coro: Awaitable[Any]) -> Any:
        async def bounded() -> Any:
            async with asyncio.timeout(STEP_TIMEOUT_S):
                return await coro
        return self.loop.run_until_complete(bounded())

    def _connect_both(self) -> tuple[Wire, Wire]:
        async def both() -> tuple[Wire, Wire]:
            return await asyncio.gather(*(Wire.connect(boot, tap=log, client_id="kct-diff")
                                          for boot, log in zip((self.a_bootstrap, self.b_bootstrap), self.logs,
                                                               strict=True)))
        wa, wb = self._run(both())
        self.conns[0].append(wa)
        self.conns[1].append(wb)
        return wa, wb

    def both(self, what: str, act: Callable[[int, Wire], Awaitable[Any]], wires: tuple[Wire, Wire] | None = None,
             ) -> tuple[Any, Any]:
        """Run ``act(side, wire)`` on both targets at once, then compare every exchange it made."""
        wires = wires or self.admin
        start = [len(log.entries) for log in self.logs]

        async def one(side: int) -> Any:
            try:
                return await act(side, wires[side])
            except AssertionError as exc:      # TargetDiverged: closed connection, no answer — recorded below
                return exc
        async def two() -> list[Any]:
            return await asyncio.gather(one(0), one(1))
        results = self._run(two())
        self._compare(what, [log.entries[n:] for log, n in zip(self.logs, start, strict=True)])
        return results[0], results[1]

    def _compare(self, what: str, new: list[list[Logged]]) -> None:
        problems: list[str] = []
        failed: set[tuple[int, str]] = set()
        if len(new[0]) != len(new[1]):
            problems.append(f"{what}: target a made {len(new[0])} exchanges, b {len(new[1])}")
        for ea, eb in zip(*new, strict=False):
            index = self.compared
            self.compared += 1
            trees = []
            for side, e in enumerate((ea, eb)):
                if e.response is None or e.response.body is None:
                    trees.append({OUTCOME: (e.failure or "no answer").split(":")[0]})
                    continue
                tree = response_tree(e.response.body)
                self.names[side].bind_members(index, e.api_key, tree)
                trees.append(tree)
            na = normalise(ea.api_key, trees[0], self.names[0]) if OUTCOME not in trees[0] else trees[0]
            nb = normalise(eb.api_key, trees[1], self.names[1]) if OUTCOME not in trees[1] else trees[1]
            if OUTCOME in na or OUTCOME in nb:
                na, nb = {OUTCOME: na.get(OUTCOME, "answer")}, {OUTCOME: nb.get(OUTCOME, "answer")}
            diffs = self.tally.add({"conversation": f"machine:{self.prefix}", "step": index, "rule": what},
                                   ea.api_key, ea.version, ea.request, na, nb)
            new = [d for d in diffs if d.gap is None and (ea.api_key, d.field) not in self.ignore]
            problems += [_describe(what, ea.api_key, ea.version, d) for d in new]
            failed |= {(ea.api_key, d.field) for d in new}
        if problems:
            type(self).failed_fields = failed
        assert not problems, "the targets answered differently:\n" + "\n".join(problems[:12])

    @contextlib.contextmanager
    def _unlogged(self, *sides: int) -> Any:
        """Requests that wait for both targets to settle (timing, not behaviour): not logged, not compared."""
        logs = [self.logs[s] for s in sides or (0, 1)]
        for log in logs:
            log.paused = True
        try:
            yield
        finally:
            for log in logs:
                log.paused = False

    def _ready(self, topic: str, partitions: int) -> None:
        """Wait until both targets serve every partition of a new topic (log paused: timing, not behaviour)."""
        with self._unlogged():
            async def ready(w: Wire) -> None:
                for _ in range(int(READY_TIMEOUT_S / 0.05)):
                    _, parts = await ops.metadata(w, [topic])
                    if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
                        codes = [(await ops.list_offsets(await w.leader(topic, p), topic, p, -1))[0]
                                 for p in range(partitions)]
                        if not any(codes):
                            return
                    await asyncio.sleep(0.05)
            async def two() -> None:
                await asyncio.gather(ready(self.admin[0]), ready(self.admin[1]))
            self._run(two())

    def teardown(self) -> None:
        """Close both targets' connections and the loop; safe to call twice."""
        if self.loop.is_closed():
            return
        for conns in self.conns:
            for c in conns:
                with contextlib.suppress(Exception):
                    self.loop.run_until_complete(c.close())
        self.loop.close()

    # -- topics and data ----------------------------------------------------------------------------------
    @initialize(target=topics, partitions=st.integers(1, 3))
    def first_topic(self, partitions: int) -> str:
        return self._create(partitions, {})

    @precondition(lambda self: self.created < 3)      # attempts, not successes: what hypothesis draws stays ours
    @rule(target=topics, partitions=st.integers(1, 3),
          configs=st.sampled_from([{}, {"cleanup.policy": "compact"}, {"retention.ms": "-1"},
                                   {"max.message.bytes": "2048"}, {"segment.bytes": "1"}]))
    def create_topic(self, partitions: int, configs: dict[str, str]) -> str:
        return self._create(partitions, configs)

    def _create(self, partitions: int, configs: dict[str, str]) -> str:
        self.created += 1
        name = f"{self.prefix}-t{next(self.count)}"
        a, b = self.both("create_topic", lambda s, w: w.create_topic_code(name, partitions, -1, configs))
        if a[0] == 0 and b[0] == 0:
            self._ready(name, partitions)
            self.partition_count[name] = partitions
        return name

    @rule(topic=topics)
    def create_existing_topic(self, topic: str) -> None:
        self.both("create_existing_topic", lambda s, w: w.create_topic_code(topic, 1, -1, None))

    @rule(topic=topics, partition=st.integers(0, 3), values=values_st, acks=st.sampled_from([1, -1]),
          compression=st.sampled_from([0, GZIP]), keyed=st.booleans())
    def produce(self, topic: str, partition: int, values: list[bytes | None], acks: int, compression: int,
                keyed: bool) -> None:
        batch = keyed_batch(values, keys=[b"k%d" % i for i in range(len(values))] if keyed else None,
                            headers=[[("h", b"v")]] * len(values) if keyed else None, compression_type=compression)

        async def act(side: int, w: Wire) -> Any:
            return await w.request("Produce", w.produce_request(topic, partition, batch, acks))
        self.both("produce", act)

    @rule(topic=topics, partition=st.integers(0, 3), offset=st.integers(-1, 12), max_wait_ms=st.sampled_from([0, 20]),
          min_bytes=st.sampled_from([0, 1, 100]), max_bytes=st.sampled_from([1, 80, 1 << 20]),
          partition_max_bytes=st.sampled_from([1, 80, 1 << 20]))
    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              partition_max_bytes: int) -> None:
        self.both("fetch", lambda s, w: w.fetch([(topic, partition, offset)], max_wait_ms=max_wait_ms,
                                                 min_bytes=min_bytes, max_bytes=max_bytes,
                                                 partition_max_bytes=partition_max_bytes))

    @rule(topics_=st.lists(topics, min_size=1, max_size=3, unique=True), offset=st.integers(0, 4),
          max_bytes=st.sampled_from([100, 1 << 20]))
    def fetch_many(self, topics_: list[str], offset: int, max_bytes: int) -> None:
        parts = [(t, p, offset) for t in topics_ for p in range(self.partition_count.get(t, 1))]
        self.both("fetch_many", lambda s, w: w.fetch(parts, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                                                      partition_max_bytes=max_bytes))

    @rule(topic=topics, partition=st.integers(0, 3),
          timestamp=st.sampled_from([-1, -2, -3, -4, -5, 0, 1_700_000_000_000, 1_700_000_000_002, 1 << 50]))
    def list_offsets(self, topic: str, partition: int, timestamp: int) -> None:
        version = 9 if timestamp in (-4, -5) else None
        self.both("list_offsets", lambda s, w: w.list_offsets_full(topic, partition, timestamp, version=version))

    @rule(topic=topics, partition=st.integers(0, 3), offset=st.integers(-1, 12))
    def delete_records(self, topic: str, partition: int, offset: int) -> None:
        self.both("delete_records", lambda s, w: w.delete_records(topic, partition, offset))

    @rule(topic=topics, partition=st.integers(0, 2), epoch=st.integers(-1, 2), current=st.sampled_from([-1, 0, 1]))
    def offset_for_leader_epoch(self, topic: str, partition: int, epoch: int, current: int) -> None:
        self.both("offset_for_leader_epoch",
                  lambda s, w: w.offset_for_leader_epoch(topic, partition, epoch, current))

    @rule(topics_=st.lists(topics, max_size=2, unique=True), unknown=st.booleans())
    def metadata(self, topics_: list[str], unknown: bool) -> None:
        names = topics_ + ([f"{self.prefix}-missing"] if unknown else [])
        self.both("metadata", lambda s, w: w.metadata(names))

    @rule(kind=st.sampled_from(["illegal name", "long name", "dot", "zero partitions", "rf 2", "validate only",
                                "duplicate"]))
    def create_odd_topic(self, kind: str) -> None:
        """CreateTopics that Kafka refuses or only validates (names, counts, replication factor)."""
        T = CreateTopicsRequest.CreatableTopic
        name = {"illegal name": f"{self.prefix} bad!", "long name": f"{self.prefix}-" + "x" * 240,
                "dot": "."}.get(kind, f"{self.prefix}-odd{next(self.count)}")
        partitions, rf = {"zero partitions": (0, 1), "rf 2": (1, 2)}.get(kind, (1, -1))
        topics = [T(name=name, num_partitions=partitions, replication_factor=rf, assignments=[], configs=[])]
        req = CreateTopicsRequest(topics=topics * (2 if kind == "duplicate" else 1), timeout_ms=10_000,
                                  validate_only=kind == "validate only")
        self.both("create_odd_topic", lambda s, w: w.request("CreateTopics", req, version=7))

    @rule(topic=topics)
    def delete_topic(self, topic: str) -> None:
        """DeleteTopics (also of a topic already deleted); waits, unlogged, until both targets forgot it."""
        req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=topic, topic_id=None)],
                                  timeout_ms=10_000)
        self.both("delete_topic", lambda s, w: w.request("DeleteTopics", req, version=6))
        with self._unlogged():
            async def gone(w: Wire) -> None:
                for _ in range(int(READY_TIMEOUT_S / 0.05)):
                    md = await w.metadata([topic])
                    if md[topic]["error_code"]:
                        return
                    await asyncio.sleep(0.05)

            async def two() -> None:
                await asyncio.gather(gone(self.admin[0]), gone(self.admin[1]))
            self._run(two())

    @rule(kind=st.sampled_from(["garbage", "two batches", "empty"]), topic=topics)
    def bad_produce(self, kind: str, topic: str) -> None:
        """Produce whose records are not one v2 batch: the error code, and whether a message comes with it."""
        one = keyed_batch([b"v"])
        records = {"garbage": b"not a record batch at all, " * 3, "two batches": one + one, "empty": b""}[kind]

        async def act(side: int, w: Wire) -> Any:
            return await w.request("Produce", w.produce_request(topic, 0, records, 1))
        self.both("bad_produce", act)

    @rule(topic=topics, epoch=st.sampled_from([0, 1, 5]))
    def fetch_with_leader_epoch(self, topic: str, epoch: int) -> None:
        self.both("fetch_with_leader_epoch", lambda s, w: w.fetch([(topic, 0, 0)], max_wait_ms=0, min_bytes=0,
                                                                   current_leader_epoch=epoch))

    @rule(topic=topics, timestamp=st.sampled_from([-1, -2, 1_700_000_000_000]))
    def list_offsets_read_committed(self, topic: str, timestamp: int) -> None:
        self.both("list_offsets_read_committed",
                  lambda s, w: w.list_offsets_full(topic, 0, timestamp, isolation_level=1))

    @rule(topic=topics, keys=st.sampled_from([None, ["retention.ms"], ["retention.ms", "no.such.config"]]),
          which=st.sampled_from(["topic", "missing topic", "cluster default", "other broker"]))
    def describe_configs(self, topic: str, keys: list[str] | None, which: str) -> None:
        """DescribeConfigs of a topic, an unknown topic, the cluster default ("") or a broker that is not there."""
        R = DescribeConfigsRequest.DescribeConfigsResource
        kind, name = {"topic": (2, topic), "missing topic": (2, f"{self.prefix}-missing"), "cluster default": (4, ""),
                      "other broker": (4, "4242")}[which]
        req = DescribeConfigsRequest(resources=[R(resource_type=kind, resource_name=name, configuration_keys=keys)],
                                     include_synonyms=False, include_documentation=False)
        self.both("describe_configs", lambda s, w: w.request("DescribeConfigs", req))

    # -- the control plane (issue 25): the quorum, the cluster, partitions with their ELR ---------------------
    @rule()
    def describe_quorum(self) -> None:
        """DescribeQuorum of __cluster_metadata-0 (KIP-595), forwarded by the broker to the active controller."""
        self.both("describe_quorum", lambda s, w: w.describe_quorum())

    @rule(operations=st.booleans())
    def describe_cluster(self, operations: bool) -> None:
        """DescribeCluster (KIP-700) asked of a broker's listener: brokers, controller, cluster id."""
        req = DescribeClusterRequest(include_cluster_authorized_operations=operations, endpoint_type=1)
        self.both("describe_cluster", lambda s, w: w.request("DescribeCluster", req))

    @rule(topics_=st.lists(topics, min_size=1, max_size=3, unique=True), unknown=st.booleans(),
          limit=st.sampled_from([0, 1, 2, 2000]), cursor=st.booleans())
    def describe_topic_partitions(self, topics_: list[str], unknown: bool, limit: int, cursor: bool) -> None:
        """DescribeTopicPartitions (KIP-966) with a page limit and a cursor at the first topic's partition 1."""
        R = DescribeTopicPartitionsRequest
        names = sorted(topics_) + ([f"{self.prefix}-missing"] if unknown else [])
        req = R(topics=[R.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                cursor=R.Cursor(topic_name=names[0], partition_index=1) if cursor else None)
        self.both("describe_topic_partitions", lambda s, w: w.request("DescribeTopicPartitions", req))

    @rule()
    def init_producer_id(self) -> None:
        """InitProducerId for an idempotent producer (no transactional id). Kafka answers the first ones after it
        starts COORDINATOR_LOAD_IN_PROGRESS until its producer id manager holds a block from the controller (clients
        retry); that wait is asked with the log paused, so the compared request is the one after it."""
        req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                                    producer_epoch=-1)
        with self._unlogged():
            async def ready(w: Wire) -> None:
                for _ in range(int(READY_TIMEOUT_S / 0.05)):
                    if (await w.request("InitProducerId", req, version=4)).body.error_code != E.CoordinatorLoadInProgressError.errno:
                        return
                    await asyncio.sleep(0.05)

            async def two() -> None:
                await asyncio.gather(ready(self.admin[0]), ready(self.admin[1]))
            self._run(two())
        self.both("init_producer_id", lambda s, w: w.request("InitProducerId", req, version=4))

    # -- offsets and groups ---------------------------------------------------------------------------------
    @rule(topic=topics, partition=st.integers(0, 3), offset=st.integers(-1, 20),
          metadata=st.one_of(st.none(), st.sampled_from(["", "m", "x" * 4096, "x" * 4097])),
          leader_epoch=st.sampled_from([-1, 0, 3]))
    def simple_commit(self, topic: str, partition: int, offset: int, metadata: str | None, leader_epoch: int) -> None:
        self.both("simple_commit", lambda s, w: w.offset_commit(
            self.group, {(topic, partition): (offset, metadata)}, leader_epochs={(topic, partition): leader_epoch}))

    @rule(topics_=st.lists(topics, max_size=2, unique=True), every=st.booleans())
    def fetch_offsets(self, topics_: list[str], every: bool) -> None:
        tps = None if every else [(t, p) for t in topics_ for p in range(self.partition_count.get(t, 1) + 1)]
        self.both("fetch_offsets", lambda s, w: w.offset_fetch_full(self.group, tps))

    @rule(unknown=st.booleans())
    def describe_group(self, unknown: bool) -> None:
        group = f"{self.prefix}-nogroup" if unknown else self.group
        self.both("describe_group", lambda s, w: w.describe_group(group))

    @precondition(lambda self: len(self.active) < 3)
    @rule(target=members)
    def join(self) -> str:
        """A new member asks for a member id (KIP-394), then the group rebalances with it (see _rebalance)."""
        name = f"m{next(self.count)}"
        self.member_conn[name] = self._connect_both()
        self.member_id[name] = ["", ""]
        first = self.both("join", lambda s, w: ops.join(w, self.group, session_ms=30_000, rebalance_ms=10_000,
                                                         timeout=20), self.member_conn[name])
        for side, j in enumerate(first):
            if isinstance(j, ops.Joined):
                self.member_id[name][side] = j.member_id
        self._rebalance(first=name)
        self.active.append(name)
        return name

    def _rebalance(self, first: str | None = None) -> None:
        """One rebalance in an order both targets see alike: ``first`` (a new member) joins and parks, and once
        DescribeGroups says PreparingRebalance (asked with the log paused) every other active member rejoins; then
        the leader syncs an assignment naming each member and the others sync. Concurrent joins would arrive in
        whatever order the network makes, and a join phase completes differently when a member is a moment late."""
        rest = [n for n in self.active if n != first]
        if first is None and not rest:
            return

        async def act(side: int, _w: Wire) -> Any:
            def join(n: str) -> Any:
                return ops.join(self.member_conn[n][side], self.group, member_id=self.member_id[n][side],
                                session_ms=30_000, rebalance_ms=10_000, timeout=20)
            parked = asyncio.ensure_future(join(first)) if first else None
            if parked is not None and rest:
                await self._until_preparing(side, parked)
            joined = list(await asyncio.gather(*(join(n) for n in rest)))
            names = ([first] if first else []) + rest
            if parked is not None:
                joined.insert(0, await parked)
            for n, j in zip(names, joined, strict=True):
                if j.member_id:
                    self.member_id[n][side] = j.member_id
            self.generation[side] = joined[0].generation
            assign = {j.member_id: b"a:" + j.member_id.encode() for j in joined}
            await asyncio.gather(*(ops.sync(self.member_conn[n][side], self.group, self.generation[side],
                                            self.member_id[n][side], assign if j.member_id == j.leader else None,
                                            timeout=20) for n, j in zip(names, joined, strict=True)))
        self.both("rebalance", act)

    async def _until_preparing(self, side: int, parked: asyncio.Future[Any]) -> None:
        with self._unlogged(side):
            for _ in range(100):
                if parked.done() or (await ops.describe_group(self.admin[side], self.group)).state == \
                        "PreparingRebalance":
                    return
                await asyncio.sleep(0.02)

    @rule(which=st.sampled_from(["ours", "unknown", "empty"]))
    def delete_group(self, which: str) -> None:
        """DeleteGroups: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND for an unknown one."""
        group = {"ours": self.group, "unknown": f"{self.prefix}-nogroup", "empty": ""}[which]
        self.both("delete_group", lambda s, w: w.request("DeleteGroups", DeleteGroupsRequest(groups_names=[group]),
                                                          version=2))

    @rule(topic=topics, partition=st.integers(0, 2))
    def offset_delete(self, topic: str, partition: int) -> None:
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        req = OffsetDeleteRequest(group_id=self.group, topics=[T(name=topic, partitions=[
            T.OffsetDeleteRequestPartition(partition_index=partition)])])
        self.both("offset_delete", lambda s, w: w.request("OffsetDelete", req, version=0))

    @rule(kind=st.sampled_from(["short session", "other protocol type", "empty group"]))
    def odd_join(self, kind: str) -> None:
        """JoinGroup Kafka refuses: a session below group.min.session.timeout.ms, another protocol type than the
        group's (INCONSISTENT_GROUP_PROTOCOL while it has members), an empty group id."""
        P = JoinGroupRequest.JoinGroupRequestProtocol
        req = JoinGroupRequest(group_id="" if kind == "empty group" else self.group,
                               session_timeout_ms=100 if kind == "short session" else 30_000,
                               rebalance_timeout_ms=10_000, member_id="", group_instance_id=None,
                               protocol_type="connect" if kind == "other protocol type" else "consumer",
                               protocols=[P(name="range", metadata=b"\x00\x01meta")], reason=None)
        self.both("odd_join", lambda s, w: w.request("JoinGroup", req, timeout_s=20))

    @rule(name=members, stale=st.booleans())
    def heartbeat(self, name: str, stale: bool) -> None:
        self.both("heartbeat", lambda s, w: ops.heartbeat(w, self.group, self.generation[s] - int(stale),
                                                           self.member_id[name][s]),
                  self.member_conn[name])

    @rule(name=members, topic=topics, offset=st.integers(0, 20), stale=st.booleans())
    def member_commit(self, name: str, topic: str, offset: int, stale: bool) -> None:
        self.both("member_commit", lambda s, w: ops.commit(w, self.group, self.generation[s] - int(stale),
                                                            self.member_id[name][s], {(topic, 0): offset}),
                  self.member_conn[name])

    @rule(unknown_member=st.booleans())
    def heartbeat_unknown(self, unknown_member: bool) -> None:
        mid = "kct-diff-unknown-member" if unknown_member else ""
        self.both("heartbeat_unknown", lambda s, w: ops.heartbeat(w, self.group, 1, mid))

    @rule(name=members)
    def leave(self, name: str) -> None:
        """LeaveGroup (also of a member that already left: UNKNOWN_MEMBER_ID), then the rest rebalance."""
        self.both("leave", lambda s, w: ops.leave(w, self.group, self.member_id[name][s]), self.member_conn[name])
        if name in self.active:
            self.active.remove(name)
            self._rebalance()


def _describe(what: str, api_key: int, version: int, d: Difference) -> str:
    return f"- {what}: {api_name(api_key)} v{version} {d.path}: a={d.a!r} b={d.b!r}"


def script_text(steps: list[str], a: str, b: str) -> str:
    """A counterexample as a runnable program (``python FILE [--a HOST:PORT] [--b HOST:PORT]``)."""
    body = textwrap.indent("\n".join(steps), " " * 4)
    return f'''"""Replay of a difference the differential machine found between {a} (a) and {b} (b).

Run:  python {{this file}} [--a HOST:PORT] [--b HOST:PORT]   (in the project's environment)
An AssertionError listing fields means the two targets still answer differently; a clean exit means they agree.
"""
import argparse

from conformance.diff.machine import DiffMachine

ap = argparse.ArgumentParser()
ap.add_argument("--a", default={a!r})
ap.add_argument("--b", default={b!r})
args = ap.parse_args()
DiffMachine.configure(args.a, args.b)
try:
{body}
finally:
    if "state" in globals():
        state.teardown()  # noqa: F821 - defined by the first step
print("replay finished: the targets agree")
'''
