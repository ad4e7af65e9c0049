"""The records of the cluster metadata log (KRaft's ``__cluster_metadata``), as small JSON documents.

The metadata log is the only truth about the cluster: the controller appends these records, every broker applies
them in order to its :class:`~reference_broker.metadata.image.MetadataImage`, and a restarted controller rebuilds
its state by replaying them. Names follow Kafka's ``org.apache.kafka.common.metadata`` records; deliberate
difference (GAPS.md): JSON values in ordinary v2 record batches instead of Kafka's binary ApiMessage records.

| type            | Kafka record               | fields                                                              |
|-----------------|----------------------------|---------------------------------------------------------------------|
| register_broker | RegisterBrokerRecord       | broker_id, incarnation, host, port, repl_host, repl_port, rack, epoch |
| fence_broker    | BrokerRegistrationChange   | broker_id, epoch (fenced=1)                                          |
| unfence_broker  | BrokerRegistrationChange   | broker_id, epoch (fenced=-1)                                         |
| controlled_shutdown | BrokerRegistrationChange | broker_id, epoch (inControlledShutdown=1)                          |
| topic           | TopicRecord (+ConfigRecord)| name, topic_id, configs                                              |
| partition       | PartitionRecord            | topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch, elr, last_known_elr |
| partition_change| PartitionChangeRecord      | the same fields, the partition's whole new state                    |
| remove_topic    | RemoveTopicRecord          | topic_id                                                             |
| config          | ConfigRecord               | resource_type (2 topic, 4 broker), resource_name ("" = cluster default), name, value (None: removed) |
| feature_level   | FeatureLevelRecord         | name, level (0 removes the feature, as Kafka's level 0)              |
| leader_change   | LeaderChangeMessage (control) | leader_id, voters: a new Raft leader's first record; images skip it |

``elr`` / ``last_known_elr`` (KIP-966) are absent from records written before they existed and read as empty.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

METADATA_TOPIC = "__cluster_metadata"
NO_LEADER = -1

RECORD_TYPES = frozenset({"register_broker", "fence_broker", "unfence_broker", "controlled_shutdown", "topic",
                          "partition", "partition_change", "remove_topic", "config", "feature_level",
                          "leader_change"})


def encode_batch(records: list[dict], timestamp_ms: int) -> bytes:
    """One v2 record batch holding ``records`` (JSON values, no keys); offsets are assigned by the log."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, rec in enumerate(records):
        assert rec["type"] in RECORD_TYPES, rec
        b.append(i, timestamp=timestamp_ms, key=None, value=json.dumps(rec, sort_keys=True).encode(), headers=[])
    return bytes(b.build())


def decode_batches(data: bytes) -> Iterator[tuple[int, dict]]:
    """(offset, record) for every record in ``data`` (whole batches as a log read or a Fetch returns them)."""
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        for rec in batch:
            yield rec.offset, json.loads(rec.value)
