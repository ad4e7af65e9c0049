"""Group consumer: the classic (eager) consumer group protocol on top of :class:`~.consumer.Consumer`.

Why our own: group conformance checks and chaos workloads must see and steer every group step (join, sync,
heartbeat, commit, leave) and must be able to "crash" a member (no LeaveGroup, so only the session timeout tells
the coordinator). Layering: ``protocol.Connection`` (coordinator socket) → ``cluster.Cluster`` (metadata) →
``consumer.Consumer`` (positions, fetch, reset policy) → this class (membership, offsets); assignors live in
``assignors.py``.

Behaviour, following the Java ``KafkaConsumer`` / ``ConsumerCoordinator`` (eager rebalance protocol):
- ``subscribe(topics, on_assign, on_revoke)``; the group is joined from :meth:`GroupConsumer.poll` (as Java
  does in ``poll``): the join runs in a task that poll waits for up to its timeout, so poll stays bounded while
  a JoinGroup is parked; rebalance callbacks run in that task, before poll returns records of the new assignment.
- FindCoordinator (key type GROUP) → a dedicated connection to the coordinator. NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE / a dropped connection mark the coordinator unknown; it is looked up again.
- JoinGroup: MEMBER_ID_REQUIRED (KIP-394) → retry at once with the given id; UNKNOWN_MEMBER_ID → forget the id and
  retry; REBALANCE_IN_PROGRESS / COORDINATOR_LOAD_IN_PROGRESS → back off and retry; FENCED_INSTANCE_ID and
  configuration errors are fatal. The leader computes the assignment (range / roundrobin, Java's results).
- SyncGroup: REBALANCE_IN_PROGRESS → rejoin keeping the member id; ILLEGAL_GENERATION → rejoin with the member id;
  UNKNOWN_MEMBER_ID → rejoin without it.
- Before rejoining: auto-commit (sync) if enabled and the generation is still valid, then ``on_revoke`` with
  everything owned (eager). When the generation was lost (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / poll timeout)
  nothing is committed and ``on_revoke`` still runs (Java's default ``onPartitionsLost``).
- Heartbeats: an asyncio task every ``heartbeat_interval_ms`` while the member holds a generation, also after
  REBALANCE_IN_PROGRESS until poll rejoins (so a slow batch is bounded by max.poll.interval.ms, not the session
  timeout, as in Java). REBALANCE_IN_PROGRESS → rejoin on the next poll; ILLEGAL_GENERATION → reset generation, rejoin; UNKNOWN_MEMBER_ID → reset member id, rejoin;
  FENCED_INSTANCE_ID → fatal, raised by the next poll/commit.
- ``max_poll_interval_ms``: if poll is not called in time (counted from the last poll or the end of the last
  rebalance, whichever is later) the heartbeat task leaves the group (LeaveGroup for a
  dynamic member; a static member just stops, as Java's ``maybeLeaveGroup``) and the next poll rejoins.
  It is also the JoinGroup rebalance timeout.
- Static membership (KIP-345): ``group_instance_id``; close() sends no LeaveGroup for a static member.
- Commits: :meth:`commit` (sync, retried on coordinator errors) and :meth:`commit_async`, OffsetCommit with the
  generation and member id; auto-commit of consumed positions every ``auto_commit_interval_ms`` from poll.
  A commit the coordinator rejects for a generation change raises ``CommitFailedError`` (ILLEGAL_GENERATION /
  UNKNOWN_MEMBER_ID) or ``RebalanceInProgressError``.
- New assignment: positions from OffsetFetch committed offsets; else ``auto_offset_reset`` earliest / latest /
  none (none → ``NoOffsetForPartitionError`` with ``.partitions``). OFFSET_OUT_OF_RANGE during fetch applies the
  same policy (in :class:`Consumer`).
- close(): commit (if auto-commit), ``on_revoke``, LeaveGroup (dynamic members). :meth:`abort` simulates a crash.

Not implemented: the cooperative protocol (KIP-429) and pattern subscriptions; topic metadata changes do not by
themselves trigger a rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import kafka.errors as Errors
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from .assignors import (
    ASSIGNORS,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .cluster import Cluster
from .consumer import Consumer
from .protocol import DEFAULT_CLIENT_ID, Connection
from .transactions import ConsumerGroupMetadata
from .types import ConsumerRecord, TopicPartition

__all__ = ["GroupConsumer", "RebalanceCallback"]

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 10, 11, 12, 13, 14
_MAX_VERSION = {OFFSET_COMMIT: 9, OFFSET_FETCH: 9}  # v10 names topics by id
PROTOCOL_TYPE = "consumer"

RebalanceCallback = Callable[[set[TopicPartition]], "Awaitable[None] | None"]

_COORDINATOR_ERRORS = (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError)
_FATAL_JOIN = (
    Errors.InconsistentGroupProtocolError,
    Errors.InvalidSessionTimeoutError,
    Errors.GroupAuthorizationFailedError,
    Errors.InvalidGroupIdError,
    Errors.GroupMaxSizeReachedError,
    Errors.FencedInstanceIdError,
)


class _CoordinatorLost(Exception):
    """Internal: the coordinator moved or its connection dropped; look it up again."""


class GroupConsumer:
    """Subscribe-based consumer in a classic group. ``async with GroupConsumer(b, "g") as c: c.subscribe([...])``."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        group_id: str,
        *,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        auto_offset_reset: str = "latest",
        assignors: Sequence[str] = ("range",),
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        client_id: str = DEFAULT_CLIENT_ID,
        **fetch_options: Any,
    ) -> None:
        for a in assignors:
            if a not in ASSIGNORS:
                raise ValueError(f"unknown assignor {a!r}: choose from {sorted(ASSIGNORS)}")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.assignors = list(assignors)
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.cluster = Cluster(bootstrap, client_id=client_id, request_timeout=self.request_timeout)
        self.consumer = Consumer(
            self.cluster, auto_offset_reset=auto_offset_reset, request_timeout_ms=request_timeout_ms, **fetch_options
        )
        self._client_id = client_id
        self._topics: list[str] = []
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        #: membership as the coordinator last told us
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.coordinator: tuple[int, str, int] | None = None  # node id, host, port
        self._coord_conn: Connection | None = None
        self._coord_lock = asyncio.Lock()  # heartbeat task and poll path look the coordinator up one at a time
        self._rejoin_needed = True
        self._stable = False
        self._owned: set[TopicPartition] = set()
        self._need_committed: set[TopicPartition] = set()
        self._fatal: BaseException | None = None
        self._wakeup = asyncio.Event()
        self._hb_task: asyncio.Task | None = None
        self._join_task: asyncio.Task | None = None
        self._pending_commits: set[asyncio.Task] = set()
        self._last_poll = time.monotonic()
        self._next_auto_commit = 0.0
        self._started = False
        self._closed = False
        #: (monotonic_ns, event, detail) of group steps, newest last (bounded), for checks and benchmarks
        self.events: list[tuple[int, str, Any]] = []

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def __aenter__(self) -> GroupConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Load metadata and start the heartbeat task (joining happens in poll)."""
        if not self._started:
            await self.cluster.start()
            await self.consumer.start()
            self._started = True
            self._last_poll = time.monotonic()
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def close(self) -> None:
        """Leave cleanly: commit consumed offsets (auto-commit), ``on_revoke``, LeaveGroup (dynamic members)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._pending_commits:
                await asyncio.gather(*self._pending_commits, return_exceptions=True)
            if self._stable and self.generation_id >= 0 and self._fatal is None:
                if self.enable_auto_commit:
                    with contextlib.suppress(Errors.KafkaError, OSError, TimeoutError, _CoordinatorLost):
                        await self.commit()
                await self._revoke_owned()
            if self.group_instance_id is None and self.member_id and self._fatal is None:
                with contextlib.suppress(Errors.KafkaError, OSError, TimeoutError, _CoordinatorLost):
                    await self._leave_group("the consumer is being closed")
        finally:
            await self._shutdown()

    async def abort(self) -> None:
        """Simulate a crash: stop heartbeats and drop every socket, with no commit and no LeaveGroup.

        The coordinator learns of it only when the session timeout expires.
        """
        self._closed = True
        await self._shutdown()

    async def _shutdown(self) -> None:
        tasks = [t for t in (self._hb_task, self._join_task, *self._pending_commits) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._hb_task = self._join_task = None
        await self._drop_coordinator()
        await self.consumer.close()
        await self.cluster.close()
        self._started = False

    def _event(self, name: str, detail: Any = None) -> None:
        self.events.append((time.monotonic_ns(), name, detail))
        del self.events[:-1000]

    # -- subscription --------------------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe to topics; the (re)join happens on the next poll. Callbacks may be sync or async."""
        topics = sorted(set(topics))
        if not topics:
            raise ValueError("subscribe needs at least one topic (use unsubscribe to leave)")
        changed = topics != self._topics
        self._topics = topics
        self._on_assign, self._on_revoke = on_assign, on_revoke
        if changed:
            self._request_rejoin("subscription changed")

    @property
    def stable(self) -> bool:
        """True while this member holds the current generation's assignment and no rejoin is pending."""
        return self._stable and not self._rejoin_needed and self._fatal is None

    def subscription(self) -> set[str]:
        return set(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """Partitions owned in the current generation (empty while rebalancing)."""
        return set(self._owned)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Next poll fetches ``tp`` from ``offset`` (overrides the committed offset)."""
        self.consumer.seek(tp, offset)
        self._need_committed.discard(tp)

    async def position(self, tp: TopicPartition) -> int:
        """Offset of the next record poll returns for ``tp`` (after committed-offset lookup / reset)."""
        await self._refresh_committed()
        return await self.consumer.position(tp)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Java's ``KafkaConsumer.groupMetadata()``: what ``send_offsets_to_transaction`` needs so the coordinator
        can refuse a transactional commit from a member that lost its generation (KIP-447)."""
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id, self.group_instance_id)

    def consumed_offsets(self) -> dict[TopicPartition, int]:
        """The offsets auto-commit / ``commit()`` would commit: next offset to return, per owned partition."""
        return {tp: o for tp, o in self.consumer.consumed_positions().items() if tp in self._owned}

    # -- polling -------------------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Join/rejoin the group if needed, auto-commit if due, then fetch until records or ``timeout_ms``.

        A rebalance noticed by the heartbeat task interrupts a waiting fetch so the rejoin starts at once.
        """
        if not self._started:
            await self.start()
        if self._closed:
            raise Errors.IllegalStateError("consumer is closed")
        if not self._topics:
            raise Errors.IllegalStateError("not subscribed")
        loop = asyncio.get_running_loop()
        self._last_poll = time.monotonic()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            self._last_poll = time.monotonic()
            if not await self._join_within(deadline):
                return {}
            if not self._rejoin_needed:
                self._wakeup.clear()  # nothing left to act on: do not let a stale wakeup cut fetches short
            self._maybe_auto_commit()
            if self._stable and self._owned:
                await self._refresh_committed()
                got = await self._fetch_or_wakeup(max_records)
                if got:
                    return got
            else:
                with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see Producer._run)
                    async with asyncio.timeout(max(0.0, min(0.05, deadline - loop.time()))):
                        await self._wakeup.wait()
            if loop.time() >= deadline:
                return {}

    async def _fetch_or_wakeup(self, max_records: int | None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """One fetch round, abandoned as soon as the heartbeat task asks for a rejoin (or a fatal error)."""
        fetch = asyncio.ensure_future(self.consumer.poll(0, max_records))
        wake = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({fetch, wake}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            fetch.cancel()
            raise
        finally:
            wake.cancel()
        if not fetch.done():
            fetch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await fetch
            return {}
        got = fetch.result()
        # records of partitions revoked meanwhile are not handed out (Java drops them on revocation)
        return {tp: recs for tp, recs in got.items() if tp in self._owned}

    # -- membership ----------------------------------------------------------------------------------------

    def _request_rejoin(self, why: str) -> None:
        if not self._rejoin_needed:
            self._event("rejoin_needed", why)
        self._rejoin_needed = True
        self._wakeup.set()

    def _fail(self, exc: BaseException) -> None:
        self._fatal = exc
        self._stable = False
        self._event("fatal", repr(exc))
        self._wakeup.set()

    def _reset_generation(self, reset_member_id: bool, why: str) -> None:
        self.generation_id = -1
        if reset_member_id:
            self.member_id = ""
        self._stable = False
        self._request_rejoin(why)

    async def _join_within(self, deadline: float) -> bool:
        """Run (or keep waiting for) the rejoin until ``deadline``; True once the member is in the group.

        The join runs in its own task, so a poll timeout does not abandon a JoinGroup parked at the coordinator:
        the next poll waits for the same task (Java's poll likewise returns at its timeout mid-rebalance).
        """
        if self._fatal is not None:
            raise self._fatal
        if not self._rejoin_needed and self._stable:
            return True
        if self._join_task is None or self._join_task.done():
            self._join_task = asyncio.get_running_loop().create_task(self._ensure_active())
        task = self._join_task
        left = max(0.0, deadline - asyncio.get_running_loop().time())
        done, _ = await asyncio.wait({task}, timeout=left)
        if not done:
            return False
        self._join_task = None
        task.result()  # a fatal error surfaces here
        return True

    async def _ensure_active(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        # runs in _join_task (see _join_within), so it may outlive the poll that started it
        while self._rejoin_needed or not self._stable:
            if self._fatal is not None:
                raise self._fatal
            self._wakeup.clear()
            if self._owned:
                await self._prepare_rejoin()
            self._stable = False  # no heartbeats while the join is in flight (the coordinator does not expire it)
            try:
                await self._ensure_coordinator()
                await self._join_and_sync()
            except (_CoordinatorLost, OSError, TimeoutError, Errors.KafkaConnectionError) as exc:
                self._event("coordinator_lost", repr(exc))
                await self._drop_coordinator()
                await asyncio.sleep(self.retry_backoff)
            except Errors.KafkaError as exc:
                if isinstance(exc, _FATAL_JOIN):
                    self._fail(exc)
                    raise
                self._event("join_retry", repr(exc))
                await asyncio.sleep(self.retry_backoff)

    async def _prepare_rejoin(self) -> None:
        """Java's onJoinPrepare (eager): commit if the generation is still ours, then revoke everything."""
        if self.enable_auto_commit and self.generation_id >= 0:
            with contextlib.suppress(Errors.KafkaError, OSError, TimeoutError, _CoordinatorLost):
                await self.commit(retries=1)
        await self._revoke_owned()

    async def _revoke_owned(self) -> None:
        owned, self._owned = set(self._owned), set()
        self.consumer.assign([])
        self._need_committed.clear()
        self._stable = False
        if owned:
            self._event("revoked", sorted(owned))
        if self._on_revoke is not None:
            r = self._on_revoke(owned)
            if asyncio.iscoroutine(r):
                await r

    async def _join_and_sync(self) -> None:
        conn = self._coord_conn
        assert conn is not None
        jv = conn.versions.get(JOIN_GROUP)
        sv = conn.versions.get(SYNC_GROUP)
        if jv is None or sv is None:
            raise Errors.UnsupportedVersionError("JoinGroup/SyncGroup")
        metadata = encode_subscription(self._topics)
        kw: dict[str, Any] = dict(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=a, metadata=metadata) for a in self.assignors],
        )
        if jv >= 8:
            kw["reason"] = "rejoin"
        self._event("join_sent", self.member_id)
        resp = await self._coord_request(JoinGroupRequest(**kw), jv, self.max_poll_interval_ms / 1000 + 5)
        body = resp.body
        code = body.error_code
        if code == Errors.MemberIdRequiredError.errno:
            self.member_id = body.member_id
            self._event("member_id_required", body.member_id)
            return  # the loop rejoins at once with the id
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
            raise Errors.UnknownMemberIdError("JoinGroup")
        if code:
            raise self._coordinator_error(code, "JoinGroup")
        self.member_id = body.member_id
        self.generation_id = body.generation_id
        self.protocol_name = body.protocol_name
        self.leader_id = body.leader
        self._event("joined", {"generation": body.generation_id, "member_id": body.member_id,
                               "leader": body.leader == body.member_id})
        assignments: list = []
        if body.leader == body.member_id and not getattr(body, "skip_assignment", False):
            assignments = await self._leader_assign(body.protocol_name, body.members)
        skw: dict[str, Any] = dict(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            assignments=assignments,
        )
        if sv >= 5:
            skw["protocol_type"] = PROTOCOL_TYPE
            skw["protocol_name"] = self.protocol_name
        resp = await self._coord_request(SyncGroupRequest(**skw), sv, self.max_poll_interval_ms / 1000 + 5)
        code = resp.body.error_code
        if code == Errors.RebalanceInProgressError.errno:
            self._event("sync_rebalance_in_progress")
            return  # still _rejoin_needed: join again with the same member id
        if code == Errors.IllegalGenerationError.errno:
            self.generation_id = -1
            raise Errors.IllegalGenerationError("SyncGroup")
        if code == Errors.UnknownMemberIdError.errno:
            self.generation_id, self.member_id = -1, ""
            raise Errors.UnknownMemberIdError("SyncGroup")
        if code:
            raise self._coordinator_error(code, "SyncGroup")
        partitions = decode_assignment(resp.body.assignment)
        await self._on_join_complete(partitions)

    async def _leader_assign(self, protocol: str, members: list) -> list:
        subs = [decode_subscription(m.member_id, getattr(m, "group_instance_id", None), m.metadata) for m in members]
        topics = sorted({t for s in subs for t in s.topics})
        await self.cluster.refresh_metadata(topics)
        counts = {t: len(self.cluster.partitions_for(t)) for t in topics}
        result = ASSIGNORS[protocol].assign(subs, counts)
        self._event("assigned_as_leader", {m: len(ps) for m, ps in result.items()})
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(ps))
            for m, ps in result.items()
        ]

    async def _on_join_complete(self, partitions: list[TopicPartition]) -> None:
        self._owned = set(partitions)
        self.consumer.assign(partitions)
        self._need_committed = set(partitions)
        self._rejoin_needed = False
        self._stable = True
        self._last_poll = time.monotonic()  # Java resets the poll timer when heartbeats are re-enabled
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        self._event("assigned", sorted(partitions))
        if self._on_assign is not None:
            r = self._on_assign(set(partitions))
            if asyncio.iscoroutine(r):
                await r

    async def _refresh_committed(self) -> None:
        """Positions of newly assigned partitions from OffsetFetch (partitions without a commit stay for reset)."""
        need = [tp for tp in self._need_committed if tp in self._owned]
        if not need:
            return
        committed = await self.committed(need)
        for tp in need:
            off = committed.get(tp)
            if off is not None and off >= 0 and tp in self._need_committed:
                self.consumer.seek(tp, off)
            self._need_committed.discard(tp)

    # -- coordinator ---------------------------------------------------------------------------------------

    async def _ensure_coordinator(self) -> Connection:
        if self._coord_conn is not None and not self._coord_conn.closed:
            return self._coord_conn
        async with self._coord_lock:  # whoever waited here uses the connection the first one opened
            if self._coord_conn is not None and not self._coord_conn.closed:
                return self._coord_conn
            return await self._find_coordinator()

    async def _find_coordinator(self) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout
        while True:
            try:
                conn = await self.cluster.any_connection()
                v = conn.versions.get(FIND_COORDINATOR)
                if v is None:
                    raise Errors.UnsupportedVersionError("FindCoordinator")
                if v >= 4:
                    req = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group_id])
                else:
                    req = FindCoordinatorRequest(key=self.group_id, key_type=0)
                body = (await conn.request(req, v, self.request_timeout)).body
                c = body.coordinators[0] if v >= 4 else body
                if c.error_code == 0:
                    self.coordinator = (c.node_id, c.host, c.port)
                    cconn = await Connection.connect(c.host, c.port, client_id=self._client_id,
                                                     timeout=self.request_timeout)
                    await cconn.api_versions(timeout=self.request_timeout)
                    for key, cap in _MAX_VERSION.items():
                        if key in cconn.versions:
                            cconn.versions[key] = min(cconn.versions[key], cap)
                    self._coord_conn = cconn
                    self._event("coordinator", self.coordinator)
                    return cconn
                err = Errors.for_code(c.error_code)
                if not err.retriable:
                    raise err(f"FindCoordinator {self.group_id}")
            except (OSError, TimeoutError, Errors.KafkaConnectionError) as exc:
                if loop.time() >= deadline:
                    raise Errors.KafkaTimeoutError(f"no coordinator for {self.group_id}: {exc!r}") from exc
                with contextlib.suppress(Exception):
                    await self.cluster.close()
            if loop.time() >= deadline:
                raise Errors.KafkaTimeoutError(f"no coordinator for {self.group_id}")
            await asyncio.sleep(self.retry_backoff)

    async def _drop_coordinator(self) -> None:
        conn, self._coord_conn = self._coord_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _coord_request(self, req: Any, version: int, timeout: float) -> Any:
        conn = await self._ensure_coordinator()
        try:
            return await conn.request(req, version, timeout)
        except (OSError, Errors.KafkaConnectionError) as exc:
            await self._drop_coordinator()
            raise _CoordinatorLost(repr(exc)) from exc

    def _coordinator_error(self, code: int, what: str) -> Exception:
        err = Errors.for_code(code)
        if issubclass(err, _COORDINATOR_ERRORS):
            return _CoordinatorLost(f"{what}: {err.__name__}")
        return err(what)

    # -- heartbeat -----------------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """Heartbeats while Stable; also enforces max.poll.interval.ms (Java's HeartbeatThread)."""
        interval = self.heartbeat_interval_ms / 1000
        while not self._closed:
            await asyncio.sleep(min(interval, 0.1) if not self._stable else interval)
            if self._closed or self._fatal is not None:
                return
            if self._stable and time.monotonic() - self._last_poll > self.max_poll_interval_ms / 1000:
                await self._poll_timeout()
                continue
            if not self._stable:
                continue  # (still heartbeating once a rebalance is pending: until poll rejoins, as Java does)
            try:
                await self._heartbeat_once()
            except (_CoordinatorLost, OSError, TimeoutError, Errors.KafkaError) as exc:
                # Java: mark the coordinator unknown and find it again; the generation stays valid until the
                # coordinator says otherwise (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION on a later heartbeat)
                self._event("heartbeat_failed", repr(exc))
                await self._drop_coordinator()

    async def _heartbeat_once(self) -> None:
        conn = await self._ensure_coordinator()
        v = conn.versions.get(HEARTBEAT)
        if v is None:
            raise Errors.UnsupportedVersionError("Heartbeat")
        gen, member = self.generation_id, self.member_id
        req = HeartbeatRequest(group_id=self.group_id, generation_id=gen, member_id=member,
                               group_instance_id=self.group_instance_id)
        code = (await self._coord_request(req, v, self.request_timeout)).body.error_code
        if gen != self.generation_id or member != self.member_id:
            return  # a rejoin happened meanwhile: this answer is about an old generation
        if code == 0:
            return
        self._event("heartbeat_error", Errors.for_code(code).__name__)
        if code == Errors.RebalanceInProgressError.errno:
            self._request_rejoin("heartbeat: REBALANCE_IN_PROGRESS")
        elif code == Errors.IllegalGenerationError.errno:
            self._reset_generation(False, "heartbeat: ILLEGAL_GENERATION")
        elif code == Errors.UnknownMemberIdError.errno:
            self._reset_generation(True, "heartbeat: UNKNOWN_MEMBER_ID")
        elif code == Errors.FencedInstanceIdError.errno:
            self._fail(Errors.FencedInstanceIdError(f"heartbeat: instance {self.group_instance_id} fenced"))
        elif issubclass(Errors.for_code(code), _COORDINATOR_ERRORS):
            raise _CoordinatorLost("heartbeat")
        else:
            self._fail(Errors.for_code(code)("Heartbeat"))

    async def _poll_timeout(self) -> None:
        self._event("poll_timeout", self.max_poll_interval_ms)
        if self.group_instance_id is None and self.member_id:
            with contextlib.suppress(Errors.KafkaError, OSError, TimeoutError, _CoordinatorLost):
                await self._leave_group("consumer poll timeout has expired")
        self._reset_generation(True, "max.poll.interval.ms expired")

    async def _leave_group(self, reason: str) -> None:
        conn = await self._ensure_coordinator()
        v = conn.versions.get(LEAVE_GROUP)
        if v is None:
            raise Errors.UnsupportedVersionError("LeaveGroup")
        if v >= 3:
            ident: dict[str, Any] = dict(member_id=self.member_id, group_instance_id=self.group_instance_id)
            if v >= 5:
                ident["reason"] = reason
            req = LeaveGroupRequest(group_id=self.group_id,
                                    members=[LeaveGroupRequest.MemberIdentity(**ident)])
        else:
            req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        self._event("leave_sent", reason)
        await self._coord_request(req, v, self.request_timeout)
        self._stable = False

    # -- offsets -------------------------------------------------------------------------------------------

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Committed offsets (OffsetFetch); partitions with no commit are absent."""
        tps = sorted(set(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for attempt in range(20):
            try:
                conn = await self._ensure_coordinator()
                v = conn.versions.get(OFFSET_FETCH)
                if v is None:
                    raise Errors.UnsupportedVersionError("OffsetFetch")
                if v >= 8:
                    topics = [OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=t, partition_indexes=ps) for t, ps in by_topic.items()]
                    req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id=self.group_id, topics=topics)], require_stable=True)
                else:
                    req = OffsetFetchRequest(group_id=self.group_id, topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()], require_stable=True)
                body = (await self._coord_request(req, v, self.request_timeout)).body
                group = body.groups[0] if v >= 8 else body
                code = getattr(group, "error_code", 0)
                if code:
                    raise self._coordinator_error(code, "OffsetFetch")
                out: dict[TopicPartition, int] = {}
                retry = False
                for t in group.topics:
                    for p in t.partitions:
                        if p.error_code:
                            err = Errors.for_code(p.error_code)
                            if err.retriable:  # UNSTABLE_OFFSET_COMMIT & co
                                retry = True
                                continue
                            raise err(f"OffsetFetch {t.name}/{p.partition_index}")
                        if p.committed_offset >= 0:
                            out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
                if not retry:
                    return out
            except _CoordinatorLost:
                await self._drop_coordinator()
            except Errors.KafkaError as exc:
                if not exc.retriable or attempt == 19:
                    raise
            await asyncio.sleep(self.retry_backoff)
        raise Errors.KafkaTimeoutError("OffsetFetch kept failing")

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None, retries: int = 10) -> None:
        """Synchronous OffsetCommit (default: consumed positions) with this member's generation and id.

        Retries coordinator errors; a generation change raises CommitFailedError / RebalanceInProgressError.
        """
        if self._fatal is not None:
            raise self._fatal
        offs = dict(self.consumed_offsets() if offsets is None else offsets)
        if not offs:
            return
        last: BaseException | None = None
        for _ in range(max(1, retries)):
            try:
                await self._commit_once(offs)
                return
            except _CoordinatorLost as exc:
                last = exc
                await self._drop_coordinator()
            except Errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                last = exc
            await asyncio.sleep(self.retry_backoff)
        raise Errors.CommitFailedError(f"commit kept failing: {last!r}")

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        callback: Callable[[dict[TopicPartition, int], BaseException | None], None] | None = None,
    ) -> asyncio.Task:
        """Commit without waiting (one attempt); ``callback(offsets, error)`` runs when it completes."""
        offs = dict(self.consumed_offsets() if offsets is None else offsets)

        async def go() -> None:
            err: BaseException | None = None
            try:
                if offs:
                    await self._commit_once(offs)
            except (Errors.KafkaError, _CoordinatorLost, OSError, TimeoutError) as exc:
                err = exc
                self._event("commit_async_failed", repr(exc))
            if callback is not None:
                callback(offs, err)

        task = asyncio.get_running_loop().create_task(go())
        self._pending_commits.add(task)
        task.add_done_callback(self._pending_commits.discard)
        return task

    def _maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit or not self._stable:
            return
        now = time.monotonic()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
            self.commit_async()

    async def _commit_once(self, offsets: Mapping[TopicPartition, int]) -> None:
        conn = await self._ensure_coordinator()
        v = conn.versions.get(OFFSET_COMMIT)
        if v is None:
            raise Errors.UnsupportedVersionError("OffsetCommit")
        by_topic: dict[str, list] = {}
        for tp, off in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestTopic.
                                                     OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=off, committed_leader_epoch=-1,
                committed_metadata=""))
        gen, member = (self.generation_id, self.member_id) if self._stable else (-1, "")
        if not self._stable and self.generation_id >= 0:
            gen, member = self.generation_id, self.member_id  # PreparingRebalance: the old generation is valid
        req = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=gen,
            member_id=member,
            group_instance_id=self.group_instance_id,
            retention_time_ms=-1,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        body = (await self._coord_request(req, v, self.request_timeout)).body
        codes = {p.error_code for t in body.topics for p in t.partitions}
        codes.discard(0)
        if not codes:
            self._event("committed", {f"{tp.topic}/{tp.partition}": o for tp, o in offsets.items()})
            return
        code = sorted(codes)[0]
        if code == Errors.RebalanceInProgressError.errno:
            self._request_rejoin("commit: REBALANCE_IN_PROGRESS")
            raise Errors.RebalanceInProgressError("OffsetCommit: the group is rebalancing; poll to rejoin")
        if code == Errors.IllegalGenerationError.errno:
            self._reset_generation(False, "commit: ILLEGAL_GENERATION")
            raise Errors.CommitFailedError("OffsetCommit: ILLEGAL_GENERATION (partitions were reassigned)")
        if code == Errors.UnknownMemberIdError.errno:
            self._reset_generation(True, "commit: UNKNOWN_MEMBER_ID")
            raise Errors.CommitFailedError("OffsetCommit: UNKNOWN_MEMBER_ID (partitions were reassigned)")
        if code == Errors.FencedInstanceIdError.errno:
            exc = Errors.FencedInstanceIdError(f"OffsetCommit: instance {self.group_instance_id} fenced")
            self._fail(exc)
            raise exc
        raise self._coordinator_error(code, "OffsetCommit")
