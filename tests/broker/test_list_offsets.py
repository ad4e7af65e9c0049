"""ListOffsets as Kafka's UnifiedLog.fetchOffsetByTimestamp answers it."""
from __future__ import annotations

from kafka import errors as E
from kafka.record.default_records import DefaultRecordBatchBuilder

from ._wire import batch, connect, create_topic, delete_records, list_offset, produce

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def batch_with_timestamps(timestamps: list[int]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"v%d" % i, headers=[])
    return bytes(b.build())


async def test_earliest_latest_and_timestamps(broker):
    c = await connect(broker)
    await create_topic(c, "lo")
    assert (await list_offset(c, "lo", EARLIEST)).offset == 0
    assert (await list_offset(c, "lo", LATEST)).offset == 0
    await produce(c, "lo", batch_with_timestamps([1000, 5000, 2000]))      # offsets 0..2, max at offset 1
    await produce(c, "lo", batch_with_timestamps([3000, 4000]))            # offsets 3..4
    latest = await list_offset(c, "lo", LATEST)
    assert (latest.offset, latest.timestamp) == (5, -1), "LATEST is the HW, timestamp -1"
    r = await list_offset(c, "lo", 2500)
    assert (r.offset, r.timestamp) == (1, 5000), "earliest offset whose timestamp >= 2500"
    r = await list_offset(c, "lo", 3500)
    assert (r.offset, r.timestamp) == (1, 5000)
    r = await list_offset(c, "lo", 5001)
    assert (r.offset, r.timestamp) == (-1, -1), "no such timestamp: offset -1"
    r = await list_offset(c, "lo", MAX_TIMESTAMP)
    assert (r.offset, r.timestamp) == (1, 5000), "KIP-734: the record holding the max timestamp"
    await delete_records(c, "lo", 3)
    assert (await list_offset(c, "lo", EARLIEST)).offset == 3
    r = await list_offset(c, "lo", 0)
    assert r.offset == 3 and r.timestamp == 3000, "records below the log start are gone"
    assert (await list_offset(c, "nope", LATEST)).error_code == E.UnknownTopicOrPartitionError.errno
    await c.close()


async def test_min_insync_replicas_above_the_replication_factor_is_capped(broker):
    """Partition.effectiveMinIsr (Kafka >= 3.7): min.insync.replicas=2 on a 1-replica topic counts as 1, so acks=all
    is appended and acknowledged (before issue 18 item 6 it was NOT_ENOUGH_REPLICAS, Kafka < 3.7's answer); an
    unknown topic config is refused."""
    from kafka.protocol.admin import CreateTopicsRequest
    c = await connect(broker)
    T = CreateTopicsRequest.CreatableTopic
    r = await c.request(CreateTopicsRequest[7](topics=[T(
        name="misr", num_partitions=1, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name="min.insync.replicas", value="2")])], timeout_ms=5000,
        validate_only=False))
    assert r.body.topics[0].error_code == 0
    acked = await produce(c, "misr", batch([b"x"]), acks=-1)
    assert (acked.error_code, acked.base_offset) == (0, 0), acked
    assert (await list_offset(c, "misr", LATEST)).offset == 1
    assert (await produce(c, "misr", batch([b"x"]), acks=1)).error_code == 0
    r = await c.request(CreateTopicsRequest[7](topics=[T(
        name="bad", num_partitions=1, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name="no.such.config", value="2")])], timeout_ms=5000,
        validate_only=False))
    assert r.body.topics[0].error_code == E.InvalidConfigurationError.errno
    await c.close()
