"""The transaction marker channel: Apache Kafka's TransactionMarkerChannelManager, in small.

The coordinator hands it one transaction's markers and awaits their completion; the channel keeps a queue of
pending markers per destination broker (each partition's current leader), sends each queue as one WriteTxnMarkers
v2 request (markers of several transactions together, each carrying its transaction version, KIP-890), and puts a
marker whose leader is unknown, unreachable or answered a retriable error on the retry queue, re-routed to the
partition's leader of the moment after a backoff. A transaction's completion resolves once each of its partitions
took its marker (or no longer exists: UNKNOWN_TOPIC_OR_PARTITION, as Kafka drops such markers), never with an
error: like Kafka, the channel retries until the coordinator abandons the transaction (it lost the partition).

Narrow inputs: how to find a partition's leader, this broker's id and its local append (a local leader takes its
markers in-process, as Kafka's broker answers its own requests), and a broker-to-broker request function.
Threading rule: the broker's event loop.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from kafka import errors as E
from kafka.protocol.producer import WriteTxnMarkersRequest

from .clock import Clock

log = logging.getLogger("reference_broker.txn")

TP = tuple[str, int]
MARKER_REQUEST_TIMEOUT_S = 30.0     # Kafka: request.timeout.ms for the marker channel
LOCAL_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = (0.05, 1.0)       # first and largest pause before a retry (doubling)


class Marker(NamedTuple):
    """One WriteTxnMarkers entry for one partition; ``transaction_version`` 2 for a TV2 transaction (the leader
    checks the marker's epoch against the producer's with TV2's rules)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int = 0


LeaderOf = Callable[[str, int], int | None]            # None: no such partition; -1: no leader now
LocalWrite = Callable[[list[Marker], float], Awaitable[dict[TP, int]]]
BrokerRequest = Callable[[int, Any, int, float], Awaitable[Any]]    # (broker, request, version, timeout)

DONE = (E.NoError.errno, E.UnknownTopicOrPartitionError.errno)


class _Pending:
    """One transaction's markers still to be written, and the future its coordinator awaits."""

    def __init__(self, key: str, markers: list[Marker]) -> None:
        self.key = key
        self.todo = {(m.topic, m.partition): m for m in markers}
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.abandoned = False

    def answered(self, tp: TP, error: int) -> bool:
        """True when ``tp`` is finished (the future resolves once all are)."""
        if error not in DONE or self.abandoned:
            return False
        self.todo.pop(tp, None)
        if not self.todo and not self.done.done():
            self.done.set_result(None)
        return True


class TxnMarkerChannel:
    def __init__(self, node_id: int, clock: Clock, leader_of: LeaderOf, write_local: LocalWrite,
                 request: BrokerRequest) -> None:
        self.node_id = node_id
        self.clock = clock
        self.leader_of = leader_of
        self.write_local = write_local
        self.request = request
        self.queues: dict[int, list[tuple[_Pending, Marker]]] = {}     # destination broker -> markers to send
        self.retry: list[tuple[_Pending, Marker]] = []
        self.pending: dict[str, _Pending] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._retry_task: asyncio.Task | None = None
        self._backoff = RETRY_BACKOFF_S[0]

    async def write(self, key: str, markers: list[Marker]) -> None:
        """addTxnMarkersToSend: queue ``markers`` (one transaction, ``key`` its transactional id) and return once
        every partition took its marker, or once ``abandon(key)`` dropped them."""
        p = self.pending[key] = _Pending(key, markers)
        if not markers:
            return
        for m in markers:
            self._route(p, m)
        try:
            await asyncio.shield(p.done)
        finally:
            p.abandoned = True
            if self.pending.get(key) is p:
                del self.pending[key]

    def abandon(self, key: str) -> None:
        """removeMarkersForTxnTopicPartition: the coordinator lost the transaction; its markers are dropped."""
        p = self.pending.pop(key, None)
        if p is not None:
            p.abandoned = True
            if not p.done.done():
                p.done.set_result(None)       # the coordinator sees it no longer owns the transaction

    async def close(self) -> None:
        tasks = [*self._senders.values(), *([self._retry_task] if self._retry_task else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for p in list(self.pending.values()):
            self.abandon(p.key)

    # -- queues ------------------------------------------------------------------------------------------------

    def _route(self, p: _Pending, m: Marker) -> None:
        """To the queue of the partition's current leader, or to the retry queue while it has none."""
        if p.abandoned:
            return
        leader = self.leader_of(m.topic, m.partition)
        if leader is None:
            p.answered((m.topic, m.partition), E.UnknownTopicOrPartitionError.errno)
        elif leader < 0:
            self._to_retry(p, m)
        else:
            self.queues.setdefault(leader, []).append((p, m))
            task = self._senders.get(leader)
            if task is None or task.done():
                self._senders[leader] = asyncio.get_running_loop().create_task(self._drain(leader))

    def _to_retry(self, p: _Pending, m: Marker) -> None:
        self.retry.append((p, m))
        if self._retry_task is None or self._retry_task.done():
            self._retry_task = asyncio.get_running_loop().create_task(self._retry_later())

    async def _retry_later(self) -> None:
        """Re-route the retry queue after a backoff that doubles while retries keep failing."""
        while self.retry:
            await self.clock.sleep(self._backoff)
            self._backoff = min(self._backoff * 2, RETRY_BACKOFF_S[1])
            batch, self.retry = self.retry, []
            for p, m in batch:
                self._route(p, m)

    async def _drain(self, broker: int) -> None:
        """Send ``broker``'s queue, one request at a time, until it is empty."""
        while self.queues.get(broker):
            batch = [(p, m) for p, m in self.queues.pop(broker) if not p.abandoned]
            if not batch:
                continue
            answers = await self._send(broker, [m for _, m in batch])
            ok = True
            for p, m in batch:
                if not p.answered((m.topic, m.partition), answers.get((m.topic, m.partition), -1)):
                    ok = False
                    if not p.abandoned:
                        self._to_retry(p, m)
            if ok:
                self._backoff = RETRY_BACKOFF_S[0]

    async def _send(self, broker: int, markers: list[Marker]) -> dict[TP, int]:
        """WriteTxnMarkers v2 to ``broker`` (in-process when it is this one): its answer per partition, {} when the
        request failed."""
        try:
            if broker == self.node_id:
                return await self.write_local(markers, LOCAL_TIMEOUT_S)
            M = WriteTxnMarkersRequest.WritableTxnMarker
            groups: dict[tuple, list[Marker]] = {}
            for m in markers:
                groups.setdefault((m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch,
                                   m.transaction_version), []).append(m)
            req = WriteTxnMarkersRequest[2](markers=[
                M(producer_id=pid, producer_epoch=ep, transaction_result=commit, coordinator_epoch=ce,
                  transaction_version=tv,
                  topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=[m.partition for m in g if m.topic == t])
                          for t in sorted({m.topic for m in g})])
                for (pid, ep, commit, ce, tv), g in groups.items()])
            req._header = None
            resp = await self.request(broker, req, 2, MARKER_REQUEST_TIMEOUT_S)
        except (OSError, TimeoutError, E.KafkaError) as e:
            log.info("broker %d: WriteTxnMarkers to broker %d failed: %s", self.node_id, broker, e)
            return {}
        out: dict[TP, int] = {}
        for mr in resp.markers:
            for tr in mr.topics:
                for pr in tr.partitions:
                    out[(tr.name, pr.partition_index)] = pr.error_code
        return out
