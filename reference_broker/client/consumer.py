"""Consumer with manual assignment: assign / seek / position / poll. No group membership (yet).

Why our own: checks need to control every Fetch knob (max_wait_ms, min_bytes, max_bytes, partition max
bytes, isolation level, version) and see each Fetch round trip (:attr:`Consumer.fetch_responses`).

Behaviour, following the Java consumer:
- Position per assigned partition. A partition without a position is reset by ``auto_offset_reset``
  (``earliest`` / ``latest`` via ListOffsets, ``none`` -> :class:`kafka.errors.NoOffsetForPartitionError`).
- OFFSET_OUT_OF_RANGE from Fetch applies the same policy; with ``none`` it raises
  :class:`kafka.errors.OffsetOutOfRangeError` carrying the partitions and their positions.
- A broker returns whole batches, so records below the fetch offset inside the first batch are skipped;
  control batches (transaction markers) are skipped and advance the position past them.
- Fetch v13+ names topics by id; ids come from Metadata and answers are mapped back to names.
- Invalid-metadata errors (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) refresh metadata and
  the partition is fetched again on the next round.
- No fetch sessions (KIP-227): every Fetch is a full one (session_id 0, epoch -1).
- ``isolation_level=1`` (read_committed): the broker answers up to the last stable offset and lists the aborted
  transactions of the range (producer id, first offset); records of an aborted transaction are dropped as Java's
  ``CompletedFetch`` drops them: an aborted transaction's producer id is "aborted" from its first offset until
  that producer's ABORT marker, and its transactional batches in between are skipped. Control records (markers)
  are never returned, under either isolation level.
- After each ``poll``, :attr:`Consumer.poll_positions` holds, per partition, the fetch offset that poll read from,
  for the partitions whose answer it can vouch for (the history contract's poll ``positions``, see
  history/schema.py; :meth:`Consumer.history_positions` gives them keyed ``"topic/partition"``): a partition whose
  records this poll returns, fetched by it, or one whose Fetch answer (without error) was empty while the whole
  response carried no records (so no size limit cut it): then the broker had nothing at or after that offset.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence

import kafka.errors as Errors
from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords

from .admin import EARLIEST, LATEST, list_offsets
from .cluster import Cluster
from .protocol import DEFAULT_CLIENT_ID, Response
from .types import ConsumerRecord, TopicPartition

__all__ = ["Consumer", "decode_records"]

FETCH = 1
_RESETS = {"earliest": EARLIEST, "latest": LATEST, "none": None}


def decode_records(tp: TopicPartition, data: bytes | None, fetch_offset: int,
                   aborted: Iterable[tuple[int, int]] | None = None) -> tuple[list[ConsumerRecord], int]:
    """Decode record batches; drop records below ``fetch_offset``, control records and, when ``aborted`` is given
    (read_committed: the Fetch answer's ``(producer_id, first_offset)`` of aborted transactions), the records of
    aborted transactions (Java's ``CompletedFetch``: see the module docstring).

    Returns (records, next_offset) where next_offset is past the last complete batch seen (so a batch made
    only of skipped or control records still moves the position), or ``fetch_offset`` if none was seen.
    """
    out: list[ConsumerRecord] = []
    nxt = fetch_offset
    if not data:
        return out, nxt
    pending = sorted(((first, pid) for pid, first in aborted), reverse=True) if aborted is not None else None
    aborted_pids: set[int] = set()
    for batch in MemoryRecords(bytes(data)):
        last = batch.base_offset + batch.last_offset_delta if batch.magic >= 2 else None
        control = batch.magic >= 2 and batch.is_control_batch
        epoch = batch.leader_epoch if batch.magic >= 2 else -1
        if pending is not None and last is not None and batch.producer_id >= 0:
            while pending and pending[-1][0] <= last:  # transactions aborted from at or before this batch on
                aborted_pids.add(pending.pop()[1])
            if control:
                if batch.producer_id in aborted_pids and any(getattr(r, "abort", False) for r in batch):
                    aborted_pids.discard(batch.producer_id)  # its ABORT marker: later batches are another txn
            elif batch.is_transactional and batch.producer_id in aborted_pids:
                nxt = max(nxt, last + 1)
                continue
        for rec in batch:
            if rec.offset < fetch_offset or control:
                continue
            out.append(
                ConsumerRecord(
                    tp.topic,
                    tp.partition,
                    rec.offset,
                    rec.timestamp,
                    rec.timestamp_type,
                    rec.key,
                    rec.value,
                    list(rec.headers),
                    epoch,
                )
            )
            nxt = max(nxt, rec.offset + 1)
        if last is not None:
            nxt = max(nxt, last + 1)
    return out, nxt


class Consumer:
    """Manual-assignment consumer. ``async with Consumer(bootstrap) as c: c.assign([...]); await c.poll()``."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | Cluster,
        *,
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        isolation_level: int = 0,
        request_timeout_ms: int = 30000,
        fetch_version: int | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
    ) -> None:
        if auto_offset_reset not in _RESETS:
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if isinstance(bootstrap, Cluster):
            self.cluster, self._owns = bootstrap, False
        else:
            self.cluster = Cluster(bootstrap, client_id=client_id, request_timeout=request_timeout_ms / 1000)
            self._owns = True
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = isolation_level
        self.request_timeout = request_timeout_ms / 1000
        self.fetch_version = fetch_version
        self._positions: dict[TopicPartition, int | None] = {}
        self._buffer: dict[TopicPartition, list[ConsumerRecord]] = {}
        self._started = False
        #: every Fetch round trip, newest last (bounded), for checks that time or inspect them
        self.fetch_responses: list[Response] = []
        self.poll_positions: dict[TopicPartition, int] = {}  # see the module docstring
        self._claims: dict[TopicPartition, tuple[int, bool]] = {}  # this poll's answers: (fetch offset, had records)
        #: high watermark / log start offset last reported per partition
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.log_start_offsets: dict[TopicPartition, int] = {}
        #: last stable offset last reported per partition (read_committed fetches)
        self.last_stable_offsets: dict[TopicPartition, int] = {}

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._owns and not self._started:
            await self.cluster.start()
        self._started = True

    async def close(self) -> None:
        """Close the connections this consumer owns, also those opened lazily by a consumer never started."""
        if self._owns:
            await self.cluster.close()
        self._started = False

    # -- assignment and positions --------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; new partitions start without a position (reset policy applies)."""
        new = [TopicPartition(*tp) for tp in partitions]
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._buffer = {tp: recs for tp, recs in self._buffer.items() if tp in self._positions}

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def _check(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise Errors.IllegalStateError(f"{tp} is not assigned")

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Next poll fetches ``tp`` from ``offset`` (buffered records for it are dropped)."""
        self._check(tp)
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self._positions[tp] = offset
        self._buffer.pop(tp, None)

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        """Seek to the log start offset (ListOffsets EARLIEST) of the given (default: all) partitions."""
        await self._seek_spec(tps or tuple(self._positions), EARLIEST)

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        """Seek to the end (ListOffsets LATEST: the high watermark / LSO) of the given partitions."""
        await self._seek_spec(tps or tuple(self._positions), LATEST)

    async def _seek_spec(self, tps: Iterable[TopicPartition], spec: int) -> None:
        tps = list(tps)
        for tp in tps:
            self._check(tp)
        offsets = await list_offsets(self.cluster, {tp: spec for tp in tps}, self.isolation_level)
        for tp, o in offsets.items():
            self._positions[tp] = o.offset
            self._buffer.pop(tp, None)

    async def position(self, tp: TopicPartition) -> int:
        """Offset of the next record poll would return for ``tp`` (resolving a reset if needed)."""
        self._check(tp)
        await self._reset_missing()
        buffered = self._buffer.get(tp)
        if buffered:
            return buffered[0].offset
        pos = self._positions[tp]
        assert pos is not None
        return pos

    def consumed_positions(self) -> dict[TopicPartition, int]:
        """Next offset poll would hand out, per assigned partition that has a position (what a group commits)."""
        out: dict[TopicPartition, int] = {}
        for tp, pos in self._positions.items():
            buffered = self._buffer.get(tp)
            if buffered:
                out[tp] = buffered[0].offset
            elif pos is not None:
                out[tp] = pos
        return out

    async def _reset_missing(self) -> None:
        missing = [tp for tp, pos in self._positions.items() if pos is None]
        if not missing:
            return
        spec = _RESETS[self.auto_offset_reset]
        if spec is None:
            err = Errors.NoOffsetForPartitionError(f"no position and auto_offset_reset=none: {sorted(missing)}")
            err.partitions = set(missing)  # type: ignore[attr-defined]
            raise err
        offsets = await list_offsets(self.cluster, {tp: spec for tp in missing}, self.isolation_level)
        for tp, o in offsets.items():
            self._positions[tp] = o.offset

    # -- fetching ------------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from assigned partitions: fetches until some arrive or ``timeout_ms`` passes.

        Each Fetch waits at most ``fetch_max_wait_ms`` at the broker, so poll returns about
        ``max(timeout_ms, fetch_max_wait_ms)`` after being called when nothing arrives.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        self._claims = {}
        self.poll_positions = {}
        while True:
            if any(self._buffer.values()):
                return self._vouch(self._drain(max_records))
            if not self._positions:
                await asyncio.sleep(max(0.0, min(0.05, deadline - loop.time())))
            else:
                await self._reset_missing()
                await self._fetch_once()
                if any(self._buffer.values()):
                    return self._vouch(self._drain(max_records))
            if loop.time() >= deadline:
                return self._vouch({})

    def _vouch(self, out: dict[TopicPartition, list[ConsumerRecord]]) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Set :attr:`poll_positions` from this poll's answers and what it returns; returns ``out``."""
        self.poll_positions = {
            tp: pos for tp, (pos, had) in self._claims.items()
            if (bool(out.get(tp)) if had else not self._buffer.get(tp) and self._positions.get(tp) == pos)
        }
        return out

    def history_positions(self) -> dict[str, int]:
        """:attr:`poll_positions` as the history contract's poll ``positions``: ``{"topic/partition": offset}``."""
        return {f"{tp.topic}/{tp.partition}": pos for tp, pos in self.poll_positions.items()}

    def _drain(self, max_records: int | None) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records
        for tp in list(self._buffer):
            recs = self._buffer[tp]
            if not recs:
                continue
            take = recs if left is None else recs[:left]
            out[tp] = take
            self._buffer[tp] = recs[len(take) :]
            if left is not None:
                left -= len(take)
                if left <= 0:
                    break
        return out

    async def _fetch_once(self) -> None:
        wanted = [tp for tp, pos in self._positions.items() if pos is not None and not self._buffer.get(tp)]
        if any(self.cluster.leader_for(tp) is None for tp in wanted):
            await self.cluster.refresh_metadata({tp.topic for tp in wanted})
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = self.cluster.leader_for(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            await asyncio.sleep(0.05)
            return
        results = await asyncio.gather(
            *(self._fetch_from(node, tps) for node, tps in by_leader.items()), return_exceptions=True
        )
        refresh = False
        for r in results:
            if isinstance(r, Errors.OffsetOutOfRangeError):
                raise r
            if isinstance(r, (OSError, TimeoutError, Errors.KafkaConnectionError)):
                refresh = True
            elif isinstance(r, BaseException):
                raise r
            elif r:
                refresh = True
        if refresh:
            with contextlib.suppress(Exception):
                await self.cluster.refresh_metadata({tp.topic for tp in wanted})
            await asyncio.sleep(0.05)

    def build_fetch_request(self, version: int, tps: list[TopicPartition]) -> FetchRequest:
        """The FetchRequest this consumer sends for ``tps`` at their positions (public so checks can reuse it)."""
        topics: dict[str, list] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(
                FetchRequest.FetchTopic.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=self._positions[tp],
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=self.max_partition_fetch_bytes,
                )
            )
        fetch_topics = []
        for name, parts in topics.items():
            kw: dict[str, object] = {"topic": name, "partitions": parts}
            if version >= 13:
                kw["topic_id"] = self.cluster.topic_id(name)
            fetch_topics.append(FetchRequest.FetchTopic(**kw))
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=fetch_topics,
            forgotten_topics_data=[],
            rack_id="",
        )

    async def _fetch_from(self, node: int, tps: list[TopicPartition]) -> bool:
        """One Fetch to one leader; returns True if metadata should be refreshed."""
        conn = await self.cluster.connection(node)
        version = self.fetch_version if self.fetch_version is not None else conn.versions.get(FETCH)
        if version is None:
            raise Errors.UnsupportedVersionError("Fetch")
        sent_positions = {tp: self._positions[tp] for tp in tps}
        req = self.build_fetch_request(version, tps)
        resp = await conn.request(req, version, self.request_timeout + self.fetch_max_wait_ms / 1000)
        self.fetch_responses.append(resp)
        del self.fetch_responses[:-100]
        body = resp.body
        if getattr(body, "error_code", 0):
            err = Errors.for_code(body.error_code)
            if err.invalid_metadata or err.retriable:
                return True
            raise err("Fetch")
        refresh = False
        out_of_range: dict[TopicPartition, int] = {}
        answered: dict[TopicPartition, tuple[int, bool]] = {}
        for t in body.responses:
            name = t.topic if version < 13 else self.cluster.topic_name_for_id(t.topic_id)
            if name is None:
                refresh = True
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp not in self._positions or self._positions[tp] != sent_positions.get(tp):
                    continue  # reassigned or sought meanwhile: drop
                code = p.error_code
                if code == Errors.OffsetOutOfRangeError.errno:
                    out_of_range[tp] = sent_positions[tp]
                    continue
                if code:
                    err = Errors.for_code(code)
                    if err.invalid_metadata or err.retriable:
                        refresh = True
                        continue
                    raise err(f"Fetch {tp}")
                self.high_watermarks[tp] = p.high_watermark
                if getattr(p, "log_start_offset", -1) >= 0:
                    self.log_start_offsets[tp] = p.log_start_offset
                aborted = None
                if self.isolation_level == 1:
                    aborted = [(a.producer_id, a.first_offset) for a in (getattr(p, "aborted_transactions", None)
                                                                          or [])]
                    if getattr(p, "last_stable_offset", -1) >= 0:
                        self.last_stable_offsets[tp] = p.last_stable_offset
                records, nxt = decode_records(tp, p.records, sent_positions[tp], aborted)
                answered[tp] = (sent_positions[tp], bool(records))
                self._positions[tp] = nxt
                if records:
                    self._buffer.setdefault(tp, []).extend(records)
        any_records = any(had for _pos, had in answered.values())
        for tp, claim in answered.items():
            if claim[1] or not any_records:  # an empty answer vouches only in a response with no records at all
                self._claims[tp] = claim
        if out_of_range:
            if self.auto_offset_reset == "none":
                err = Errors.OffsetOutOfRangeError(f"out of range, auto_offset_reset=none: {out_of_range}")
                err.partitions = out_of_range  # type: ignore[attr-defined]
                raise err
            spec = _RESETS[self.auto_offset_reset]
            offsets = await list_offsets(self.cluster, {tp: spec for tp in out_of_range}, self.isolation_level)
            for tp, o in offsets.items():
                if self._positions.get(tp) == out_of_range[tp]:
                    self._positions[tp] = o.offset
        return refresh
