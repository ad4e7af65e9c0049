"""The reference client stack: asyncio, built on kafka-python 3's ``kafka.protocol`` and ``kafka.record``.

Layers (each usable alone):
- ``protocol.Connection`` — one TCP connection: any request at any version, decoded response + RTT (ns),
  pipelining, raw frames, close detection; ``negotiate_versions`` for ApiVersions.
- ``cluster.Cluster`` — bootstrap, Metadata, leader per partition, one negotiated connection per broker.
- ``producer.Producer`` — Java-compatible murmur2 partitioner, linger/size batching, acks, retries, idempotence.
- ``consumer.Consumer`` — assign/seek/position/poll with full control of the Fetch knobs.
- ``group.GroupConsumer`` — subscribe/poll/commit in a classic consumer group (assignors in ``assignors``).
- ``admin.Admin`` — create/delete topics, list offsets, delete records, describe.
- ``transactions.TransactionManager`` — the transactional producer's coordinator protocol (``Producer(...,
  transactional_id=...)``); read_committed consumption is ``Consumer(..., isolation_level=1)``.
Errors are ``kafka.errors`` classes (code -> class, ``retriable``, ``invalid_metadata``).
"""

from .admin import EARLIEST, LATEST, MAX_TIMESTAMP, Admin, NewTopic
from .assignors import RangeAssignor, RoundRobinAssignor
from .cluster import Cluster
from .consumer import Consumer
from .group import GroupConsumer
from .producer import Producer, murmur2, partition_for_key
from .protocol import (
    Connection,
    ConnectionClosedError,
    RawFrame,
    Response,
    encode_request,
    negotiate_versions,
)
from .transactions import ConsumerGroupMetadata, TxnState
from .types import (
    BrokerMetadata,
    ConsumerRecord,
    OffsetAndTimestamp,
    PartitionMetadata,
    RecordMetadata,
    TopicMetadata,
    TopicPartition,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "Admin",
    "BrokerMetadata",
    "Cluster",
    "Connection",
    "ConnectionClosedError",
    "Consumer",
    "GroupConsumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "Producer",
    "RangeAssignor",
    "RawFrame",
    "RecordMetadata",
    "RoundRobinAssignor",
    "Response",
    "TopicMetadata",
    "TopicPartition",
    "TxnState",
    "encode_request",
    "murmur2",
    "negotiate_versions",
    "partition_for_key",
]
