"""ReplicaManager.append_records and the coordinators' partition writer, in-process on the real classes (a
ReplicaManager fed metadata records, real Partitions and memory logs; nothing replaced by a stand-in).

- append_records: NOT_ENOUGH_REPLICAS before the append for acks=all below min ISR, for origin CLIENT and
  COORDINATOR alike (Partition.appendRecordsToLeader checks requiredAcks, not the origin); acks=1 is not checked;
  UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER / INVALID_REQUIRED_ACKS / INVALID_TOPIC_EXCEPTION.
- The coordinator writer answers each log error as Kafka's coordinators do (CoordinatorOperationExceptionHelper for
  groups, TransactionStateManager.appendTransactionToLog for transactions): NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
  UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR; produced here
  by the broker's own code paths, not by feeding codes to the table.
- Ownership: the partition count of the topic in the metadata decides, the configured count before it exists.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka import errors as E
from kafka.record.default_records import DefaultRecordBatchBuilder

from reference_broker.clock import Clock
from reference_broker.config import BrokerConfig
from reference_broker.coordinator_writer import CoordinatorPartitionWriter
from reference_broker.faults import Faults
from reference_broker.log import batch as B
from reference_broker.metadata.image import Delta, MetadataImage
from reference_broker.offset_store import (
    GROUP,
    OFFSETS_TOPIC,
    TXN,
    AppendError,
    coordinator_error,
    partition_for,
)
from reference_broker.partition import AppendOrigin, MarkerAppend
from reference_broker.replica_manager import AppendEntry, ReplicaManager
from reference_broker.txn_coordinator import TXN_TOPIC

from ._wire import create_topic

ME = 1


def _batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    b.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[])
    return bytes(b.build())


class World:
    """One broker's ReplicaManager with topics applied from metadata records, as the node applies them."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.offset = 0

        async def alter_isr(p, isr):          # the controller's answer is not needed here: keep the ISR pending
            return E.RequestTimedOutError.errno, None

        self.rm = ReplicaManager(ME, BrokerConfig({"node.id": ME}), Clock(), Faults(), None, alter_isr)

    def _apply(self, rec: dict, delta: Delta) -> None:
        self.offset += 1
        self.image.apply(self.offset, rec, delta)

    def topic(self, name: str, partitions: list[tuple[int, list[int], list[int]]], internal: bool = False,
              min_isr: int = 1) -> None:
        """partitions: (leader, replicas, isr) each."""
        delta = Delta()
        tid = str(uuid.uuid4())
        self._apply({"type": "topic", "topic_id": tid, "name": name, "internal": internal,
                     "configs": {"min.insync.replicas": str(min_isr)}}, delta)
        for i, (leader, replicas, isr) in enumerate(partitions):
            self._apply({"type": "partition", "topic_id": tid, "partition": i, "replicas": replicas, "isr": isr,
                         "leader": leader, "leader_epoch": 0, "partition_epoch": 0}, delta)
        self.rm.apply_delta(self.image, delta)

    def move_leader(self, name: str, index: int, leader: int, replicas: list[int]) -> None:
        delta = Delta()
        t = self.image.topics[name]
        self._apply({"type": "partition_change", "topic_id": str(t.topic_id), "partition": index,
                     "replicas": replicas, "isr": replicas, "leader": leader, "leader_epoch": 1,
                     "partition_epoch": 1}, delta)
        self.rm.apply_delta(self.image, delta)


def _entry(topic: str, index: int = 0) -> AppendEntry:
    data = _batch()
    return AppendEntry(topic, index, data, B.parse_header(data))


def test_min_isr_is_checked_before_the_append_for_acks_all_whatever_the_origin() -> None:
    async def run() -> None:
        w = World()
        w.topic("t", [(ME, [ME, 2], [ME])], min_isr=2)          # ISR 1 < min ISR 2
        p = w.rm.get("t", 0)
        for origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
            r = w.rm.append_records([_entry("t")], -1, origin, 1.0).results[("t", 0)]
            assert r.error == E.NotEnoughReplicasError.errno, (origin, r)
            assert p.log.log_end_offset == 0, "nothing may be written before NOT_ENOUGH_REPLICAS"
        marker = AppendEntry("t", 0, marker=MarkerAppend(7, 0, 0, False))
        r = w.rm.append_records([marker], -1, AppendOrigin.COORDINATOR, 1.0).results[("t", 0)]
        assert r.error == E.NotEnoughReplicasError.errno and p.log.log_end_offset == 0, r
        # acks=1 (a client's acks=1, the group coordinator's writes): no min ISR check, appended at once.
        r = w.rm.append_records([_entry("t")], 1, AppendOrigin.COORDINATOR, 1.0).results[("t", 0)]
        assert (r.error, r.base_offset, r.end_offset) == (0, 0, 1)

    asyncio.run(run())


def test_append_records_refuses_what_it_may_not_write() -> None:
    async def run() -> None:
        w = World()
        w.topic("t", [(ME, [ME], [ME]), (2, [ME, 2], [ME, 2])])
        w.topic(OFFSETS_TOPIC, [(ME, [ME], [ME])], internal=True)
        res = w.rm.append_records([_entry("t", 1), _entry("t", 7), _entry("nope")], 1, AppendOrigin.CLIENT,
                                  1.0).results
        assert res[("t", 1)].error == E.NotLeaderForPartitionError.errno
        assert res[("t", 7)].error == E.UnknownTopicOrPartitionError.errno
        assert res[("nope", 0)].error == E.UnknownTopicOrPartitionError.errno
        assert w.rm.append_records([_entry("t")], 2, AppendOrigin.CLIENT, 1.0).results[("t", 0)].error == \
            E.InvalidRequiredAcksError.errno
        internal = w.rm.append_records([_entry(OFFSETS_TOPIC)], 1, AppendOrigin.CLIENT, 1.0).results
        assert internal[(OFFSETS_TOPIC, 0)].error == E.InvalidTopicError.errno
        coordinator = w.rm.append_records([_entry(OFFSETS_TOPIC)], 1, AppendOrigin.COORDINATOR, 1.0).results
        assert coordinator[(OFFSETS_TOPIC, 0)].error == 0

    asyncio.run(run())


@pytest.mark.parametrize("coordinator,topic", [(GROUP, OFFSETS_TOPIC), (TXN, TXN_TOPIC)])
def test_coordinator_writer_answers_log_errors_as_kafkas_coordinators(coordinator: str, topic: str) -> None:
    async def run() -> None:
        w = World()
        # 0: led here, ISR below min ISR; 1: led by broker 2; 2: led here, follower 2 in the ISR never fetches.
        w.topic(topic, [(ME, [ME, 2], [ME]), (2, [ME, 2], [ME, 2]), (ME, [ME, 2], [ME, 2])], internal=True,
                min_isr=2)
        wr = CoordinatorPartitionWriter(w.rm, topic, 50, coordinator)
        # NOT_ENOUGH_REPLICAS (acks=all, before the append) -> COORDINATOR_NOT_AVAILABLE
        assert await wr.write(0, _batch(), 1.0) == E.CoordinatorNotAvailableError.errno
        assert w.rm.get(topic, 0).log.log_end_offset == 0
        # NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR
        assert await wr.write(1, _batch(), 1.0) == E.NotCoordinatorError.errno
        with pytest.raises(AppendError) as e:
            wr.append(1, _batch())
        assert coordinator_error(e.value.code, coordinator) == E.NotCoordinatorError.errno
        # UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE
        assert await wr.write(9, _batch(), 1.0) == E.CoordinatorNotAvailableError.errno
        # REQUEST_TIMED_OUT (the HW waits for the silent follower) -> COORDINATOR_NOT_AVAILABLE
        assert await wr.write(2, _batch(), 0.2) == E.CoordinatorNotAvailableError.errno
        end = wr.append(2, _batch())                          # acks=1: written now, then the HW wait
        err = await wr.wait_committed(2, end, 0.2)
        assert (err, coordinator_error(err, coordinator)) == (E.RequestTimedOutError.errno,
                                                              E.CoordinatorNotAvailableError.errno)
        # NOT_LEADER_OR_FOLLOWER while waiting (leadership moved) -> NOT_COORDINATOR
        pending = asyncio.ensure_future(wr.write(2, _batch(), 5.0))
        await asyncio.sleep(0.05)
        w.move_leader(topic, 2, 2, [ME, 2])
        assert await pending == E.NotCoordinatorError.errno

    asyncio.run(run())


def test_the_two_coordinators_differ_only_where_kafka_does() -> None:
    """INVALID_FETCH_SIZE: the group coordinator answers UNKNOWN_SERVER_ERROR (handleOperationException lists it),
    the transaction coordinator passes it on (appendTransactionToLog's `case other => other`); so does every error
    neither lists, e.g. INVALID_PRODUCER_EPOCH from a fenced transactional offset commit."""
    fetch_size = E.InvalidFetchRequestError.errno
    assert coordinator_error(fetch_size, GROUP) == E.UnknownError.errno
    assert coordinator_error(fetch_size, TXN) == fetch_size
    for c in (GROUP, TXN):
        assert coordinator_error(E.InvalidProducerEpochError.errno, c) == E.InvalidProducerEpochError.errno
        assert coordinator_error(E.MessageSizeTooLargeError.errno, c) == E.UnknownError.errno
        assert coordinator_error(E.NotEnoughReplicasAfterAppendError.errno, c) == E.CoordinatorNotAvailableError.errno
        assert coordinator_error(E.KafkaStorageError.errno, c) == E.NotCoordinatorError.errno


def test_ownership_follows_the_topics_partition_count_in_the_metadata() -> None:
    async def run() -> None:
        w = World()
        wr = CoordinatorPartitionWriter(w.rm, OFFSETS_TOPIC, 5, GROUP)
        gid = next(g for g in (f"group-{i}" for i in range(100)) if partition_for(g, 5) != partition_for(g, 3))
        assert wr.partition_for(gid) == partition_for(gid, 5)             # before the topic exists: the config
        w.topic(OFFSETS_TOPIC, [(ME, [ME], [ME])] * 3, internal=True)
        assert wr.partition_for(gid) == partition_for(gid, 3)             # then the topic's own count

    asyncio.run(run())


def test_a_restart_with_another_offsets_partition_count_keeps_its_groups(tmp_path) -> None:
    """Kafka reads the offsets topic's partition count from its metadata (BrokerServer: numPartitions of
    __consumer_offsets, else offsets.topic.num.partitions): a broker restarted with another configured count keeps
    coordinating the groups of the topic that exists. Before, FindCoordinator used the topic's count and the
    coordinator the configured one: a group whose partitions differ got NOT_COORDINATOR for ever."""
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from fixtures.reference import ReferenceTarget
    from reference_broker.client.protocol import Connection

    gid = next(g for g in (f"group-{i}" for i in range(100)) if partition_for(g, 3) != partition_for(g, 5))
    data = tmp_path / "data"

    async def talk(port: int, commit: bool) -> tuple[int, int]:
        c = await Connection.connect("127.0.0.1", port)
        try:
            await c.api_versions()
            for _ in range(150):
                r = await c.request(FindCoordinatorRequest[3](key=gid, key_type=0), timeout=30)
                if r.body.error_code == 0:
                    break
                await asyncio.sleep(0.2)
            assert r.body.error_code == 0, r.body
            err = 0
            if commit:
                await create_topic(c, "t")
                T = OffsetCommitRequest.OffsetCommitRequestTopic
                r = await c.request(OffsetCommitRequest[8](
                    group_id=gid, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                        committed_metadata="")])]), timeout=30)
                err = r.body.topics[0].partitions[0].error_code
            F = OffsetFetchRequest.OffsetFetchRequestTopic
            for _ in range(50):          # a just-loaded coordinator may answer COORDINATOR_LOAD_IN_PROGRESS
                r = await c.request(OffsetFetchRequest[7](group_id=gid, topics=[F(name="t", partition_indexes=[0])],
                                                          require_stable=False), timeout=30)
                if r.body.error_code != E.CoordinatorLoadInProgressError.errno:
                    break
                await asyncio.sleep(0.2)
            fetched = r.body.error_code or r.body.topics[0].partitions[0].committed_offset
            return err, fetched
        finally:
            await c.close()

    for count, commit in (("3", True), ("5", False)):
        with ReferenceTarget({"data_dir": str(data), "kafka.offsets.topic.num.partitions": count,
                              "kafka.offsets.topic.replication.factor": "1"}, work_dir=tmp_path) as t:
            port = int(t.bootstrap.rsplit(":", 1)[1])
            assert asyncio.run(talk(port, commit)) == (0, 7), f"offsets.topic.num.partitions={count}"
