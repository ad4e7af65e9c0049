"""The follower side of replication (Kafka's AbstractFetcherThread and Partition on a follower), with a real
follower Partition and log in this process and, where the follower talks to a leader, a real broker process.

- The out-of-range handler asks the leader for its log end and log start (two round trips); when the replica
  became the leader meanwhile it must leave the log alone (issue 18 item 13).
- A follower's HW is min(leader HW, own LEO) on every fetch, so it goes down with the leader's (Kafka's
  UnifiedLog.maybeUpdateHighWatermark; issue 18 item 14).
- A follower that truncated fully to the leader's log start appends the leader's batch that holds that offset
  (issue 18 item 3).
"""
from __future__ import annotations

import asyncio
import uuid

import pytest

from reference_broker.client.protocol import Connection
from reference_broker.clock import Clock
from reference_broker.config import BrokerConfig
from reference_broker.log import batch as B
from reference_broker.log.memory import MemoryLog
from reference_broker.partition import Partition
from reference_broker.replica_fetcher import ReplicaFetcher

from ._wire import batch, connect, create_topic, delete_records, produce

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


class AfterAnswers:
    """A real connection that runs ``then`` once the ``n``-th answer has arrived, before the caller sees it: the
    metadata change lands exactly while the caller awaits that answer."""

    def __init__(self, conn: Connection, n: int, then) -> None:
        self.conn, self.n, self.then, self.seen = conn, n, then, 0

    async def request(self, req, version: int, timeout: float):
        resp = await self.conn.request(req, version, timeout=timeout)
        self.seen += 1
        if self.seen == self.n:
            self.then()
        return resp


@pytest.mark.parametrize("case", ["behind-log-start", "ahead-of-log-end"])
async def test_out_of_range_handler_leaves_a_replica_that_became_leader_alone(broker, case: str) -> None:
    """OFFSET_OUT_OF_RANGE: the handler asks the leader (a real broker) for its log end and, when needed, its log
    start — ListOffsets round trips. While the last answer it needs is on its way, the metadata makes this replica
    the leader. Kafka's fetcher only truncates a partition it still fetches in the same state; before the fix the
    handler truncated the new leader's log ("behind-log-start": emptied it; "ahead-of-log-end", one round trip
    since the fix: cut it to the old leader's end).
    - behind-log-start: the leader holds 0..14 with log start 12 (DeleteRecords), this replica 0..4;
    - ahead-of-log-end: the leader holds 0..2, this replica 0..9."""
    c = await connect(broker)
    await create_topic(c, "oor")
    if case == "behind-log-start":
        assert (await produce(c, "oor", batch([f"v{i}".encode() for i in range(15)]), acks=1)).error_code == 0
        assert (await delete_records(c, "oor", 12)).error_code == 0
        mine, answers = 5, 2
    else:
        assert (await produce(c, "oor", batch([b"a", b"b", b"c"]), acks=1)).error_code == 0
        mine, answers = 10, 1
    await c.close()
    p = follower("oor", follower_log(mine))
    fetcher = ReplicaFetcher(FOLLOWER, 0, lambda _b: ("127.0.0.1", broker.port), lambda: [p], BrokerConfig(), Clock())
    conn = await Connection.connect("127.0.0.1", broker.port, client_id=f"replica-{FOLLOWER}", timeout=5)
    try:
        flip = AfterAnswers(conn, answers, lambda: p.make_leader(1, [FOLLOWER], [0, FOLLOWER], 1, 0.0))
        await asyncio.wait_for(fetcher._handle_out_of_range(flip, p), 10)
    finally:
        await conn.close()
    assert flip.seen >= answers and p.is_leader
    assert (p.log.log_start_offset, p.log.log_end_offset) == (0, mine), (
        f"this replica became the leader (epoch 1) while the handler awaited the old leader's answers, yet its log "
        f"now spans {p.log.log_start_offset}..{p.log.log_end_offset} (was 0..{mine})")


def test_follower_hw_goes_down_with_the_leaders() -> None:
    """Kafka's follower sets HW = min(leader HW, own LEO) on each fetch, even when that is lower (a new leader's HW
    may lag the old one's); before the fix the follower kept the higher HW it had."""
    p = follower("hw", follower_log(10))
    p.append_as_follower(b"", 8, 0)
    assert p.hw == 8
    p.append_as_follower(b"", 5, 0)
    assert p.hw == 5, f"the leader reports HW 5; the follower keeps {p.hw}"
    p.append_as_follower(b"", 50, 0)
    assert p.hw == 10, "never above the follower's own log end"


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
