"""The one write path (ReplicaManager.append_records -> Partition.append_as_leader) on a real 3-broker cluster.

Two of three brokers are stopped (SIGSTOP) until the third leads every partition alone (ISR = [it], below
min.insync.replicas = 2). Then each origin that appends as leader is asked to write, over the wire:
- CLIENT, acks=all (Produce): NOT_ENOUGH_REPLICAS before the append (nothing written); acks=1 is not checked.
- COORDINATOR, acks=all, transaction markers (WriteTxnMarkers): NOT_ENOUGH_REPLICAS before the append, as Kafka's
  handleWriteTxnMarkersRequest appends with requiredAcks -1 (before: the marker was appended and the request
  answered REQUEST_TIMED_OUT after 30 s).
- COORDINATOR, acks=all, transaction state (InitProducerId's write to __transaction_state): NOT_ENOUGH_REPLICAS,
  answered COORDINATOR_NOT_AVAILABLE (TransactionStateManager.appendTransactionToLog).
- COORDINATOR, acks=1, group state (OffsetCommit's write to __consumer_offsets, CoordinatorPartitionWriter): no min
  ISR check; the write waits for the HW, which stays below min ISR (KAFKA-15583), until offsets.commit.timeout.ms:
  REQUEST_TIMED_OUT, answered COORDINATOR_NOT_AVAILABLE (CoordinatorOperationExceptionHelper).
"""
from __future__ import annotations

import asyncio
import time

from kafka import errors as E
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, WriteTxnMarkersRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kct_cluster_helpers import create_topic, partition_state, wait_for

from reference_broker.client.protocol import Connection

TOPIC = "w"


def batch(values: list[bytes]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
    return bytes(b.build())


async def _find(c: Connection, key: str, key_type: int) -> int:
    r = await c.request(FindCoordinatorRequest[3](key=key, key_type=key_type), timeout=30)
    return r.body.error_code


async def _produce(c: Connection, acks: int) -> tuple[int, int]:
    T = ProduceRequest.TopicProduceData
    r = await c.request(ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=2000, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=batch([b"x"]))])]), timeout=30)
    p = r.body.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


async def _marker(c: Connection) -> int:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    r = await c.request(WriteTxnMarkersRequest[1](markers=[M(
        producer_id=4242, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[M.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])]), timeout=60)
    return r.body.markers[0].topics[0].partitions[0].error_code


async def _init_producer_id(c: Connection, txn_id: str) -> int:
    r = await c.request(InitProducerIdRequest[3](transactional_id=txn_id, transaction_timeout_ms=60_000,
                                                 producer_id=-1, producer_epoch=-1), timeout=30)
    return r.body.error_code


async def _commit(c: Connection, group: str) -> int:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, topics=[T(name=TOPIC, partitions=[
                                     T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata="")])])
    r = await c.request(req, timeout=30)
    return r.body.topics[0].partitions[0].error_code


def test_min_insync_replicas_before_the_append_for_every_origin(make_cluster) -> None:
    cluster = make_cluster(**{"min.insync.replicas": "2", "offsets.topic.num.partitions": "1",
                              "transaction.state.log.num.partitions": "1", "offsets.commit.timeout.ms": "1500"})
    create_topic(cluster.bootstrap, TOPIC, 1, 3)
    leader, _, _ = partition_state(cluster.bootstrap, TOPIC)

    async def setup() -> None:
        c = await Connection.connect("127.0.0.1", cluster.ports[leader])
        try:
            await c.api_versions()
            for key, key_type in (("g", 0), ("tx", 1)):      # creates __consumer_offsets / __transaction_state
                await asyncio.wait_for(_until_found(c, key, key_type), 60)
        finally:
            await c.close()

    async def _until_found(c: Connection, key: str, key_type: int) -> None:
        while await _find(c, key, key_type):
            await asyncio.sleep(0.2)

    asyncio.run(setup())
    others = [b for b in cluster.broker_ids if b != leader]
    alone = f"127.0.0.1:{cluster.ports[leader]}"
    for b in others:
        cluster.pause(b)
    try:
        for topic in (TOPIC, "__consumer_offsets", "__transaction_state"):
            wait_for(lambda t=topic: partition_state(alone, t), lambda s: s[0] == leader and s[2] == [leader], 60,
                     f"{topic}-0 led by {leader} alone")

        async def writes() -> dict[str, object]:
            c = await Connection.connect("127.0.0.1", cluster.ports[leader])
            try:
                await c.api_versions()
                out: dict[str, object] = {}
                out["produce_all"] = await _produce(c, -1)
                out["produce_one"] = await _produce(c, 1)
                out["marker"] = await _marker(c)
                out["produce_after_marker"] = await _produce(c, 1)
                out["init_pid"] = await _init_producer_id(c, "tx")
                t0 = time.monotonic()
                out["commit"] = await _commit(c, "g")
                out["commit_s"] = time.monotonic() - t0
                return out
            finally:
                await c.close()

        out = asyncio.run(writes())
    finally:
        for b in others:
            cluster.resume(b)
    # CLIENT, acks=all: refused before the append (the acks=1 batch that follows takes offset 0).
    assert out["produce_all"][0] == E.NotEnoughReplicasError.errno, out
    assert out["produce_one"] == (0, 0), out
    # COORDINATOR, acks=all, marker: refused before the append (the next batch takes offset 1, not 2).
    assert out["marker"] == E.NotEnoughReplicasError.errno, out
    assert out["produce_after_marker"] == (0, 1), out
    # COORDINATOR, acks=all, transaction state: NOT_ENOUGH_REPLICAS answered COORDINATOR_NOT_AVAILABLE.
    assert out["init_pid"] == E.CoordinatorNotAvailableError.errno, out
    # COORDINATOR, acks=1, group state: appended, then the HW wait timed out (REQUEST_TIMED_OUT ->
    # COORDINATOR_NOT_AVAILABLE) after offsets.commit.timeout.ms, not refused at once.
    assert out["commit"] == E.CoordinatorNotAvailableError.errno, out
    assert out["commit_s"] >= 1.2, out
