"""The metadata quorum on real sockets: KafkaRaftClient (reference_broker/raft) driven by an asyncio loop, its log
on disk, its RPCs in Kafka's wire format on the CONTROLLER listener (KIP-595).

- ``KafkaMetadataLog``: the RaftLog of the metadata partition ``__cluster_metadata-0`` over the project's
  ``log.base.Log`` (FileLog with a data dir, MemoryLog without). One entry = one v2 record batch of one JSON record,
  its partition leader epoch the entry's epoch (Kafka's KafkaMetadataLog over UnifiedLog). ``flush`` fsyncs: the
  core calls it before the leader counts its own end offset and before a voter's next fetch acknowledges entries.
- Wire conversion: Vote (52, v2 with PreVote), BeginQuorumEpoch (53), EndQuorumEpoch (54) from our schemas
  (controller/messages.py), and the Raft Fetch as Kafka's Fetch v12 on ``__cluster_metadata`` (CurrentLeaderEpoch,
  LastFetchedEpoch, DivergingEpoch, CurrentLeader, the high watermark).
- ``RaftDriver``: one per controller process. Polls the client at the deadline it names (time from the Clock, jitter
  from the seeded RNG), sends each outbound request to its voter over its own connection (one for Fetch, one for the
  rest: a parked Fetch must not hold a Vote back) and feeds the answer back; inbound requests from the controller's
  server are handed to the client and answered when the client answers (a parked Fetch waits, as in Kafka's
  purgatory). A lost connection or a timeout drops the message: the client's own timers resend.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.record.memory_records import MemoryRecords

from ..client.protocol import Connection
from ..clock import Clock
from ..log.base import Log
from ..metadata.records import METADATA_TOPIC, encode_batch
from ..raft import KafkaRaftClient, LogEntry, MemoryRaftLog, QuorumStateStore, RaftConfig, RaftListener
from ..raft import messages as M
from . import messages as W

log = logging.getLogger("reference_broker.controller.quorum")

VOTE_VERSION = 2
QUORUM_EPOCH_VERSION = 0
FETCH_VERSION = 12


def parse_voters(spec: str) -> dict[int, tuple[str, int]]:
    """Kafka's controller.quorum.voters: ``id@host:port,...`` -> {id: (host, port)}."""
    out: dict[int, tuple[str, int]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        ident, at, addr = part.partition("@")
        host, colon, port = addr.rpartition(":")
        if not at or not colon or not ident.strip().isdigit() or not port.isdigit():
            raise ValueError(f"controller.quorum.voters: expected ID@HOST:PORT, got {part!r}")
        out[int(ident)] = (host, int(port))
    return out


def raft_config(config: Any, node_id: int, voters: tuple[int, ...], faults: frozenset[str] = frozenset()) -> RaftConfig:
    """RaftConfig from the broker config's controller.quorum.* settings (Kafka's names and defaults)."""
    return RaftConfig(node_id=node_id, voters=voters,
                      election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                      election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
                      fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                      request_timeout_ms=config["controller.quorum.request.timeout.ms"],
                      retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
                      append_linger_ms=config["controller.quorum.append.linger.ms"],
                      faults=faults)


# ---------------------------------------------------------------------------------------------- the durable log

def _entry_record(data: Any, control: bool) -> dict:
    """The JSON record an entry holds; the core's control entry (LeaderChange) becomes Kafka's LeaderChangeMessage."""
    if control and isinstance(data, tuple):
        return {"type": "leader_change", "leader_id": data[1], "voters": list(data[2])}
    return data


class KafkaMetadataLog(MemoryRaftLog):
    """The metadata partition's RaftLog, kept on ``base`` (durable when it is a FileLog) and mirrored in memory for
    the core's reads and epoch lookups (the metadata log is small; KIP-630 snapshots would bound it: GAPS.md)."""

    def __init__(self, base: Log, clock: Clock) -> None:
        super().__init__()
        self.base = base
        self.clock = clock
        if base.log_start_offset != 0:
            raise ValueError("the metadata log starts past offset 0 (snapshots are not implemented)")
        off = 0
        end = base.log_end_offset
        while off < end:
            data = base.read(off, 1 << 20, end, True).data
            if not data:
                break
            entries = decode_entries(bytes(data))
            super().append_as_follower(entries)
            off = entries[-1].offset + 1

    def _write(self, entry: LogEntry) -> None:
        self.base.append(encode_batch([entry.data], self.clock.wall_ms()), entry.epoch)

    def append_as_leader(self, epoch: int, data: Any, control: bool = False) -> int:
        off = super().append_as_leader(epoch, _entry_record(data, control), control)
        self._write(self.entries[off])
        return off

    def append_as_follower(self, entries: tuple[LogEntry, ...]) -> None:
        super().append_as_follower(entries)
        for e in entries:
            self._write(e)

    def truncate_to(self, offset: int) -> None:
        if offset < self.end_offset():
            super().truncate_to(offset)
            self.base.truncate_to(offset)

    def flush(self) -> None:
        self.base.flush()

    def read_bytes(self, start: int, end: int, max_bytes: int = 8 << 20) -> bytes:
        """The stored batches of [start, end): what a Fetch answer carries."""
        if start >= end:
            return b""
        return bytes(self.base.read(start, max_bytes, end, True).data)


def decode_entries(data: bytes) -> tuple[LogEntry, ...]:
    """LogEntries from stored or fetched batches: offset and epoch from the batch header, data the JSON record."""
    out = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        for rec in batch:
            doc = json.loads(rec.value)
            out.append(LogEntry(rec.offset, batch.leader_epoch, doc, doc.get("type") == "leader_change"))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- wire conversion

def _leader(v: int | None) -> int:
    return -1 if v is None else v


def _leader_back(v: int) -> int | None:
    return None if v < 0 else v


def request_to_wire(body: M.Body, cluster_id: str, dst: int, max_wait_ms: int) -> tuple[Any, int]:
    """(Kafka request, version) for an outbound Raft request."""
    if isinstance(body, M.VoteRequest):
        T = W.VoteRequest.TopicData
        return W.VoteRequest(cluster_id=cluster_id, voter_id=dst, topics=[T(topic_name=METADATA_TOPIC, partitions=[
            T.PartitionData(partition_index=0, replica_epoch=body.candidate_epoch, replica_id=body.candidate_id,
                            last_offset_epoch=body.last_offset_epoch, last_offset=body.last_offset,
                            pre_vote=body.pre_vote)])]), VOTE_VERSION
    if isinstance(body, M.BeginQuorumEpochRequest):
        T = W.BeginQuorumEpochRequest.TopicData
        return W.BeginQuorumEpochRequest(cluster_id=cluster_id, topics=[T(topic_name=METADATA_TOPIC, partitions=[
            T.PartitionData(partition_index=0, leader_id=body.leader_id, leader_epoch=body.leader_epoch)])]), \
            QUORUM_EPOCH_VERSION
    if isinstance(body, M.EndQuorumEpochRequest):
        T = W.EndQuorumEpochRequest.TopicData
        return W.EndQuorumEpochRequest(cluster_id=cluster_id, topics=[T(topic_name=METADATA_TOPIC, partitions=[
            T.PartitionData(partition_index=0, leader_id=body.leader_id, leader_epoch=body.leader_epoch,
                            preferred_successors=list(body.preferred_successors))])]), QUORUM_EPOCH_VERSION
    if isinstance(body, M.FetchRequest):
        T = FetchRequest.FetchTopic
        return FetchRequest(replica_id=body.replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=8 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1, cluster_id=cluster_id,
                            topics=[T(topic=METADATA_TOPIC, partitions=[T.FetchPartition(
                                partition=0, current_leader_epoch=body.current_leader_epoch,
                                fetch_offset=body.fetch_offset, last_fetched_epoch=body.last_fetched_epoch,
                                log_start_offset=-1, partition_max_bytes=8 << 20)])],
                            forgotten_topics_data=[], rack_id=""), FETCH_VERSION
    raise TypeError(f"not a Raft request: {body!r}")


def response_from_wire(req: M.Body, resp: Any) -> M.Body:
    """The Raft response body for the Kafka answer ``resp`` to ``req``."""
    if isinstance(req, M.FetchRequest):
        if resp.error_code:
            return M.FetchResponse(resp.error_code, -1, None)
        p = resp.responses[0].partitions[0]
        div = p.diverging_epoch
        diverging = (div.epoch, div.end_offset) if div is not None and div.epoch >= 0 else None
        cur = p.current_leader
        return M.FetchResponse(p.error_code, cur.leader_epoch, _leader_back(cur.leader_id),
                               high_watermark=p.high_watermark,
                               records=decode_entries(bytes(p.records)) if p.records else (),
                               diverging_epoch=diverging)
    if resp.error_code:
        err, epoch, leader = resp.error_code, -1, None
        granted = False
    else:
        p = resp.topics[0].partitions[0]
        err, epoch, leader = p.error_code, p.leader_epoch, _leader_back(p.leader_id)
        granted = getattr(p, "vote_granted", False)
    if isinstance(req, M.VoteRequest):
        return M.VoteResponse(err, epoch, leader, granted, req.pre_vote)
    if isinstance(req, M.BeginQuorumEpochRequest):
        return M.BeginQuorumEpochResponse(err, epoch, leader)
    if isinstance(req, M.EndQuorumEpochRequest):
        return M.EndQuorumEpochResponse(err, epoch, leader)
    raise TypeError(f"not a Raft request: {req!r}")


def quorum_response_to_wire(cls: Any, body: Any, **extra: Any) -> Any:
    """A Vote / BeginQuorumEpoch / EndQuorumEpoch answer in Kafka's wire format."""
    T = cls.TopicData
    return cls(error_code=0, topics=[T(topic_name=METADATA_TOPIC, partitions=[T.PartitionData(
        partition_index=0, error_code=body.error, leader_id=_leader(body.leader_id),
        leader_epoch=body.leader_epoch, **extra)])])


def fetch_response_to_wire(body: M.FetchResponse, metadata_log: KafkaMetadataLog) -> Any:
    """The Raft Fetch answer as Kafka's FetchResponse v12 (records are the stored batches)."""
    TR = FetchResponse.FetchableTopicResponse
    P = TR.PartitionData
    records = b""
    if body.records:
        records = metadata_log.read_bytes(body.records[0].offset, body.records[-1].offset + 1)
    div = P.EpochEndOffset(epoch=body.diverging_epoch[0], end_offset=body.diverging_epoch[1]) \
        if body.diverging_epoch is not None else P.EpochEndOffset(epoch=-1, end_offset=-1)
    part = P(partition_index=0, error_code=body.error, high_watermark=body.high_watermark,
             last_stable_offset=body.high_watermark, log_start_offset=0, aborted_transactions=None,
             preferred_read_replica=-1, records=records, diverging_epoch=div,
             current_leader=P.LeaderIdAndEpoch(leader_id=_leader(body.leader_id), leader_epoch=body.leader_epoch))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[TR(topic=METADATA_TOPIC, partitions=[part])])


# ---------------------------------------------------------------------------------------------- the driver

_RESPONSES = (M.VoteResponse, M.BeginQuorumEpochResponse, M.EndQuorumEpochResponse, M.FetchResponse)


@dataclass
class _Peer:
    address: tuple[str, int]
    conns: dict[str, Connection | None]


class RaftDriver:
    """Runs one KafkaRaftClient on the event loop (Kafka's KafkaRaftClientDriver + NetworkChannel)."""

    def __init__(self, config: RaftConfig, voters: dict[int, tuple[str, int]], metadata_log: KafkaMetadataLog,
                 store: QuorumStateStore, rng: random.Random, clock: Clock, listener: RaftListener,
                 cluster_id: str) -> None:
        self.config = config
        self.id = config.node_id
        self.voters = voters
        self.log = metadata_log
        self.clock = clock
        self.cluster_id = cluster_id
        self.client = KafkaRaftClient(config, metadata_log, store, rng, self.now_ms(), listener)
        self._peers = {v: _Peer(addr, {"fetch": None, "quorum": None}) for v, addr in voters.items() if v != self.id}
        self._inbound: dict[tuple[int, int], asyncio.Future] = {}
        self._in_corr = itertools.count(1 << 30)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._sends: set[asyncio.Task] = set()
        self._stopping = False
        self.on_poll: Callable[[], None] | None = None
        # replica -> (fetch offset, last fetch wall ms, last caught-up wall ms): DescribeQuorum's fields, as the
        # leader saw them (Kafka's LeaderState.ReplicaState); observers are the brokers fetching the metadata
        self.fetches: dict[int, tuple[int, int, int]] = {}

    def note_fetch(self, replica: int, offset: int) -> None:
        """A replica fetched from ``offset``: caught up when that is this log's end offset (KIP-836)."""
        now = self.clock.wall_ms()
        prev = self.fetches.get(replica, (-1, -1, -1))
        caught = now if offset >= self.log.end_offset() else prev[2]
        self.fetches[replica] = (offset, now, caught)

    def now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    # -- lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-{self.id}")

    async def stop(self, resign: bool = True) -> None:
        """Graceful: resign (EndQuorumEpoch to the voters, given a moment to go out), then stop."""
        if resign and self._task is not None:
            self._dispatch(self.client.resign(self.now_ms()))
            if self._sends:
                await asyncio.wait(list(self._sends), timeout=self.config.request_timeout_ms / 1000)
        self._stopping = True
        tasks = [t for t in [self._task, *self._sends] if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        for p in self._peers.values():
            for kind, c in p.conns.items():
                if c is not None:
                    p.conns[kind] = None
                    try:
                        await c.close()
                    except Exception:
                        pass

    async def _run(self) -> None:
        while not self._stopping:
            try:
                msgs, deadline = self.client.poll(self.now_ms())
            except Exception:
                log.exception("raft %d: poll failed", self.id)
                raise
            self._dispatch(msgs)
            if self.on_poll is not None:
                self.on_poll()
            self._wake.clear()
            delay = max(0.0, (deadline - self.now_ms()) / 1000)
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancellation stop() sends
                async with asyncio.timeout(min(delay, 1.0)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def wake(self) -> None:
        self._wake.set()

    # -- the leader's appends
    def next_offset(self) -> int:
        st = self.client.state
        return self.log.end_offset() + len(getattr(st, "accumulator", ()))

    def append(self, data: Any) -> int:
        off, msgs = self.client.append(data, self.now_ms())
        self._dispatch(msgs)
        self.wake()
        return off

    # -- messages
    def _dispatch(self, msgs: list[M.RaftMessage]) -> None:
        for m in msgs:
            if isinstance(m.body, _RESPONSES):
                fut = self._inbound.pop((m.dst, m.correlation_id), None)
                if fut is not None and not fut.done():
                    fut.set_result(m.body)
            elif m.dst in self._peers and not self._stopping:
                t = asyncio.get_running_loop().create_task(self._send(m))
                self._sends.add(t)
                t.add_done_callback(self._sends.discard)

    async def _send(self, m: M.RaftMessage) -> None:
        peer = self._peers[m.dst]
        kind = "fetch" if isinstance(m.body, M.FetchRequest) else "quorum"
        wire, version = request_to_wire(m.body, self.cluster_id, m.dst, self.config.fetch_max_wait_ms)
        timeout = self.config.request_timeout_ms / 1000
        if kind == "fetch":
            timeout += self.config.fetch_max_wait_ms / 1000
        try:
            conn = peer.conns[kind]
            if conn is None or conn.closed:
                conn = await Connection.connect(*peer.address, client_id=f"raft-{self.id}-{kind}", timeout=timeout)
                peer.conns[kind] = conn
            resp = (await conn.request(wire, version, timeout=timeout)).body
        except (OSError, TimeoutError, Exception) as e:  # noqa: BLE001 - any failure drops the message
            log.debug("raft %d -> %d: %s failed: %s", self.id, m.dst, type(m.body).__name__, e)
            c, peer.conns[kind] = peer.conns[kind], None
            if c is not None:
                try:
                    await c.close()
                except Exception:
                    pass
            return
        if self._stopping:
            return
        body = response_from_wire(m.body, resp)
        self._dispatch(self.client.handle(M.RaftMessage(m.dst, self.id, m.correlation_id, body), self.now_ms()))
        self.wake()

    async def handle_inbound(self, src: int, body: M.Body, timeout_s: float) -> M.Body | None:
        """An inbound Raft request from voter or observer ``src``: the client's answer, or None if it gave none in
        ``timeout_s`` (e.g. a parked Fetch superseded by a newer one from the same replica)."""
        if self._stopping:
            return None
        corr = next(self._in_corr)
        fut = asyncio.get_running_loop().create_future()
        self._inbound[(src, corr)] = fut
        try:
            self._dispatch(self.client.handle(M.RaftMessage(src, self.id, corr, body), self.now_ms()))
            self.wake()
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            return None
        finally:
            self._inbound.pop((src, corr), None)
