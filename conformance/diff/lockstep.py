"""Replay a conversation against two targets in lockstep and compare every answer.

Lockstep: each event of the recording happens on both targets before the next one — a connection opens on both, a
request is sent to both, an answer the recording's client had seen is awaited from both, a connection closes on
both — and the pause before each event is the recorded one (measured from the event before it), so a Fetch still
parks before the Produce that wakes it and a session still expires before the request that finds it expired.
Requests a recording sent without seeing their answer (the check ended first) are sent too but not compared.

Each target gets its own connections and its own member ids (a reference ``{"ref": "member@i"}`` is resolved from
that target's answer to exchange ``i``, waiting for it if needed). Both targets get the same fresh topic and group
names. After the conversation every answered exchange is normalised (``conformance.diff.normalise``) with what each
target handed out in the whole conversation, and compared (``conformance.diff.compare``).
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest

from reference_broker.client.protocol import Connection, ConnectionClosedError, Response

from .codec import build_request, from_json, response_tree
from .compare import OUTCOME, Tally
from .conversation import Conversation, Step, fresh_name
from .normalise import OBSERVATIONS, SideNames, normalise

READY_TIMEOUT_S = 10.0
WARM_UP_S = 30.0
WARM_UP_GROUP = "kct-diff-warm-up"
REASK_BUDGET_S = 2.0
REASK_PAUSE_S = 0.05
CONNECT_TIMEOUT_S = 10.0
CREATE_TOPICS = 19


class Unreachable(Exception):
    """A target could not be connected to at all (the CLI's exit 2)."""


@dataclass
class Exchange:
    """One request on one target and what came back."""

    response: Response | None = None
    failure: str | None = None
    tree: dict[str, Any] | None = None

    def outcome(self) -> str:
        if self.failure is not None:
            return self.failure.split(":")[0]
        return "answer" if self.tree is not None else "no answer expected"


@dataclass
class SideRun:
    """One target's state during one conversation."""

    label: str
    bootstrap: str
    names: SideNames = field(default_factory=SideNames)
    conns: dict[int, Connection] = field(default_factory=dict)
    tasks: dict[int, asyncio.Task[Exchange]] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)       # "member@i" → this target's member id
    nodes: list[tuple[int, str, int]] | None = None            # (node id, host, port) sorted, for node_rank routes

    async def address(self, route: Any) -> tuple[str, int]:
        host, _, port = self.bootstrap.split(",")[0].strip().rpartition(":")
        if route == "bootstrap" or not isinstance(route, dict):
            return host, int(port)
        if self.nodes is None:
            conn = await _connect(host, int(port), "kct-diff")
            try:
                r = await conn.request(MetadataRequest[9](topics=[], allow_auto_topic_creation=False,
                                                          include_cluster_authorized_operations=False,
                                                          include_topic_authorized_operations=False), 9)
                self.nodes = sorted((b.node_id, b.host, b.port) for b in r.body.brokers)
            finally:
                await conn.close()
        rank = min(route.get("node_rank", 0), len(self.nodes) - 1)
        return self.nodes[rank][1], self.nodes[rank][2]

    async def open(self, idx: int, route: Any, client_id: str) -> None:
        host, port = await self.address(route)
        self.conns[idx] = await _connect(host, port, client_id)

    async def topics_ready(self, created: Exchange) -> None:
        """The topic-readiness row: wait until every partition of the topics a CreateTopics answer created answers
        ListOffsets on its leader without an error (what a client's retries achieve), asking nothing compared."""
        topics = [t["name"] for t in (created.tree or {}).get("topics") or [] if t.get("error_code") == 0]
        if not topics:
            return
        host, _, port = self.bootstrap.split(",")[0].strip().rpartition(":")
        conns: dict[tuple[str, int], Connection] = {}
        try:
            boot = conns[(host, int(port))] = await _connect(host, int(port), "kct-diff-ready")
            deadline = time.monotonic() + READY_TIMEOUT_S
            while time.monotonic() < deadline:
                if await self._readable(boot, topics, conns):
                    return
                await asyncio.sleep(0.05)
        finally:
            for c in conns.values():
                await c.close()

    async def _readable(self, boot: Connection, topics: list[str], conns: dict[tuple[str, int], Connection]) -> bool:
        T = MetadataRequest.MetadataRequestTopic
        md = (await boot.request(MetadataRequest[9](topics=[T(name=t) for t in topics],
                                                    allow_auto_topic_creation=False,
                                                    include_cluster_authorized_operations=False,
                                                    include_topic_authorized_operations=False), 9)).body
        addr = {b.node_id: (b.host, b.port) for b in md.brokers}
        for t in md.topics:
            if t.error_code or not t.partitions:
                return False
            for p in t.partitions:
                if p.leader_id not in addr:
                    return False
                if addr[p.leader_id] not in conns:
                    conns[addr[p.leader_id]] = await _connect(*addr[p.leader_id], "kct-diff-ready")
                L = ListOffsetsRequest.ListOffsetsTopic
                r = await conns[addr[p.leader_id]].request(ListOffsetsRequest[7](
                    replica_id=-1, isolation_level=0, topics=[L(name=t.name, partitions=[L.ListOffsetsPartition(
                        partition_index=p.partition_index, current_leader_epoch=-1, timestamp=-1)])]), 7)
                if r.body.topics[0].partitions[0].error_code:
                    return False
        return True

    async def close(self, idx: int) -> None:
        conn = self.conns.get(idx)
        if conn is not None:
            await conn.close()

    async def close_all(self) -> None:
        for t in self.tasks.values():
            if not t.done():
                t.cancel()
        for t in self.tasks.values():
            with contextlib.suppress(BaseException):
                await t
        for conn in self.conns.values():
            with contextlib.suppress(Exception):
                await conn.close()


async def _connect(host: str, port: int, client_id: str) -> Connection:
    try:
        conn = await Connection.connect(host, port, client_id=client_id, timeout=CONNECT_TIMEOUT_S)
        await conn.api_versions()
        return conn
    except (OSError, ConnectionClosedError, TimeoutError) as exc:
        raise Unreachable(f"cannot connect to {host}:{port}: {exc!r}") from exc


async def _warm(bootstrap: str) -> None:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    conns: list[Connection] = []
    try:
        boot = await _connect(host, int(port), "kct-diff-warm-up")
        conns.append(boot)
        deadline = time.monotonic() + WARM_UP_S
        while time.monotonic() < deadline:
            found = (await boot.request(FindCoordinatorRequest[3](key=WARM_UP_GROUP, key_type=0), 3)).body
            if found.error_code == 0:
                coord = await _connect(found.host, found.port, "kct-diff-warm-up")
                conns.append(coord)
                T = OffsetFetchRequest.OffsetFetchRequestTopic
                got = (await coord.request(OffsetFetchRequest[7](group_id=WARM_UP_GROUP, topics=[T(
                    name=WARM_UP_GROUP, partition_indexes=[0])], require_stable=False), 7)).body
                if got.error_code == 0:
                    return
            await asyncio.sleep(0.1)
    finally:
        for c in conns:
            await c.close()


async def exchange(conn: Connection | None, api_key: int, version: int, request: Any, timeout_s: float) -> Exchange:
    """Send one request and wait for its answer (or the failure, as the recording names failures)."""
    if conn is None or conn.closed:
        return Exchange(failure="connection closed")
    try:
        fut = conn.submit(request, version)
    except ConnectionClosedError:
        return Exchange(failure="connection closed")
    try:
        async with asyncio.timeout(timeout_s):
            r = await fut
    except ConnectionClosedError:
        return Exchange(failure="connection closed")
    except TimeoutError:
        return Exchange(failure=f"no answer within {timeout_s:.1f}s")
    except Exception as exc:  # noqa: BLE001 - an answer that does not decode is an answer of its own kind
        return Exchange(failure=f"undecodable answer: {exc}")
    return Exchange(r, None, response_tree(r.body) if r.body is not None else None)


def _finished(task: asyncio.Task[Exchange]) -> Exchange:
    """A replayed exchange's outcome; a replay that itself failed is an outcome of its own, never a crash."""
    if not task.done() or task.cancelled():
        return Exchange(failure="not answered before the conversation ended")
    if task.exception() is not None:
        return Exchange(failure=f"replay error: {task.exception()!r}")
    return task.result()


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        if "ref" in value and len(value) == 1:
            return {value["ref"]}
        return set().union(*(_refs(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value)) if value else set()
    return set()


def _resolve(value: Any, side: SideRun, fresh: dict[str, str]) -> Any:
    """A JSON request tree → python values for one target: references bound, names made fresh."""
    if isinstance(value, dict):
        if set(value) == {"$s"}:
            return _names("".join(p if isinstance(p, str) else side.bound.get(p["ref"], "") for p in value["$s"]),
                          fresh)
        if set(value) == {"$y"}:
            return _names(b"".join(base64.b64decode(p["$b"]) if "$b" in p else side.bound.get(p["ref"], "").encode()
                                   for p in value["$y"]), fresh)
        if set(value) in ({"$b"}, {"$uuid"}):
            return _names(from_json(value), fresh)
        return {k: _resolve(v, side, fresh) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, side, fresh) for v in value]
    return _names(value, fresh)


def _names(value: Any, fresh: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in fresh.items():
            if old in value:
                value = value.replace(old, new)
    elif isinstance(value, bytes):
        for old, new in fresh.items():
            value = value.replace(old.encode(), new.encode())
    return value


def step_timeout(step: Step) -> float:
    """How long a replayed request may take: its client's own limit, but for a request the recorded target answered
    quickly no more than twice that plus 10 s (a target that parks what the other answers at once is a difference,
    not a reason to wait a minute)."""
    if step.answered_ms is None or step.failure is not None:
        return step.timeout_s
    return min(step.timeout_s, 2 * step.answered_ms / 1000 + 10)


@dataclass
class ReplayResult:
    conversation: str
    steps: int
    compared: int
    differences: int
    unexplained: int
    reasked: int
    wall_s: float
    error: str | None = None


class Lockstep:
    """Two targets (``a``, ``b``: bootstrap strings) and the tally their compared answers go into."""

    def __init__(self, a: str, b: str, tally: Tally | None = None) -> None:
        self.a, self.b = a, b
        self.tally = tally if tally is not None else Tally()

    async def warm_up(self) -> None:
        """The coordinator-readiness row: before anything is compared, each target has a group coordinator that
        answers (Kafka creates __consumer_offsets on the first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE,
        then NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it loaded the partition; clients retry)."""
        await asyncio.gather(*(_warm(boot) for boot in (self.a, self.b)))

    async def handshake(self) -> None:
        """Compare the two targets' ApiVersions answers (v3, as Kafka's own clients send it)."""
        req = ApiVersionsRequest[3](client_software_name="kct-diff", client_software_version="1")
        results = []
        for boot in (self.a, self.b):
            host, _, port = boot.split(",")[0].strip().rpartition(":")
            conn = await _connect(host, int(port), "kct-diff")
            try:
                results.append(await exchange(conn, 18, 3, req, 10))
            finally:
                await conn.close()
        self._compare({"conversation": "(handshake)", "step": 0}, 18, 3, {"client_software_name": "kct-diff"},
                      results[0], results[1], SideNames(), SideNames())

    async def replay(self, conv: Conversation) -> ReplayResult:
        """Replay one conversation on both targets and add its answers to the tally."""
        t0 = time.monotonic()
        token = secrets.token_hex(8)
        fresh = {name: fresh_name(name, token) for name in conv.names}
        sides = (SideRun("a", self.a), SideRun("b", self.b))
        steps = {s.index: s for s in conv.steps}
        requests: dict[tuple[str, int], Any] = {}
        reasked: set[int] = set()
        client_ids = {e["open"]: e.get("client_id", "kct-conformance") for e in conv.events if "open" in e}
        error = None
        try:
            last_rec, last_real = 0.0, time.monotonic()
            for ev in conv.events:
                if "answer" in ev:
                    i = ev["answer"]
                    await asyncio.gather(*(s.tasks[i] for s in sides if i in s.tasks), return_exceptions=True)
                    if steps[i].api_key == CREATE_TOPICS:
                        await asyncio.gather(*(s.topics_ready(_finished(s.tasks[i])) for s in sides if i in s.tasks))
                    if steps[i].api_key in OBSERVATIONS and steps[i].failure is None:
                        if await self._settle(steps[i], sides, requests):
                            reasked.add(i)
                else:
                    pause = (ev["t"] - last_rec) / 1000 - (time.monotonic() - last_real)
                    if pause > 0:
                        await asyncio.sleep(pause)
                    if "open" in ev:
                        await asyncio.gather(*(s.open(ev["open"], conv.routes.get(ev["open"], "bootstrap"),
                                                      client_ids[ev["open"]]) for s in sides))
                    elif "close" in ev:
                        await asyncio.gather(*(s.close(ev["close"]) for s in sides))
                    elif "send" in ev:
                        step = steps[ev["send"]]
                        for s in sides:
                            s.tasks[step.index] = asyncio.ensure_future(self._send(s, step, steps, fresh, requests))
                last_rec, last_real = ev["t"], time.monotonic()
        except Unreachable as exc:
            error = str(exc)
        finally:
            for s in sides:
                await s.close_all()
        compared = diffs = unexplained = 0
        if error is None:
            for step in conv.steps:
                if step.answered_ms is None or step.index not in sides[0].tasks:
                    continue
                ea, eb = (_finished(s.tasks[step.index]) for s in sides)
                where = {"conversation": conv.id, "step": step.index}
                ds = self._compare(where, step.api_key, step.version, requests.get(("a", step.index)), ea, eb,
                                   sides[0].names, sides[1].names, reasked=step.index in reasked)
                compared += 1
                diffs += len(ds)
                unexplained += sum(1 for d in ds if d.gap is None)
        return ReplayResult(conv.id, len(conv.steps), compared, diffs, unexplained, len(reasked),
                            round(time.monotonic() - t0, 2), error)

    async def _send(self, side: SideRun, step: Step, steps: dict[int, Step], fresh: dict[str, str],
                    requests: dict[tuple[str, int], Any]) -> Exchange:
        for ref in _refs(step.request):           # a member id this target has not handed out yet: wait for it
            i = int(ref.split("@")[1])
            if ref not in side.bound and i in side.tasks and not side.tasks[i].done():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(side.tasks[i]), step_timeout(steps[i]))
        tree = _resolve(step.request, side, fresh)
        requests[(side.label, step.index)] = tree
        ex = await exchange(side.conns.get(step.conn), step.api_key, step.version,
                            build_request(step.api_key, tree), step_timeout(step))
        if step.api_key == 11 and ex.tree and ex.tree.get("member_id"):
            side.bound.setdefault(f"member@{step.index}", ex.tree["member_id"])
            side.names.bind_members(step.index, 11, ex.tree)
        return ex

    async def _settle(self, step: Step, sides: tuple[SideRun, SideRun], requests: dict[tuple[str, int], Any]) -> bool:
        """The re-asked-observations row: ask again while the two answers differ (2 s at most). True if asked."""
        def same() -> bool:
            ea, eb = (_finished(s.tasks[step.index]) for s in sides)
            if ea.tree is None or eb.tree is None:
                return ea.outcome() == eb.outcome()
            na = normalise(step.api_key, ea.tree, copy.deepcopy(sides[0].names))
            nb = normalise(step.api_key, eb.tree, copy.deepcopy(sides[1].names))
            return na == nb

        if step.index not in sides[0].tasks or same():
            return False
        deadline = time.monotonic() + REASK_BUDGET_S
        while time.monotonic() < deadline:
            await asyncio.sleep(REASK_PAUSE_S)
            futs = [asyncio.ensure_future(exchange(s.conns.get(step.conn), step.api_key, step.version,
                                                   build_request(step.api_key, requests[(s.label, step.index)]),
                                                   step_timeout(step))) for s in sides]
            await asyncio.wait(futs)
            for s, fut in zip(sides, futs, strict=True):
                s.tasks[step.index] = fut
            if same():
                break
        return True

    def _compare(self, where: dict[str, Any], api_key: int, version: int, request: Any, ea: Exchange,
                 eb: Exchange, na: SideNames, nb: SideNames, *, reasked: bool = False) -> list[Any]:
        if ea.tree is None or eb.tree is None:
            a, b = {OUTCOME: ea.outcome()}, {OUTCOME: eb.outcome()}
        else:
            a, b = normalise(api_key, ea.tree, na), normalise(api_key, eb.tree, nb)
        return self.tally.add(where, api_key, version, request, a, b, reasked=reasked)
