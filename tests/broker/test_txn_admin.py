"""The admin views of transactions and TxnOffsetCommit's error answers in the reference broker (issue 24, items 8
and 9), over real sockets: ListTransactions v0-v2 filters, DescribeProducers (key 61), TxnOffsetCommit to an
unknown group and a fenced producer's precedence, as Kafka 4.4.0 answers them
(conformance/suites/test_transactions.py checks the same on any target)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka import errors as E
from kafka.protocol.admin import DescribeProducersRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, TxnOffsetCommitRequest

from fixtures.reference import ReferenceTarget
from reference_broker.apis.list_transactions import INVALID_REGULAR_EXPRESSION

from ._wire import connect, create_topic
from .test_transactions import Txn, wait_state

SMALL = {"kafka.transaction.state.log.num.partitions": "3", "kafka.offsets.topic.num.partitions": "3"}


@pytest.fixture
def broker(tmp_path: Path):
    with ReferenceTarget({"memory": "true", **SMALL}, work_dir=tmp_path) as t:
        yield t


async def group_ready(c, group: str) -> None:
    for _ in range(100):
        if (await c.request(FindCoordinatorRequest[3](key=group, key_type=0))).body.error_code == 0:
            return
        await asyncio.sleep(0.1)


async def txn_commit(c, t: Txn, group: str, version: int, generation: int, member: str, epoch: int | None = None
                     ) -> int:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    r = (await c.request(TxnOffsetCommitRequest[version](
        transactional_id=t.id, group_id=group, producer_id=t.pid, producer_epoch=t.epoch if epoch is None else epoch,
        generation_id=generation, member_id=member, group_instance_id=None, topics=[T(name="src", partitions=[
            T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_leader_epoch=-1,
                                              committed_metadata="")])]))).body
    return r.topics[0].partitions[0].error_code


async def add_offsets(c, t: Txn, group: str) -> int:
    return (await c.request(AddOffsetsToTxnRequest[3](transactional_id=t.id, producer_id=t.pid,
                                                      producer_epoch=t.epoch, group_id=group))).body.error_code


async def test_txn_offset_commit_unknown_group_is_illegal_generation_after_the_transaction_check(broker):
    """Unknown group, generation 1: ILLEGAL_GENERATION at v3, v4 and v5 (it was GROUP_ID_NOT_FOUND); generation -1
    accepted; a fenced producer INVALID_PRODUCER_EPOCH first (it was ILLEGAL_GENERATION / GROUP_ID_NOT_FOUND)."""
    c = await connect(broker)
    await create_topic(c, "src")
    await group_ready(c, "g")
    t = Txn(c, "tx-ug")
    assert await t.find() == 0 and await t.init() == 0
    assert await t.add("src", 0) == 0 and await add_offsets(c, t, "g") == 0
    codes = {v: await txn_commit(c, t, "g", v, 1, "member-1") for v in (3, 4, 5)}
    assert codes == {3: E.IllegalGenerationError.errno, 4: E.IllegalGenerationError.errno,
                     5: E.IllegalGenerationError.errno}
    assert await txn_commit(c, t, "g", 3, -1, "") == 0
    old = t.epoch
    q = Txn(c, "tx-ug")
    assert await q.init() == 0 and q.epoch > old
    await wait_state(c, "tx-ug", "CompleteAbort")
    assert await txn_commit(c, t, "g2", 3, 1, "member-1", epoch=old) == E.InvalidProducerEpochError.errno


async def test_list_transactions_duration_any_state_and_id_pattern(broker):
    """An initialised id (Empty, start -1) passes a 10-minute duration filter; an open transaction just begun does
    not; v2's pattern matches whole ids only; a pattern that does not compile INVALID_REGULAR_EXPRESSION."""
    c = await connect(broker)
    await create_topic(c, "src")
    idle, busy = Txn(c, "lt-idle"), Txn(c, "lt-busy")
    for t in (idle, busy):
        assert await t.find() == 0 and await t.init() == 0
    assert await busy.add("src", 0) == 0

    async def listed(version: int, duration: int = -1, pattern: str | None = None):
        r = (await c.request(ListTransactionsRequest[version](
            state_filters=[], producer_id_filters=[], duration_filter=duration,
            transactional_id_pattern=pattern))).body
        return r.error_code, sorted((s.transactional_id, s.transaction_state) for s in r.transaction_states)

    assert await listed(0) == (0, [("lt-busy", "Ongoing"), ("lt-idle", "Empty")])
    assert await listed(1, 600_000) == (0, [("lt-idle", "Empty")])
    assert await listed(2, pattern="lt-b.*") == (0, [("lt-busy", "Ongoing")])
    assert await listed(2, pattern="lt-") == (0, [])
    assert await listed(2, pattern="(") == (INVALID_REGULAR_EXPRESSION, [])


async def test_describe_producers_from_the_log(broker):
    """The open transaction's producer with its first offset; unknown topics and partitions
    UNKNOWN_TOPIC_OR_PARTITION."""
    c = await connect(broker)
    await create_topic(c, "src")
    t = Txn(c, "dp")
    assert await t.find() == 0 and await t.init() == 0
    assert await t.add("src", 0) == 0
    assert (await t.produce("src", 0, [b"a", b"b"])).error_code == 0
    R = DescribeProducersRequest.TopicRequest
    r = (await c.request(DescribeProducersRequest[0](topics=[R(name="src", partition_indexes=[0, 7]),
                                                             R(name="nope", partition_indexes=[0])]))).body
    src, nope = r.topics
    p0, p7 = src.partitions
    assert p0.error_code == 0 and [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
                                   for s in p0.active_producers] == [(t.pid, t.epoch, 1, 0)]
    assert p7.error_code == nope.partitions[0].error_code == E.UnknownTopicOrPartitionError.errno
