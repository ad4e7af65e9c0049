"""The replicated target as the suites see it: who leads, who is in the ISR, faults by node id, and the one wait every
check that kills, pauses or isolates a node uses before it asks "the new leader" anything.

An election is not visible everywhere at once. The controller commits it; each broker learns it when it applies that
metadata record, and only then serves the partition as its leader. A check that saw the new leader in one broker's
Metadata and sent its request to the new leader straight away asked a broker that had not applied the record yet:
Kafka 4.4.0 (3 brokers, a loaded CI machine) answered NOT_LEADER_OR_FOLLOWER (issue 29). A client would retry; a
check must wait the same way — :meth:`Cluster.new_leader` waits until the new leader's own Metadata names it leader at
the new epoch and it serves a consumer Fetch pinned to that epoch, within a bound derived from the target's settings
(:meth:`Cluster.election_bound_s`), never a fixed sleep.

Shared by the isr_hw, produce and transactions suites (they used to import it from test_isr_hw).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import pytest
from kafka import errors as E

from conformance.properties import ops
from conformance.wire import Wire, unique_name
from fixtures.target import Target

T = TypeVar("T")
DEFAULT_LAG_MS = 30_000          # replica.lag.time.max.ms default
DEFAULT_SESSION_MS = 9_000       # broker.session.timeout.ms default (KRaft): a silent broker is fenced after it
DEFAULT_HEARTBEAT_MS = 2_000     # broker.heartbeat.interval.ms default
# What the settings promise is for a machine that keeps up. CI's 2 cores at load 4-16 ran the JVMs several times
# slower (issue 29: a 28-minute test run); the bound is this many times the settings' promise, plus a fixed slack
# for a JVM that was just restarted.
LOAD_FACTOR = 4
SLACK_S = 15.0
# Answers of a broker that does not (yet) serve the partition as leader at the epoch asked: a client retries them.
NOT_YET = frozenset({E.NotLeaderForPartitionError.errno, E.LeaderNotAvailableError.errno,
                     E.FencedLeaderEpochError.errno, E.UnknownLeaderEpochError.errno,
                     E.UnknownTopicOrPartitionError.errno, E.ReplicaNotAvailableError.errno})


async def state(w: Wire, topic: str, partition: int = 0) -> ops.PartitionMeta:
    """The partition's Metadata as the broker behind ``w`` answers it now."""
    _brokers, parts = await ops.metadata(w, [topic])
    return parts[(topic, partition)]


async def eventually(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float,
                     interval_s: float = 0.1) -> tuple[T, float]:
    """Call ``probe`` until ``ok`` holds or the time is up; returns (last value, seconds waited)."""
    t0 = time.monotonic()
    value = await probe()
    while not ok(value) and time.monotonic() - t0 < timeout_s:
        await asyncio.sleep(interval_s)
        value = await probe()
    return value, time.monotonic() - t0


def election_bound_s(settings: Mapping[str, Any]) -> float:
    """How long a new leader may take to be elected and served where a check asks, from a target's settings: a
    killed or paused leader is fenced after broker.session.timeout.ms (its last heartbeat up to
    broker.heartbeat.interval.ms earlier); a follower it shared the ISR with may first have to leave it after
    replica.lag.time.max.ms; then the brokers apply the record. Times LOAD_FACTOR, plus SLACK_S, for a loaded
    machine."""
    session = int(settings.get("broker.session.timeout.ms", DEFAULT_SESSION_MS))
    heartbeat = int(settings.get("broker.heartbeat.interval.ms", DEFAULT_HEARTBEAT_MS))
    lag = int(settings.get("replica.lag.time.max.ms", DEFAULT_LAG_MS))
    return LOAD_FACTOR * (session + heartbeat + lag) / 1000 + SLACK_S


async def await_new_leader(to: Callable[[int], Awaitable[Wire]], drop: Callable[[int], Awaitable[None]],
                           observers: Callable[[], list[int]], topic: str, before: ops.PartitionMeta, *,
                           among: Iterable[int] | None = None, avoid: Callable[[], set[int]] = set,
                           partition: int = 0, bound_s: float) -> tuple[ops.PartitionMeta, Wire, float]:
    """Wait for the election that ends ``before``'s leader epoch to be visible where the check will ask: a live
    broker's Metadata (the first of ``observers()``) names a leader (in ``among`` if given, else any other than
    ``before.leader``; never one in ``avoid()``) at an epoch above ``before.leader_epoch``; that leader's own
    Metadata names it at that epoch or later; and it serves a consumer Fetch pinned to its epoch (an answer other
    than the NOT_LEADER_OR_FOLLOWER family a client retries). ``to(node)`` gives a Wire to a node, ``drop(node)``
    forgets one that failed. Returns (the leader's own view, a Wire to it, seconds waited); fails with the last
    things seen after ``bound_s`` (:func:`election_bound_s`)."""
    allowed = set(among) if among is not None else None

    def elected(s: ops.PartitionMeta) -> bool:
        if s.leader < 0 or s.leader_epoch <= before.leader_epoch or s.leader in avoid():
            return False
        return s.leader in allowed if allowed is not None else s.leader != before.leader

    t0 = time.monotonic()
    seen: list[Any] = []
    while True:
        asking: int | None = None
        try:
            asking = observers()[0]
            st = await state(await to(asking), topic, partition)
            seen = [(f"broker {asking}", st)]
            if elected(st):
                asking = st.leader
                w = await to(st.leader)
                own = await state(w, topic, partition)
                seen.append((f"broker {st.leader} itself", own))
                if own.leader == st.leader and own.leader_epoch >= st.leader_epoch:
                    f = await ops.fetch(w, topic, partition, 0, max_wait_ms=0, min_bytes=0, max_bytes=1,
                                        current_leader_epoch=own.leader_epoch)
                    seen.append(("its Fetch pinned to that epoch answered", f.error))
                    if f.error not in NOT_YET:
                        return own, w, time.monotonic() - t0
        except (TimeoutError, OSError, AssertionError) as e:
            # a broker just restarted, or a connection from before a pause: reconnect on the next round
            seen.append((f"broker {asking}", repr(e)[:200]))
            if asking is not None:
                await drop(asking)
        if time.monotonic() - t0 > bound_s:
            raise AssertionError(
                f"no new leader for {topic}/{partition} visible where it is asked within {bound_s:.0f} s (bound "
                f"from the settings; before: leader {before.leader} epoch {before.leader_epoch}; wanted "
                f"{sorted(allowed) if allowed is not None else 'any other'}): last seen {seen}")
        await asyncio.sleep(0.1)


class Cluster:
    """A replicated target seen through the protocol: which broker leads, who is in the ISR, faults by node id.

    Requests go to a live broker chosen per call (never one this check paused or killed), with one Wire per node
    (dropped when the node is killed), so pausing the bootstrap broker does not hang the check.
    """

    def __init__(self, target: Target, wire: Wire) -> None:
        self.target = target
        self.wire = wire
        self.brokers: dict[int, tuple[str, int]] = {}
        self.wires: dict[int, Wire] = {}
        self.paused: set[int] = set()
        self.killed: set[int] = set()
        self._settings: dict[str, int] = {}

    async def start(self) -> None:
        self.brokers, _ = await ops.metadata(self.wire, [])

    async def to(self, node: int) -> Wire:
        if node not in self.wires:
            host, port = self.brokers[node]
            self.wires[node] = await Wire.connect(f"{host}:{port}", evidence=self.wire.evidence,
                                                  history=self.wire.history)
        return self.wires[node]

    async def drop(self, node: int) -> None:
        """Forget the Wire to ``node`` (a connection from before a pause or restart may be dead)."""
        dead = self.wires.pop(node, None)
        if dead is not None:
            with contextlib.suppress(Exception):
                await dead.close()

    async def observer(self, avoid: set[int] | None = None) -> Wire:
        """A Wire to a live broker not in ``avoid`` (a paused broker would never answer)."""
        node = next(b for b in sorted(self.brokers) if b not in (avoid or set()) | self.paused | self.killed)
        return await self.to(node)

    async def topic(self, replicas: int = 3, configs: dict[str, str] | None = None) -> tuple[str, ops.PartitionMeta]:
        if len(self.brokers) < replicas:   # a fresh cluster's last broker may still be registering
            (self.brokers, _), _ = await eventually(lambda: ops.metadata(self.wire, []),
                                                    lambda m: len(m[0]) >= replicas, 15)
        if len(self.brokers) < replicas:
            pytest.skip(f"target {self.target.name!r} has {len(self.brokers)} brokers; this check needs {replicas}")
        name = unique_name("isr")
        await self.wire.create_topic(name, partitions=1, replication_factor=replicas, configs=configs)
        st, _ = await eventually(lambda: state(self.wire, name), lambda s: len(s.isr) == replicas, 30)
        assert len(st.isr) == replicas, f"{name} never had a full ISR: {st}"
        return name, st

    async def broker_setting(self, name: str, default: int) -> int:
        """A broker setting: DescribeConfigs if served, else the target's settings, else ``default`` (cached)."""
        if name in self._settings:
            return self._settings[name]
        w = await self.observer()
        value: int | None = None
        for node in sorted(self.brokers):
            if node in self.paused | self.killed:
                continue
            try:
                found = await ops.broker_configs(w, node, [name])
            except AssertionError:      # DescribeConfigs refused (connection closed): fall back below
                break
            if found and name in found:
                value = int(found[name])
                break
        if value is None:
            value = int(self.target.config().get("settings", {}).get(name, default))
        self._settings[name] = value
        return value

    async def lag_ms(self) -> int:
        """replica.lag.time.max.ms: DescribeConfigs if served, else the target's settings, else Kafka's default."""
        return await self.broker_setting("replica.lag.time.max.ms", DEFAULT_LAG_MS)

    async def election_bound_s(self) -> float:
        """:func:`election_bound_s` from this target's settings (DescribeConfigs, else its config, else Kafka's)."""
        return election_bound_s({
            "broker.session.timeout.ms": await self.broker_setting("broker.session.timeout.ms", DEFAULT_SESSION_MS),
            "broker.heartbeat.interval.ms": await self.broker_setting("broker.heartbeat.interval.ms",
                                                                      DEFAULT_HEARTBEAT_MS),
            "replica.lag.time.max.ms": await self.lag_ms()})

    async def new_leader(self, topic: str, before: ops.PartitionMeta, *, among: Iterable[int] | None = None,
                         partition: int = 0) -> tuple[ops.PartitionMeta, Wire, float]:
        """:func:`await_new_leader` through this target's live brokers (never one this check paused or killed)."""
        bound = await self.election_bound_s()
        allowed = set(among) if among is not None else None

        def observers() -> list[int]:
            down = self.paused | self.killed
            return [b for b in sorted(self.brokers) if b not in down and
                    (b != before.leader or (allowed is not None and b in allowed))]

        return await await_new_leader(self.to, self.drop, observers, topic, before, among=allowed,
                                      avoid=lambda: self.paused | self.killed, partition=partition, bound_s=bound)

    def pause(self, node: int) -> None:
        self.target.pause_broker(node)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        self.target.resume_broker(node)
        self.paused.discard(node)

    async def kill(self, node: int) -> None:
        self.target.kill_broker(node)
        self.killed.add(node)
        await self.drop(node)

    def restart(self, node: int) -> None:
        self.target.restart(node)
        self.killed.discard(node)

    def heal(self) -> None:
        for node in list(self.paused):
            self.resume(node)
        for node in list(self.killed):
            self.restart(node)

    async def close(self) -> None:
        for w in self.wires.values():
            with contextlib.suppress(Exception):
                await w.close()
        await self.wire.close()

