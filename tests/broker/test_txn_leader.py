"""The partition leader's side of transactions (issue 24), over real sockets on one reference broker: Produce's
transactional checks (no hanging transaction from a bad Produce), marker epochs for transaction version 2
(KIP-1228), the LSO after DeleteRecords, the aborted transaction index, and a TV2 producer's first sequence.
Each test failed before its fix: the answers and offsets they assert are Kafka 4.4.0's (see the conformance rules
TXN-NO-HANGING, TXN-MARKER-EPOCH, TXN-LSO-LOG-START, TXN-ABORTED-LIST-WROTE, TXN-TV2-FIRST-SEQUENCE)."""
from __future__ import annotations

from pathlib import Path

import pytest
from kafka import errors as E
from kafka.protocol.producer import EndTxnRequest, ProduceRequest, WriteTxnMarkersRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from fixtures.reference import ReferenceTarget
from reference_broker.client.protocol import ConnectionClosedError

from ._wire import batch, connect, create_topic, delete_records, produce
from .test_transactions import SMALL, Txn, fetch, latest, txn_batch, values, wait_state


@pytest.fixture
def broker(tmp_path: Path):
    with ReferenceTarget({"memory": "true", **SMALL}, work_dir=tmp_path) as t:
        yield t


def idempotent_batch(pid: int, epoch: int, seq: int, vals: list[bytes]) -> bytes:
    """A non-transactional batch with a producer id (an idempotent producer's)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i, v in enumerate(vals):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
    return bytes(b.build())


async def produce_many(c, txn_id: str | None, parts: dict[tuple[str, int], bytes], version: int = 9,
                       messages: dict | None = None) -> dict:
    """One Produce → {(topic, partition): error}; ``messages`` (a dict) receives each partition's error_message."""
    T = ProduceRequest.TopicProduceData
    by: dict[str, list] = {}
    for (t, p), data in parts.items():
        by.setdefault(t, []).append(T.PartitionProduceData(index=p, records=data))
    r = await c.request(ProduceRequest[version](transactional_id=txn_id, acks=-1, timeout_ms=5000,
                                                topic_data=[T(name=t, partition_data=ps) for t, ps in by.items()]))
    if messages is not None:
        messages.update({(t.name, p.index): p.error_message for t in r.body.responses for p in t.partition_responses})
    return {(t.name, p.index): p.error_code for t in r.body.responses for p in t.partition_responses}


async def marker(c, pid: int, epoch: int, commit: bool, topic: str, partition: int = 0, *, version: int = 2,
                 tv: int = 2, coordinator_epoch: int = 0) -> int:
    """One WriteTxnMarkers to the leader → its error for the partition."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    fields = dict(producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
                  topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])
    if version >= 2:
        fields["transaction_version"] = tv
    r = await c.request(WriteTxnMarkersRequest[version](markers=[M(**fields)]))
    return r.body.markers[0].topics[0].partitions[0].error_code


async def end_tv2(t: Txn, commit: bool) -> int:
    """EndTxn v5: the coordinator bumps the epoch, which the markers carry; the producer adopts it."""
    r = (await t.c.request(EndTxnRequest[5](transactional_id=t.id, producer_id=t.pid, producer_epoch=t.epoch,
                                            committed=commit))).body
    if r.error_code == 0:
        t.pid, t.epoch, t.seq = r.producer_id, r.producer_epoch, {}
    return r.error_code


async def produce_v12(t: Txn, topic: str, vals: list[bytes], seq: int | None = None, partition: int = 0):
    s = t.seq.get((topic, partition), 0) if seq is None else seq
    errs = await produce_many(t.c, t.id, {(topic, partition): txn_batch(t.pid, t.epoch, s, vals)}, version=12)
    if errs[(topic, partition)] == 0:
        t.seq[(topic, partition)] = s + len(vals)
    return errs[(topic, partition)]


async def ready(c, txn_id: str) -> Txn:
    t = Txn(c, txn_id)
    assert await t.find() == 0 and await t.init() == 0
    return t


async def test_orphan_transactional_batch_refused(broker):
    """A transactional batch without a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED and appends
    nothing; read_committed LATEST then follows the HW. Before: appended (error 0), the LSO stuck at 0 for ever."""
    c = await connect(broker)
    await create_topic(c, "orphan")
    t = await ready(c, "orphan-txn")
    msgs: dict = {}
    errs = await produce_many(c, None, {("orphan", 0): txn_batch(t.pid, t.epoch, 0, [b"x"])}, messages=msgs)
    assert errs == {("orphan", 0): E.TransactionalIdAuthorizationFailedError.errno}
    assert msgs == {("orphan", 0): None}                 # Kafka 4.4.0: no message
    with pytest.raises(ConnectionClosedError):           # acks=0: no answer, the connection is closed
        await produce(c, "orphan", txn_batch(t.pid, t.epoch, 0, [b"x"]), acks=0)
        await c.api_versions()
    c = await connect(broker)
    assert (await produce(c, "orphan", batch([b"plain"]))).error_code == 0
    p = await fetch(c, "orphan")
    assert values(p) == [b"plain"] and p.high_watermark == 1
    assert await latest(c, "orphan", 1) == p.last_stable_offset == p.high_watermark == 1


async def test_two_transactional_producers_in_one_request_refused(broker):
    """Transactional batches of two producer ids in one Produce: INVALID_PRODUCER_ID_MAPPING for every partition,
    nothing appended. Before: both appended."""
    c = await connect(broker)
    await create_topic(c, "two", partitions=2)
    a, b = await ready(c, "two-a"), await ready(c, "two-b")
    assert await a.add("two", 0) == 0 and await b.add("two", 1) == 0
    msgs: dict = {}
    errs = await produce_many(c, a.id, {("two", 0): txn_batch(a.pid, a.epoch, 0, [b"a"]),
                                        ("two", 1): txn_batch(b.pid, b.epoch, 0, [b"b"])}, messages=msgs)
    bad = E.InvalidProducerIdMappingError.errno
    assert errs == {("two", 0): bad, ("two", 1): bad}
    assert set(msgs.values()) == {"Transactional records contained more than one producer ID"}   # Kafka 4.4.0's
    for i in (0, 1):
        assert (await fetch(c, "two", partition=i, isolation=0)).high_watermark == 0


async def test_plain_batch_during_open_transaction_refused(broker):
    """A non-transactional batch of a producer whose transaction is open in the partition is INVALID_TXN_STATE.
    Before: appended inside the transaction."""
    c = await connect(broker)
    await create_topic(c, "mixed")
    t = await ready(c, "mixed-txn")
    assert await t.add("mixed", 0) == 0
    assert (await t.produce("mixed", 0, [b"t"])).error_code == 0
    pr = await produce(c, "mixed", idempotent_batch(t.pid, t.epoch, 1, [b"plain"]))
    assert pr.error_code == E.InvalidTxnStateError.errno
    assert (await fetch(c, "mixed", isolation=0)).high_watermark == 1
    assert await t.end(True) == 0
    await wait_state(c, "mixed-txn", "CompleteCommit")
    assert values(await fetch(c, "mixed")) == [b"t"]


async def test_tv2_marker_with_current_epoch_refused_while_open(broker):
    """TV2: a marker with the producer's current epoch while its transaction is open is INVALID_PRODUCER_EPOCH
    (a duplicate of the previous transaction's marker must not complete this one); the same marker with no
    transaction open is accepted (a retry); a v1 marker with that epoch completes it (the classic rule: only an
    older epoch is refused). Before: the v2 marker completed the open transaction."""
    c = await connect(broker)
    await create_topic(c, "mk")
    t = await ready(c, "mk-txn")
    assert await produce_v12(t, "mk", [b"t1"]) == 0
    assert await end_tv2(t, True) == 0                   # epoch e -> e + 1, the COMMIT marker carries e + 1
    await wait_state(c, "mk-txn", "CompleteCommit")
    assert await produce_v12(t, "mk", [b"t2"]) == 0     # T2 opens at e + 1
    first = (await fetch(c, "mk")).last_stable_offset
    assert await marker(c, t.pid, t.epoch, True, "mk") == E.InvalidProducerEpochError.errno
    p = await fetch(c, "mk")
    assert p.last_stable_offset == first and values(p) == [b"t1"]
    assert await marker(c, t.pid, t.epoch - 1, True, "mk", version=1) == E.InvalidProducerEpochError.errno
    assert await marker(c, t.pid, t.epoch, False, "mk", version=2, tv=1) == 0    # v2 saying TV1: classic rule
    p = await fetch(c, "mk")
    assert p.last_stable_offset == p.high_watermark and values(p) == [b"t1"]     # T2 aborted by it
    assert await marker(c, t.pid, t.epoch, False, "mk") == 0   # nothing open: an idempotent retry, accepted
    assert await marker(c, t.pid, t.epoch + 1, True, "mk") == 0


async def test_lso_not_below_log_start(broker):
    """DeleteRecords past an open transaction's first offset: Fetch's last_stable_offset and read_committed
    ListOffsets LATEST are the log start. Before: the transaction's first offset, below the log start."""
    c = await connect(broker)
    await create_topic(c, "lsod")
    assert (await produce(c, "lsod", batch([b"p0", b"p1"]))).error_code == 0
    t = await ready(c, "lsod-txn")
    assert await t.add("lsod", 0) == 0
    assert (await t.produce("lsod", 0, [b"a1", b"a2"])).base_offset == 2
    assert (await produce(c, "lsod", batch([b"p2"]))).error_code == 0
    r = await delete_records(c, "lsod", 4)
    assert r.error_code == 0 and r.low_watermark == 4
    p = await fetch(c, "lsod", offset=4)
    assert p.error_code == 0 and p.log_start_offset == 4 and p.high_watermark == 5
    assert p.last_stable_offset == 4 and await latest(c, "lsod", 1) == 4
    assert await t.end(True) == 0
    await wait_state(c, "lsod-txn", "CompleteCommit")
    p = await fetch(c, "lsod", offset=4)
    assert p.last_stable_offset == p.high_watermark == 6 and await latest(c, "lsod", 1) == 6


async def test_aborted_index_only_where_the_transaction_wrote(broker):
    """A transaction adds two partitions, writes one, aborts: the other partition's read_committed Fetch lists no
    aborted transaction (its ABORT marker alone is not indexed); the written one lists it. Before: both listed."""
    c = await connect(broker)
    await create_topic(c, "ab", partitions=2)
    assert (await produce(c, "ab", batch([b"b0"]), partition=1)).error_code == 0
    t = await ready(c, "ab-txn")
    assert await t.add("ab", 0) == 0 and await t.add("ab", 1) == 0
    first = (await t.produce("ab", 0, [b"x"])).base_offset
    assert await t.end(False) == 0
    await wait_state(c, "ab-txn", "CompleteAbort")
    assert (await produce(c, "ab", batch([b"b1"]), partition=1)).error_code == 0
    p1 = await fetch(c, "ab", partition=1)
    assert p1.high_watermark == 3 and p1.aborted_transactions == [] and values(p1) == [b"b0", b"b1"]
    p0 = await fetch(c, "ab", partition=0)
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [(t.pid, first)]


async def test_tv2_first_sequence_must_be_zero(broker):
    """TV2 (Produce v12): a first batch at sequence 5 where the producer has no state is OUT_OF_ORDER_SEQUENCE_NUMBER
    (Kafka 4.4.0, checked); at 0 it is appended. The classic protocol accepts sequence 5 there. Before: appended."""
    c = await connect(broker)
    await create_topic(c, "seq", partitions=2)
    t = await ready(c, "seq-tv2")
    assert await produce_v12(t, "seq", [b"five"], seq=5) == E.OutOfOrderSequenceNumberError.errno
    assert await produce_v12(t, "seq", [b"zero"]) == 0
    assert await end_tv2(t, True) == 0
    classic = await ready(c, "seq-tv1")
    assert await classic.add("seq", 1) == 0
    classic.seq[("seq", 1)] = 5
    assert (await classic.produce("seq", 1, [b"classic"])).error_code == 0
    assert await classic.end(True) == 0
    await wait_state(c, "seq-tv1", "CompleteCommit")
    await wait_state(c, "seq-tv2", "CompleteCommit")
    assert values(await fetch(c, "seq")) == [b"zero"]
    assert values(await fetch(c, "seq", partition=1)) == [b"classic"]


async def test_marker_of_an_older_coordinator_epoch_refused(broker):
    """A marker whose coordinator epoch is below the one of the producer's last marker here is
    TRANSACTION_COORDINATOR_FENCED and completes nothing; the coordinator's own abort then ends the transaction.
    Before: the coordinator epoch was not compared and the zombie's COMMIT made the open transaction visible."""
    c = await connect(broker)
    await create_topic(c, "zc")
    t = await ready(c, "zc-txn")
    assert await t.add("zc", 0) == 0
    assert (await t.produce("zc", 0, [b"t1"])).error_code == 0
    assert await t.end(True) == 0
    await wait_state(c, "zc-txn", "CompleteCommit")
    assert await t.add("zc", 0) == 0
    first = (await t.produce("zc", 0, [b"t2"])).base_offset
    assert await marker(c, t.pid, t.epoch, True, "zc", version=1, coordinator_epoch=-1) == \
        E.TransactionCoordinatorFencedError.errno
    p = await fetch(c, "zc")
    assert p.last_stable_offset == first and values(p) == [b"t1"]
    assert await t.end(False) == 0
    await wait_state(c, "zc-txn", "CompleteAbort")
    assert values(await fetch(c, "zc")) == [b"t1"]
