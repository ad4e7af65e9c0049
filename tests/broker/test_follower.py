"""The follower side of replication (Kafka's AbstractFetcherThread and Partition on a follower), with a real
follower Partition and log in this process and, where the follower talks to a leader, a real broker process.

- A follower that truncated fully to the leader's log start appends the leader's batch that holds that offset
  (issue 18 item 3).
"""
from __future__ import annotations

import uuid

from reference_broker.log import batch as B
from reference_broker.log.memory import MemoryLog
from reference_broker.partition import Partition

from ._wire import batch

FOLLOWER = 5


def follower_log(records: int, epoch: int = 0) -> MemoryLog:
    """A log holding ``records`` one-record batches 0.. written in leader epoch ``epoch``."""
    log = MemoryLog()
    data = bytearray()
    for i in range(records):
        b = bytearray(batch([f"r{i}".encode()]))
        B.stamp(b, 0, i, epoch)
        data += b
    log.append_replica(bytes(data))
    return log


def follower(topic: str, log: MemoryLog, leader: int = 0) -> Partition:
    return Partition(topic, 0, uuid.uuid4(), log, node_id=FOLLOWER, replicas=[leader, FOLLOWER], leader_id=leader,
                     leader_epoch=0, hw=0)


def test_follower_starting_inside_the_leaders_first_batch() -> None:
    """After truncating fully to the leader's log start 12, the leader serves the whole batch holding 12 (5..14):
    Kafka's follower restarts its empty log at the batch's base and keeps log start 12
    (doAppendRecordsToFollowerOrFutureReplica on UnexpectedAppendOffsetException); before, the append was refused
    as overlapping and the follower never caught up (issue 18 item 3)."""
    p = follower("mid", follower_log(5))
    p.truncate_fully_and_start_at(12)
    assert (p.log.log_start_offset, p.log.log_end_offset, p.hw) == (12, 12, 12)
    b = bytearray(batch([f"b{i}".encode() for i in range(10)]))
    B.stamp(b, 0, 5, 0)
    p.append_as_follower(bytes(b), 15, 12)
    assert (p.log.log_start_offset, p.log.log_end_offset, p.hw) == (12, 15, 15)
