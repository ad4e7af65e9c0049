"""Small request builders for broker tests: real kafka.protocol messages and kafka.record batches."""
from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from reference_broker.client.protocol import Connection


def batch(values: list[bytes], key: bytes | None = None, timestamp: int = 1_700_000_000_000,
          compression: int = 0) -> bytes:
    """One record batch v2 holding ``values`` (built by kafka.record, never by hand)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=key, value=v, headers=[])
    return bytes(b.build())


async def connect(broker) -> Connection:
    c = await Connection.connect("127.0.0.1", broker.port)
    await c.api_versions()
    return c


async def create_topic(c: Connection, name: str, partitions: int = 1) -> None:
    T = CreateTopicsRequest.CreatableTopic
    r = await c.request(CreateTopicsRequest[7](topics=[T(name=name, num_partitions=partitions, replication_factor=1,
                                                         assignments=[], configs=[])],
                                               timeout_ms=5000, validate_only=False))
    assert r.body.topics[0].error_code == 0, r.body


async def delete_topic(c: Connection, name: str) -> int:
    r = await c.request(DeleteTopicsRequest[5](topic_names=[name], timeout_ms=5000))
    return r.body.responses[0].error_code


async def produce(c: Connection, topic: str, data: bytes, partition: int = 0, acks: int = -1, version: int = 9):
    """Returns the partition response (error_code, base_offset, ...)."""
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=data)])])
    r = await c.request(req)
    return None if r.body is None else r.body.responses[0].partition_responses[0]


def fetch_request(parts: list[tuple[str, int, int]], max_wait_ms: int, min_bytes: int, max_bytes: int = 50 << 20,
                  partition_max_bytes: int = 1 << 20, version: int = 12, isolation: int = 0):
    """Fetch for [(topic, partition, offset)], sessionless (session epoch -1)."""
    T = FetchRequest.FetchTopic
    by_topic: dict[str, list] = {}
    for topic, p, off in parts:
        by_topic.setdefault(topic, []).append(T.FetchPartition(partition=p, fetch_offset=off,
                                                               partition_max_bytes=partition_max_bytes,
                                                               current_leader_epoch=-1, last_fetched_epoch=-1,
                                                               log_start_offset=-1))
    return FetchRequest[version](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                                 isolation_level=isolation, session_id=0, session_epoch=-1,
                                 topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
                                 forgotten_topics_data=[], rack_id="")


def only_partition(fetch_response):
    (t,) = fetch_response.responses
    (p,) = t.partitions
    return p


async def list_offset(c: Connection, topic: str, ts: int, partition: int = 0):
    T = ListOffsetsRequest.ListOffsetsTopic
    r = await c.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                          timestamp=ts)])]))
    return r.body.topics[0].partitions[0]


async def delete_records(c: Connection, topic: str, offset: int, partition: int = 0):
    T = DeleteRecordsRequest.DeleteRecordsTopic
    r = await c.request(DeleteRecordsRequest[2](topics=[
        T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
        timeout_ms=5000))
    return r.body.topics[0].partitions[0]
