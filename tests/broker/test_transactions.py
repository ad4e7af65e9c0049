"""Transactions in the reference broker (KIP-98, KIP-447, KIP-890 part 1), over real sockets: the protocol answers
Kafka's TransactionCoordinator, ReplicaManager and UnifiedLog give (fencing, verification, LSO, aborted transactions,
TxnOffsetCommit / require_stable, timeouts, recovery after kill -9), and real transactional clients (kafka-python 3,
confluent-kafka / librdkafka) with read_committed consumers, on one broker and on three."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTransactionsRequest, ListTransactionsRequest
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
from reference_broker.client.protocol import Connection

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

    async def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None, to=None):
        """A transactional batch, to the coordinator's connection or ``to`` (the partition's leader)."""
        seq = self.seq.get((topic, partition), 0)
        T = ProduceRequest.TopicProduceData
        for _ in range(50):     # a topic just created may not have its leader everywhere yet (Kafka)
            r = (await (to or self.c).request(ProduceRequest[9](transactional_id=self.id, acks=-1, timeout_ms=5000,
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
    UNSTABLE_OFFSET_COMMIT meanwhile (KIP-447); an abort discards them. Before AddOffsetsToTxn the coordinator does
    not confirm the offsets partition (KIP-890 part 1): INVALID_TXN_STATE, as Kafka 4.4.0 answers v3, nothing
    pending."""
    c = await connect(txn_broker)
    await create_topic(c, "src")
    t = Txn(c, "ctp-txn")
    assert await t.find() == 0 and await t.init() == 0
    for _ in range(100):       # Kafka creates __consumer_offsets asynchronously
        if (await c.request(FindCoordinatorRequest[3](key="ctp-group", key_type=0))).body.error_code == 0:
            break
        await asyncio.sleep(0.1)

    async def add_and_commit(offset: int, add: bool = True) -> int:
        if add:
            r = (await c.request(AddOffsetsToTxnRequest[3](transactional_id=t.id, producer_id=t.pid,
                                                           producer_epoch=t.epoch, group_id="ctp-group"))).body
            assert r.error_code == 0
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        r = (await c.request(TxnOffsetCommitRequest[3](
            transactional_id=t.id, group_id="ctp-group", producer_id=t.pid, producer_epoch=t.epoch,
            generation_id=-1, member_id="", group_instance_id=None, topics=[T(name="src", partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                  committed_leader_epoch=-1, committed_metadata="m")])]))).body
        return r.topics[0].partitions[0].error_code

    async def offset_fetch(stable: bool):
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        r = (await c.request(OffsetFetchRequest[7](group_id="ctp-group", topics=[T(name="src", partition_indexes=[0])],
                                                   require_stable=stable))).body
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert await add_and_commit(5, add=False) == INVALID_TXN_STATE      # the offsets partition is not in it
    assert await offset_fetch(True) == (0, -1)
    assert await add_and_commit(7) == 0
    assert await offset_fetch(False) == (0, -1)
    assert await offset_fetch(True) == (UNSTABLE_OFFSET_COMMIT, -1)
    assert await t.end(True) == 0
    await wait_state(c, t.id, "CompleteCommit")
    assert await offset_fetch(True) == (0, 7)
    assert await add_and_commit(9) == 0
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


async def placed_topic(c, name: str, replicas: list[int]) -> None:
    """A one-partition topic on exactly ``replicas`` (the first is the preferred leader)."""
    T = CreateTopicsRequest.CreatableTopic
    r = (await c.request(CreateTopicsRequest[7](topics=[T(
        name=name, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])],
        timeout_ms=5000, validate_only=False))).body
    assert r.topics[0].error_code == 0, r


async def find_coordinator(conns: dict, txn_id: str, avoid: int = -1, within_s: float = 30.0) -> int:
    """The transaction coordinator's node id, asked of every live broker until one other than ``avoid`` answers."""
    deadline = time.monotonic() + within_s
    while True:
        for c in conns.values():
            r = (await c.request(FindCoordinatorRequest[3](key=txn_id, key_type=1), timeout=2.0)).body
            if r.error_code == 0 and r.node_id != avoid:
                return r.node_id
        assert time.monotonic() < deadline, f"no transaction coordinator for {txn_id} other than {avoid}"
        await asyncio.sleep(0.1)


async def end_when_loaded(t: Txn, commit: bool, within_s: float = 30.0) -> int:
    """EndTxn, retried while the new coordinator is not ready (NOT_COORDINATOR, loading, not available)."""
    deadline = time.monotonic() + within_s
    while (err := await t.end(commit)) in (14, 15, 16, 51) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return err


def test_outcome_survives_coordinator_kill(tmp_path: Path):
    """kill -9 of the transaction coordinator (the __transaction_state leader) on 3 brokers, with one transaction
    Ongoing (A, on a partition led by D) and another one whose EndTxn abort was answered but whose marker is still
    pending (B, on a partition of X, paused; PrepareAbort durable). The new coordinator D loads both from the
    replicated __transaction_state: once X resumes it completes B's abort (TransactionMarkerChannelManager sends the
    markers of the PrepareCommit/PrepareAbort transactions it loads), and A's producer commits A through it with
    the same producer id and epoch. A's records are read_committed on D, B's never on X; nothing stays open. (A failover
    of the data partition's leader is TXN-MARKERS-FAILOVER in conformance/suites/test_transactions.py.)"""
    async def run(t: ReferenceTarget) -> None:
        addrs = dict(enumerate(hp.split(":") for hp in t.bootstrap.split(",")))
        conns = {i: await Connection.connect(h, int(p)) for i, (h, p) in addrs.items()}
        for c in conns.values():
            await c.api_versions()
        coord = await find_coordinator(conns, "kc-a")
        d, x = [i for i in sorted(conns) if i != coord]
        b_id = ""
        for i in range(100):                                # another transactional id on the same coordinator
            if await find_coordinator(conns, f"kc-b{i}") == coord:
                b_id = f"kc-b{i}"
                break
        await placed_topic(conns[d], "kc-d", [d, x, coord])
        await placed_topic(conns[d], "kc-x", [x])
        a, b = Txn(conns[coord], "kc-a"), Txn(conns[coord], b_id)
        for txn, topic, leader in ((a, "kc-d", d), (b, "kc-x", x)):
            assert await txn.init() == 0 and await txn.add(topic, 0) == 0
            assert (await txn.produce(topic, 0, [txn.id.encode() + b"-1", txn.id.encode() + b"-2"],
                                      to=conns[leader])).error_code == 0
        t.pause_broker(x)
        assert await b.end(False) == 0                      # PrepareAbort durable; X cannot take the marker
        assert (await describe(conns[coord], b.id)).transaction_state == "PrepareAbort"
        t.kill_broker(coord)
        new = await find_coordinator({i: conns[i] for i in (d,)}, a.id, avoid=coord)
        assert new == d                                     # the only other in-sync replica (X is paused)
        a.c = b.c = conns[d]
        # X back: with the old coordinator dead, __transaction_state needs it in the ISR again for its min ISR (2),
        # as Kafka's does (COORDINATOR_NOT_AVAILABLE until then); and B's marker can reach it.
        t.resume_broker(x)
        assert await end_when_loaded(a, True) == 0
        for txn, state in ((a, "CompleteCommit"), (b, "CompleteAbort")):
            got = await wait_state(conns[d], txn.id, state, timeout=20)
            assert (got.transaction_state, got.producer_id) == (state, txn.pid), got
        fa, fb = await fetch(conns[d], "kc-d"), await fetch(conns[x], "kc-x")
        assert values(fa) == [b"kc-a-1", b"kc-a-2"] and fa.last_stable_offset == fa.high_watermark == 3, fa
        assert values(fb) == [] and fb.last_stable_offset == fb.high_watermark == 3, fb
        assert [(r.producer_id, r.first_offset) for r in fb.aborted_transactions] == [(b.pid, 0)]
        for i in (d, x):
            await conns[i].close()

    with ReferenceTarget({"memory": "true", "brokers": "3", **SMALL, "kafka.broker.session.timeout.ms": "3000"},
                         work_dir=tmp_path) as t:
        asyncio.run(run(t))


# ------------------------------------------------------------------ the coordinator's transitions, step by step
# These drive one TransactionCoordinator on the test's event loop with a ManualClock, so the order of a timer and a
# request inside one loop pass is the test's to choose (over sockets it is a matter of microseconds). The log of
# __transaction_state and the marker channel are stand-ins for their narrow interfaces: the log commits at once
# (or refuses while the test says the ISR is too small), the channel records each transaction's markers and
# writes them when the test lets it.


class _TxnLog:
    """``__transaction_state`` partitions in memory: appends commit after one loop step; ``refuse`` answers
    NOT_ENOUGH_REPLICAS (an ISR below min.insync.replicas) to that many appends."""

    def __init__(self) -> None:
        self.records: dict[int, list[bytes]] = {}
        self.refuse = 0
        self.refused = 0

    def append(self, index: int, batch: bytes) -> int:
        from kafka import errors as E

        from reference_broker.offset_store import AppendError

        if self.refuse > 0:
            self.refuse -= 1
            self.refused += 1
            raise AppendError(E.NotEnoughReplicasError.errno, "ISR below min ISR")
        self.records.setdefault(index, []).append(batch)
        return len(self.records[index])

    def partition_for(self, key: str) -> int:
        from reference_broker.offset_store import partition_for

        return partition_for(key, 1)          # transaction.state.log.num.partitions=1 in _coordinator

    async def write(self, index: int, batch: bytes, timeout_s: float) -> int:
        """CoordinatorPartitionWriter.write: append, wait for the commit, the coordinator's error on a refusal."""
        from reference_broker.offset_store import TXN, AppendError, coordinator_error

        try:
            end = self.append(index, batch)
        except AppendError as e:
            return coordinator_error(e.code, TXN)
        return coordinator_error(await self.wait_committed(index, end, timeout_s), TXN)

    def read(self, index: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        return b"", len(self.records.get(index, []))

    def log_start(self, index: int) -> int:
        return 0

    def high_watermark(self, index: int) -> int:
        return len(self.records.get(index, []))

    async def wait_committed(self, index: int, offset: int, timeout_s: float) -> int:
        await asyncio.sleep(0)
        return 0


class _Markers:
    """The marker channel's interface: records every transaction's markers; ``hold`` keeps them unwritten."""

    def __init__(self) -> None:
        self.sent: list = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def write(self, key: str, markers: list) -> None:
        await self.hold.wait()
        self.sent += markers

    def abandon(self, key: str) -> None:
        pass


def _coordinator(log: _TxnLog, markers: _Markers, faults: tuple[str, ...] = ()):
    from reference_broker.clock import ManualClock

    class Clock(ManualClock):
        async def sleep(self, delay_s: float) -> None:      # wakes when the test advances the clock past it
            f = asyncio.get_running_loop().create_future()
            self.call_later(delay_s, lambda: f.done() or f.set_result(None))
            await f

    from reference_broker.config import BrokerConfig
    from reference_broker.faults import Faults
    from reference_broker.txn_coordinator import TransactionCoordinator

    ids = iter(range(1000, 2000))
    c = TransactionCoordinator(BrokerConfig({"transaction.state.log.num.partitions": 1}), Clock(),
                               Faults(faults), log, lambda: next(ids), markers, lambda g: ("__consumer_offsets", 0))
    c.owned[0] = 0
    return c


async def _settle(c, txn_id: str, within: int = 2000) -> None:
    """Let the coordinator's tasks run until the transaction is neither pending nor preparing."""
    for _ in range(within):
        m = c.txns[txn_id]
        if m.pending is None and m.state not in ("PrepareCommit", "PrepareAbort"):
            return
        await asyncio.sleep(0)
        c.clock.advance(0.05)


async def _open(c, txn_id: str, timeout_ms: int = 1000) -> tuple[int, int]:
    err, pid, epoch = await c.init_producer_id(txn_id, timeout_ms, None)
    assert err == 0
    assert await c.add_partitions(txn_id, pid, epoch, {("t", 0), ("t", 1)}) == 0
    return pid, epoch


@pytest.mark.parametrize("tv", [0, 2])
async def test_timeout_abort_and_end_txn_in_one_loop_pass(tv):
    """The timer decides to abort a timed-out transaction and, in the same loop pass, the producer's EndTxn(commit)
    is handled (issue 24, item 1). Kafka takes the pending state under the metadata lock when it decides
    (abortTimedOutTransactions, prepareTransitionTo), so exactly one end happens: the abort, whose epoch bump
    fences the EndTxn. Before: the EndTxn answered NONE and wrote PrepareCommit, then the abort wrote PrepareAbort
    at epoch + 1 — COMMIT and ABORT markers for one transaction."""
    log, markers = _TxnLog(), _Markers()
    c = _coordinator(log, markers)
    pid, epoch = await _open(c, "race")
    c.clock.advance(2.0)                        # past the 1 s timeout
    c.abort_timed_out()                         # decides; its write has not started
    err, _, _ = await c.end_txn("race", pid, epoch, True, tv=tv)
    await _settle(c, "race")
    m = c.txns["race"]
    outcomes = {mk.commit for mk in markers.sent}
    assert err != 0, f"EndTxn(commit) answered NONE although the timeout abort was decided first ({m.state})"
    assert outcomes == {False} and len(markers.sent) == 2, (
        f"markers {markers.sent}: one transaction got {'COMMIT and ABORT' if len(outcomes) > 1 else outcomes}")
    assert m.state == "CompleteAbort" and m.producer_epoch == epoch + 1, (m.state, m.producer_epoch)


async def test_timeout_abort_skips_a_transaction_with_a_pending_end():
    """EndTxn first, the timer in the same pass: the transaction is pending (PrepareCommit being written), so the
    timer leaves it alone (abortTimedOutTransactions: pendingTransitionInProgress) and the commit completes."""
    log, markers = _TxnLog(), _Markers()
    c = _coordinator(log, markers)
    pid, epoch = await _open(c, "race2")
    c.clock.advance(2.0)
    end = asyncio.ensure_future(c.end_txn("race2", pid, epoch, True))
    await asyncio.sleep(0)                      # EndTxn took the pending state and is writing PrepareCommit
    c.abort_timed_out()
    assert (await end)[0] == 0
    await _settle(c, "race2")
    assert {mk.commit for mk in markers.sent} == {True}, markers.sent
    assert c.txns["race2"].state == "CompleteCommit"


async def test_complete_retried_until_the_log_accepts_it():
    """Complete* refused 60 times (the transaction log below min ISR for a while) after the markers: the coordinator
    keeps retrying with the transaction pending, as TransactionMarkerChannelManager.tryAppendToLog does, and
    completes once the log takes it (issue 24, item 4; before: it gave up after 20 tries, PrepareCommit for good)."""
    log, markers = _TxnLog(), _Markers()
    c = _coordinator(log, markers)
    pid, epoch = await _open(c, "live")
    markers.hold.clear()
    assert (await c.end_txn("live", pid, epoch, True))[0] == 0
    log.refuse = 60
    markers.hold.set()
    await _settle(c, "live", within=20000)
    m = c.txns["live"]
    assert log.refused == 60 and m.state == "CompleteCommit" and m.pending is None, (log.refused, m.state, m.pending)


async def test_requests_while_markers_pending_are_concurrent():
    """While the markers are being written the transaction is pending (prepareComplete): EndTxn of either outcome
    (v3 and v5 with the epoch before the bump), InitProducerId with and without the producer's id and epoch, and
    AddPartitionsToTxn answer CONCURRENT_TRANSACTIONS (TransactionCoordinator.endTransaction /
    prepareInitProducerIdTransit check pendingTransitionInProgress before the state; issue 24, item 5). Before:
    EndTxn of the other outcome answered INVALID_TXN_STATE, InitProducerId with a stale epoch PRODUCER_FENCED."""
    from kafka import errors as E

    cc = E.ConcurrentTransactionsError.errno
    for tv in (0, 2):
        log, markers = _TxnLog(), _Markers()
        c = _coordinator(log, markers)
        pid, epoch = await _open(c, "mp")
        if tv:
            c.txns["mp"].tv = 2
        markers.hold.clear()
        assert (await c.end_txn("mp", pid, epoch, True, tv=tv))[0] == 0
        got = {
            "end_commit": (await c.end_txn("mp", pid, epoch, True, tv=tv))[0],
            "end_abort": (await c.end_txn("mp", pid, epoch, False, tv=tv))[0],
            "init": (await c.init_producer_id("mp", 1000, None))[0],
            "init_with_id": (await c.init_producer_id("mp", 1000, (pid, epoch)))[0],
            "init_stale": (await c.init_producer_id("mp", 1000, (pid, max(epoch - 1, 0) if tv else epoch + 5)))[0],
        }
        assert got == dict.fromkeys(got, cc), f"tv {tv}: {got}"
        markers.hold.set()
        await _settle(c, "mp")
        assert c.txns["mp"].state == "CompleteCommit"
