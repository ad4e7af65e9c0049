"""Transactions in the reference broker (KIP-98, KIP-447, KIP-890 part 1), over real sockets: the protocol answers
Kafka's TransactionCoordinator, ReplicaManager and UnifiedLog give (fencing, verification, LSO, aborted transactions,
TxnOffsetCommit / require_stable, timeouts, recovery after kill -9), and real transactional clients (kafka-python 3,
confluent-kafka / librdkafka) with read_committed consumers, on one broker and on three."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from fixtures.reference import ReferenceTarget

from ._wire import batch, connect, create_topic, fetch_request, only_partition, produce

SMALL = {"kafka.transaction.state.log.num.partitions": "3", "kafka.offsets.topic.num.partitions": "3"}
INVALID_TXN_STATE, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, UNSTABLE_OFFSET_COMMIT = 48, 90, 47, 88


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
    return bytes(b.build())


class Txn:
    """A transactional producer at the protocol level (what a client sends, one request at a time)."""

    def __init__(self, c, txn_id: str, timeout_ms: int = 60_000) -> None:
        self.c, self.id, self.timeout_ms = c, txn_id, timeout_ms
        self.pid, self.epoch, self.seq = -1, -1, {}

    async def find(self) -> int:
        for _ in range(100):        # Kafka creates __transaction_state asynchronously: COORDINATOR_NOT_AVAILABLE
            r = (await self.c.request(FindCoordinatorRequest[3](key=self.id, key_type=1))).body
            if r.error_code != 15:
                break
            await asyncio.sleep(0.1)
        return r.error_code

    async def init(self) -> int:
        for _ in range(100):
            r = (await self.c.request(InitProducerIdRequest[4](transactional_id=self.id,
                                                               transaction_timeout_ms=self.timeout_ms,
                                                               producer_id=-1, producer_epoch=-1))).body
            if r.error_code not in (14, 15, 16, 51):  # loading / not available / concurrent: retry, as clients do
                break
            await asyncio.sleep(0.05)
        if r.error_code == 0:
            self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, {}
        return r.error_code

    async def add(self, topic: str, *partitions: int, epoch: int | None = None) -> int:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = (await self.c.request(AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id=self.id, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[T(name=topic, partitions=list(partitions))]))).body
        return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    async def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None):
        seq = self.seq.get((topic, partition), 0)
        T = ProduceRequest.TopicProduceData
        for _ in range(50):     # a topic just created may not have its leader everywhere yet (Kafka)
            r = (await self.c.request(ProduceRequest[9](transactional_id=self.id, acks=-1, timeout_ms=5000,
                                                        topic_data=[T(name=topic, partition_data=[
                                                            T.PartitionProduceData(index=partition, records=txn_batch(
                                                                self.pid, self.epoch if epoch is None else epoch, seq,
                                                                values))])]))).body
            pr = r.responses[0].partition_responses[0]
            if pr.error_code not in (3, 6):
                break
            await asyncio.sleep(0.1)
        if pr.error_code == 0:
            self.seq[(topic, partition)] = seq + len(values)
        return pr

    async def end(self, commit: bool, epoch: int | None = None) -> int:
        r = (await self.c.request(EndTxnRequest[3](transactional_id=self.id, producer_id=self.pid,
                                                   producer_epoch=self.epoch if epoch is None else epoch,
                                                   committed=commit))).body
        return r.error_code


async def fetch(c, topic: str, partition: int = 0, offset: int = 0, isolation: int = 1):
    return only_partition((await c.request(fetch_request([(topic, partition, offset)], 0, 1,
                                                         isolation=isolation))).body)


async def latest(c, topic: str, isolation: int, partition: int = 0) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    r = (await c.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=isolation, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                          timestamp=-1)])]))).body
    return r.topics[0].partitions[0].offset


def values(p) -> list[bytes]:
    """The record values a consumer keeps from one partition's Fetch answer: control batches dropped, and with an
    aborted_transactions list the aborted producers' batches from each listed first offset to their ABORT marker
    (what Kafka's consumer does, CompletedFetch)."""
    from kafka.record.memory_records import MemoryRecords

    starts = sorted((a.first_offset, a.producer_id) for a in (p.aborted_transactions or []))
    aborting: set[int] = set()
    out, mr = [], MemoryRecords(bytes(p.records))
    while (b := mr.next_batch()) is not None:
        while starts and starts[0][0] <= b.base_offset:
            aborting.add(starts.pop(0)[1])
        if b.is_control_batch:
            if any(r.abort for r in b):
                aborting.discard(b.producer_id)
            continue
        if b.is_transactional and b.producer_id in aborting:
            continue
        out += [r.value for r in b]
    return out


async def describe(c, txn_id: str):
    r = (await c.request(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))).body
    return r.transaction_states[0]


async def wait_state(c, txn_id: str, state: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        d = await describe(c, txn_id)
        if d.transaction_state == state or time.monotonic() > deadline:
            return d
        await asyncio.sleep(0.05)


@pytest.fixture
def txn_broker(tmp_path: Path):
    with ReferenceTarget({"memory": "true", **SMALL,
                          "kafka.transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"},
                         work_dir=tmp_path) as t:
        yield t


async def test_lso_aborted_list_and_read_committed(txn_broker):
    """While a transaction is open the LSO stays at its first offset (Fetch last_stable_offset, ListOffsets LATEST
    with isolation 1) and read_committed reads nothing of it; after the abort the records stay invisible and the
    Fetch answer lists the aborted transaction (producer id, first offset); a commit makes the next ones visible.
    Before the change: InitProducerId with a transactional id was INVALID_REQUEST."""
    c = await connect(txn_broker)
    await create_topic(c, "lso")
    assert (await produce(c, "lso", batch([b"plain"]))).error_code == 0
    t = Txn(c, "lso-txn")
    assert await t.find() == 0
    assert await t.init() == 0 and t.epoch == 0
    assert await t.add("lso", 0) == 0
    pr = await t.produce("lso", 0, [b"a1", b"a2"])
    assert pr.error_code == 0
    first = pr.base_offset
    p = await fetch(c, "lso")
    assert p.last_stable_offset == first and p.high_watermark == first + 2, p
    assert await latest(c, "lso", 1) == first and await latest(c, "lso", 0) == first + 2
    assert values(p) == [b"plain"]                      # nothing at or past the LSO
    assert (await describe(c, "lso-txn")).transaction_state == "Ongoing"
    assert await t.end(False) == 0
    d = await wait_state(c, "lso-txn", "CompleteAbort")
    assert d.transaction_state == "CompleteAbort"
    p = await fetch(c, "lso")
    assert p.last_stable_offset == p.high_watermark == first + 3        # the ABORT marker took one offset
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(t.pid, first)]
    assert (await fetch(c, "lso", isolation=0)).aborted_transactions is None
    assert await t.add("lso", 0) == 0
    assert (await t.produce("lso", 0, [b"c1"])).error_code == 0
    assert await t.end(True) == 0
    await wait_state(c, "lso-txn", "CompleteCommit")
    p = await fetch(c, "lso", offset=first + 3)
    assert values(p) == [b"c1"] and p.aborted_transactions == []
    lt = (await c.request(ListTransactionsRequest[0](state_filters=[], producer_id_filters=[]))).body
    assert [(s.transactional_id, s.transaction_state) for s in lt.transaction_states] == [("lso-txn",
                                                                                          "CompleteCommit")]


async def test_fencing_verification_and_timeout(txn_broker):
    """KIP-890 part 1: a transactional produce to a partition not in the transaction is INVALID_TXN_STATE (Produce
    v9) and nothing is written. A second InitProducerId fences the first producer: PRODUCER_FENCED for its
    AddPartitions and EndTxn, INVALID_PRODUCER_EPOCH for its produce once the abort markers carry the new epoch.
    A transaction open longer than its timeout is aborted by the coordinator with a bumped epoch."""
    c = await connect(txn_broker)
    await create_topic(c, "fence", partitions=2)
    old = Txn(c, "fence-txn")
    assert await old.find() == 0 and await old.init() == 0
    assert await old.add("fence", 0) == 0
    assert (await old.produce("fence", 0, [b"x"])).error_code == 0
    pr = await old.produce("fence", 1, [b"not-added"])
    assert pr.error_code == INVALID_TXN_STATE, pr
    assert (await fetch(c, "fence", 1, isolation=0)).high_watermark == 0
    new = Txn(c, "fence-txn")
    assert await new.init() == 0
    assert (new.pid, new.epoch) == (old.pid, old.epoch + 2)     # fence bump (abort) + the retry's bump
    assert await old.add("fence", 1) == PRODUCER_FENCED
    assert await old.end(True) == PRODUCER_FENCED
    assert (await old.produce("fence", 0, [b"late"])).error_code == INVALID_PRODUCER_EPOCH
    p = await fetch(c, "fence", 0)
    assert values(p) == [] and p.last_stable_offset == p.high_watermark

    slow = Txn(c, "slow-txn", timeout_ms=300)
    assert await slow.find() == 0 and await slow.init() == 0
    assert await slow.add("fence", 1) == 0
    assert (await slow.produce("fence", 1, [b"timed-out"])).error_code == 0
    d = await wait_state(c, "slow-txn", "CompleteAbort", timeout=5)
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", slow.epoch + 1), d
    assert await slow.end(True) == PRODUCER_FENCED
    p = await fetch(c, "fence", 1)
    assert values(p) == [] and [a.first_offset for a in p.aborted_transactions] == [0]


async def test_txn_offset_commit_pending_until_commit(txn_broker):
    """TxnOffsetCommit offsets are invisible to OffsetFetch until the COMMIT marker; require_stable (v7) answers
    UNSTABLE_OFFSET_COMMIT meanwhile (KIP-447); an abort discards them."""
    c = await connect(txn_broker)
    await create_topic(c, "src")
    t = Txn(c, "ctp-txn")
    assert await t.find() == 0 and await t.init() == 0
    for _ in range(100):       # Kafka creates __consumer_offsets asynchronously
        if (await c.request(FindCoordinatorRequest[3](key="ctp-group", key_type=0))).body.error_code == 0:
            break
        await asyncio.sleep(0.1)

    async def add_and_commit(offset: int) -> None:
        r = (await c.request(AddOffsetsToTxnRequest[3](transactional_id=t.id, producer_id=t.pid,
                                                       producer_epoch=t.epoch, group_id="ctp-group"))).body
        assert r.error_code == 0
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        r = (await c.request(TxnOffsetCommitRequest[3](
            transactional_id=t.id, group_id="ctp-group", producer_id=t.pid, producer_epoch=t.epoch,
            generation_id=-1, member_id="", group_instance_id=None, topics=[T(name="src", partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                  committed_leader_epoch=-1, committed_metadata="m")])]))).body
        assert r.topics[0].partitions[0].error_code == 0, r

    async def offset_fetch(stable: bool):
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        r = (await c.request(OffsetFetchRequest[7](group_id="ctp-group", topics=[T(name="src", partition_indexes=[0])],
                                                   require_stable=stable))).body
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    await add_and_commit(7)
    assert await offset_fetch(False) == (0, -1)
    assert await offset_fetch(True) == (UNSTABLE_OFFSET_COMMIT, -1)
    assert await t.end(True) == 0
    await wait_state(c, t.id, "CompleteCommit")
    assert await offset_fetch(True) == (0, 7)
    await add_and_commit(9)
    assert await t.end(False) == 0
    await wait_state(c, t.id, "CompleteAbort")
    assert await offset_fetch(True) == (0, 7) and await offset_fetch(False) == (0, 7)


def test_open_transaction_survives_kill_9(tmp_path: Path):
    """kill -9 with a transaction open: the restarted broker rebuilds it from the log and snapshots (the LSO is
    still its first offset), the coordinator reloads it from __transaction_state, and a new InitProducerId aborts
    it; the aborted index survives a second kill -9. Before: the producer state ignored transactions."""
    async def phase1(t):
        c = await connect(t)
        await create_topic(c, "dur")
        p = Txn(c, "dur-txn")
        assert await p.find() == 0 and await p.init() == 0 and await p.add("dur", 0) == 0
        assert (await p.produce("dur", 0, [b"open1", b"open2"])).error_code == 0
        return (await fetch(c, "dur")).high_watermark

    async def phase2(t):
        c = await connect(t)
        f = await fetch(c, "dur")
        assert (f.last_stable_offset, f.high_watermark) == (0, 2), f
        for _ in range(100):
            if await Txn(c, "dur-txn").find() == 0:
                break
            await asyncio.sleep(0.1)
        p = Txn(c, "dur-txn")
        assert await p.init() == 0
        f = await fetch(c, "dur")
        assert values(f) == [] and f.last_stable_offset == f.high_watermark == 3
        return [(a.producer_id, a.first_offset) for a in f.aborted_transactions]

    async def phase3(t, expected):
        c = await connect(t)
        f = await fetch(c, "dur")
        assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == expected
        assert values(f) == [] and f.last_stable_offset == 3

    with ReferenceTarget(SMALL, work_dir=tmp_path) as t:
        assert asyncio.run(phase1(t)) == 2
        t.kill_broker()
        t.restart()
        aborted = asyncio.run(phase2(t))
        assert len(aborted) == 1
        t.kill_broker()
        t.restart()
        asyncio.run(phase3(t, aborted))


def test_fault_switches_break_their_rules(tmp_path: Path):
    """txn.lso_is_hw (LSO = HW with a transaction open), txn.no_aborted_list (no aborted transactions listed),
    txn.no_partition_verification (a produce to a partition outside the transaction is appended)."""
    async def run(t):
        c = await connect(t)
        await create_topic(c, "ff", partitions=2)
        p = Txn(c, "ff-txn")
        assert await p.find() == 0 and await p.init() == 0 and await p.add("ff", 0) == 0
        assert (await p.produce("ff", 0, [b"x"])).error_code == 0
        assert (await p.produce("ff", 1, [b"unadded"])).error_code == 0
        f = await fetch(c, "ff")
        assert f.last_stable_offset == f.high_watermark == 1 and values(f) == [b"x"]
        assert await p.end(False) == 0
        await wait_state(c, "ff-txn", "CompleteAbort")
        f = await fetch(c, "ff")
        assert f.aborted_transactions == [] and values(f) == [b"x"]

    faults = "txn.lso_is_hw,txn.no_aborted_list,txn.no_partition_verification"
    with ReferenceTarget({"memory": "true", **SMALL, "faults": faults}, work_dir=tmp_path) as t:
        asyncio.run(run(t))


def _kafka_python_roundtrip(bs: str, topic: str, replication: int) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic(topic, 2, replication)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=f"kp-{topic}")
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, value=b"a%d" % i, partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, value=b"c-last", partition=1)
    p.commit_transaction()
    p.close()
    for iso, want in (("read_committed", [b"c-last", b"c0", b"c1", b"c2", b"c3"]),
                      ("read_uncommitted", [b"a0", b"a1", b"a2", b"a3", b"c-last", b"c0", b"c1", b"c2", b"c3"])):
        c = KafkaConsumer(bootstrap_servers=bs, isolation_level=iso, auto_offset_reset="earliest",
                          consumer_timeout_ms=2000)
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = sorted(r.value for r in c)
        c.close()
        assert got == want, (iso, got)


def _confluent_roundtrip(bs: str, topic: str, replication: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, replication)])[topic].result()
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"ck-{topic}"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush()
    p.abort_transaction(20)
    group = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}"})
    p.begin_transaction()
    p.produce(topic, value=b"c-off", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], group.consumer_group_metadata(), 20)
    p.commit_transaction(20)
    for iso, want in (("read_committed", [b"c-off", b"c0", b"c1", b"c2", b"c3"]),
                      ("read_uncommitted", [b"a0", b"a1", b"a2", b"a3", b"c-off", b"c0", b"c1", b"c2", b"c3"])):
        c = Consumer({"bootstrap.servers": bs, "group.id": f"r-{iso}", "isolation.level": iso,
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(got) < len(want) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert sorted(got) == want, (iso, got)
    assert group.committed([TopicPartition(topic, 0)], 10)[0].offset == 5
    group.close()


def test_real_clients_single_broker(tmp_path: Path):
    """kafka-python 3 and confluent-kafka transactional producers (with send_offsets_to_transaction) and read_committed
    consumers against one broker, unmodified."""
    with ReferenceTarget({"memory": "true", **SMALL}, work_dir=tmp_path) as t:
        _kafka_python_roundtrip(t.bootstrap, "kp1", 1)
        _confluent_roundtrip(t.bootstrap, "ck1", 1)


def test_real_clients_three_brokers(tmp_path: Path):
    """The same on three brokers (replication factor 3): markers go to remote leaders over the broker links, the
    coordinator's state and the TxnOffsetCommit are replicated before they are answered."""
    with ReferenceTarget({"memory": "true", "brokers": "3", **SMALL}, work_dir=tmp_path) as t:
        _kafka_python_roundtrip(t.bootstrap, "kp3", 3)
        _confluent_roundtrip(t.bootstrap, "ck3", 3)


def test_more_fault_switches_break_their_rules(tmp_path: Path):
    """txn.abort_as_commit (an aborted transaction's records become visible), txn.no_timeout (an expired transaction
    stays open), txn.commit_first_partition_only (the second partition of a committed transaction stays open: its
    LSO stuck)."""
    async def run(t):
        c = await connect(t)
        await create_topic(c, "mf", partitions=2)
        p = Txn(c, "mf-txn", timeout_ms=200)
        assert await p.find() == 0 and await p.init() == 0 and await p.add("mf", 0) == 0
        assert (await p.produce("mf", 0, [b"aborted"])).error_code == 0
        await asyncio.sleep(0.6)
        assert (await describe(c, "mf-txn")).transaction_state == "Ongoing"       # txn.no_timeout
        assert await p.end(False) == 0
        await wait_state(c, "mf-txn", "CompleteAbort")
        assert values(await fetch(c, "mf")) == [b"aborted"]                       # txn.abort_as_commit
        assert await p.add("mf", 0, 1) == 0
        assert (await p.produce("mf", 0, [b"c0"])).error_code == 0
        assert (await p.produce("mf", 1, [b"c1"])).error_code == 0
        assert await p.end(True) == 0
        await wait_state(c, "mf-txn", "CompleteCommit")
        assert values(await fetch(c, "mf", offset=2)) == [b"c0"]
        f1 = await fetch(c, "mf", 1)
        assert values(f1) == [] and (f1.last_stable_offset, f1.high_watermark) == (0, 1)

    faults = "txn.abort_as_commit,txn.no_timeout,txn.commit_first_partition_only"
    with ReferenceTarget({"memory": "true", **SMALL, "faults": faults,
                          "kafka.transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"},
                         work_dir=tmp_path) as t:
        asyncio.run(run(t))
