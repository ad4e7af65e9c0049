"""Replication liveness and safety on the reference cluster (issue 18), with real processes and real clients.

- A follower whose last leader epoch was one in which nothing was written (it led, then lost leadership before any
  write) truncates that epoch's cache entry away and catches up; acks=all keeps working with a full ISR
  (Kafka: UnifiedLog.truncateTo always truncates the epoch cache from the end).
- The leader records a follower's fetch position only when its fetch does not diverge (Partition.fetchRecords:
  updateFetchState && !divergingEpoch), so a diverging replica cannot move the HW over records it lacks.
- A follower that comes back behind the leader's log start (after DeleteRecords) truncates fully, starts at the
  leader's log start and rejoins the ISR (AbstractFetcherThread.fetchOffsetAndTruncate, truncateFullyAndStartAt).
"""
from __future__ import annotations

import asyncio
import time

from confluent_kafka import Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.record.memory_records import MemoryRecords
from kct_cluster_helpers import (
    admin,
    create_topic,
    leader_state,
    move_leadership,
    new_leader,
    partition_state,
    wait_for,
)

from reference_broker.client.protocol import Connection
from reference_broker.log.file import FileLog


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all", timeout_ms: int = 10_000) -> list:
    """Send ``values`` to partition 0; returns the delivery errors (empty: all acknowledged)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": timeout_ms})
    errors: list = []

    def done(err, _msg) -> None:
        if err is not None:
            errors.append(err)
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=done)
    left = p.flush(timeout_ms / 1000 + 5)
    return errors + ([f"{left} not delivered"] if left else [])


async def _call(port: int, req, version: int):
    async with await Connection.connect("127.0.0.1", port, timeout=5) as c:
        return (await c.request(req, version, timeout=10)).body


def replica_fetch(topic: str, replica_id: int, fetch_offset: int, last_fetched_epoch: int, leader_epoch: int,
                  max_wait_ms: int = 0) -> FetchRequest:
    """A Fetch v12 as follower ``replica_id`` sends it (what ReplicaFetcherThread sends)."""
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[
                            T.FetchPartition(partition=0, current_leader_epoch=leader_epoch,
                                             fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                                             log_start_offset=-1, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")


def consumer_hw(cluster, node: int, topic: str) -> int:
    """The HW the leader ``node`` reports to a consumer (a Fetch at offset 0 that answers at once)."""
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=0, session_id=0,
                       session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1)])], forgotten_topics_data=[], rack_id="")
    pd = asyncio.run(_call(cluster.ports[node], req, 12)).responses[0].partitions[0]
    assert pd.error_code == 0, pd
    return pd.high_watermark


def test_diverging_follower_fetch_does_not_move_the_hw(make_cluster) -> None:
    """Issue 18 item 2. An in-sync follower is stopped while the leader appends with acks=1, so it holds the HW.
    A fetch in its name that diverges (last fetched epoch 0, which ended at offset 0 on this leader, at the
    leader's log end) is answered with the diverging epoch and must not be taken as its position: Kafka records a
    follower's fetch state only without a diverging epoch (Partition.fetchRecords). Before the fix the HW jumped
    over two records the follower does not have."""
    cluster = make_cluster()
    topic = "diverging"
    create_topic(cluster.bootstrap, topic, 1, 3)
    _old, leader = move_leadership(cluster, topic, "pause")      # epoch 1 starts at 0: epoch 0 ends at 0 here
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30, "a full ISR")
    assert produce(cluster.bootstrap, topic, [b"x0", b"x1", b"x2"]) == []
    _, replicas, _ = partition_state(cluster.bootstrap, topic)
    lagging = next(r for r in replicas if r != leader)
    cluster.pause(lagging)
    try:
        assert produce(f"127.0.0.1:{cluster.ports[leader]}", topic, [b"y0", b"y1"], acks="1") == []
        time.sleep(0.5)            # the running follower fetches 3..4; the stopped one stays at 3
        assert consumer_hw(cluster, leader, topic) == 3, "the stopped in-sync follower holds the HW at 3"
        r = asyncio.run(_call(cluster.ports[leader], replica_fetch(topic, lagging, 5, 0, -1), 12))
        pd = r.responses[0].partitions[0]
        assert pd.error_code == 0 and pd.diverging_epoch is not None, pd
        assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 0), pd.diverging_epoch
        time.sleep(0.3)
        hw = consumer_hw(cluster, leader, topic)
        assert hw == 3, (f"a diverging fetch in follower {lagging}'s name at offset 5 moved the HW to {hw}: the "
                         "leader took it as the follower's position, over records 3..4 it never fetched")
    finally:
        cluster.resume(lagging)


def test_follower_rejoins_after_a_leader_epoch_with_no_writes(make_cluster) -> None:
    """Issue 18 item 1. Records, then two leaders in a row lose leadership before any write in their epoch (paused
    past the session timeout, so no restart rebuilds anything): the second comes back with an epoch-cache entry at
    its log end for an epoch the new leader never had. Kafka truncates it away on the diverging fetch (truncateTo
    at the log end still truncates the cache); before the fix the follower spun on the diverging epoch: with a lag
    time longer than the test it stayed in the ISR and acks=all writes timed out."""
    cluster = make_cluster(**{"replica.lag.time.max.ms": "20000"})
    topic = "empty-epoch"
    create_topic(cluster.bootstrap, topic, 1, 3, **{"min.insync.replicas": "2"})
    assert produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(10)]) == []
    first, second = move_leadership(cluster, topic, "pause")
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30,
             f"broker {first} back in the ISR")
    # `second` leads an epoch in which nothing is written; it loses it the same way.
    again, third = move_leadership(cluster, topic, "pause")
    assert again == second
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30,
             f"broker {second} back in the ISR")
    t0 = time.monotonic()
    errors = produce(cluster.bootstrap, topic, [f"b{i}".encode() for i in range(5)], timeout_ms=8000)
    took = time.monotonic() - t0
    state = partition_state(cluster.bootstrap, topic)
    assert not errors, (f"acks=all with ISR {state[2]} failed after {took:.1f} s: {errors[:3]}; broker {second} "
                        "is in the ISR but does not replicate (stuck on its empty epoch)")
    # Every replica holds the new records: the HW reached the end with the full ISR.
    leader = state[0]
    hw, _ = wait_for(lambda: consumer_hw(cluster, leader, topic), lambda h: h == 15, 10, "the HW at 15")
    assert state[2] == [0, 1, 2] and hw == 15, (state, hw)

def test_follower_rejoins_after_restart_behind_an_empty_epoch(make_cluster) -> None:
    """Issue 18 item 1, with kill -9 and restart (the symptom as first reported): the restarted leader of an empty
    epoch loads its epoch cache without the entry at its log end (Kafka's LogLoader truncates the cache from the
    end on load) and rejoins; acks=all works with the full ISR."""
    cluster = make_cluster(**{"replica.lag.time.max.ms": "20000"})
    topic = "empty-epoch-restart"
    create_topic(cluster.bootstrap, topic, 1, 3, **{"min.insync.replicas": "2"})
    assert produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(10)]) == []
    first, second = move_leadership(cluster, topic, "kill")
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30,
             f"broker {first} back in the ISR")
    again, _third = move_leadership(cluster, topic, "kill")
    assert again == second
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30,
             f"broker {second} back in the ISR")
    errors = produce(cluster.bootstrap, topic, [f"b{i}".encode() for i in range(5)], timeout_ms=8000)
    state = partition_state(cluster.bootstrap, topic)
    assert not errors, f"acks=all with ISR {state[2]} failed: {errors[:3]}"
    hw, _ = wait_for(lambda: consumer_hw(cluster, state[0], topic), lambda h: h == 15, 10, "the HW at 15")
    assert hw == 15


def test_fetch_with_an_unknown_last_fetched_epoch_is_out_of_range(make_cluster) -> None:
    """Issue 18 item 14. A fetch whose last fetched epoch is above every epoch the leader knows cannot be placed
    in its log: Kafka answers OFFSET_OUT_OF_RANGE (Partition.readRecords: UNDEFINED epoch end offset), for a
    follower and for a consumer alike; before the fix a follower got the diverging epoch (-1, -1) and a consumer
    got records."""
    cluster = make_cluster()
    topic = "unknown-epoch"
    create_topic(cluster.bootstrap, topic, 1, 3)
    assert produce(cluster.bootstrap, topic, [b"x0", b"x1", b"x2"]) == []
    leader, replicas, _ = partition_state(cluster.bootstrap, topic)
    follower = next(r for r in replicas if r != leader)
    for who in (follower, -1):
        pd = asyncio.run(_call(cluster.ports[leader], replica_fetch(topic, who, 3 if who >= 0 else 0, 7, 0),
                               12)).responses[0].partitions[0]
        div = None if pd.diverging_epoch is None else (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset)
        assert pd.error_code == 1, (
            f"{'follower ' + str(who) if who >= 0 else 'a consumer'} fetching with last fetched epoch 7 (the "
            f"leader knows epoch 0 only): error {pd.error_code}, diverging epoch {div}, {len(pd.records or b'')} "
            "record bytes; Kafka: OFFSET_OUT_OF_RANGE (1)")


def test_follower_behind_the_leaders_log_start_rejoins(make_cluster, tmp_path) -> None:
    """Issue 18 item 3. A follower is down while records are written and DeleteRecords moves the leader's log
    start past the follower's log end. Back, its fetch is OFFSET_OUT_OF_RANGE; Kafka truncates its log fully and
    starts at the leader's log start (AbstractFetcherThread.fetchOffsetAndTruncate → truncateFullyAndStartAt),
    so it catches up and rejoins the ISR with the leader's log start. Before the fix it capped the new start at its
    own log end, set its HW above its log end and looped on OFFSET_OUT_OF_RANGE, never rejoining."""
    cluster = make_cluster()
    topic = "behind"
    create_topic(cluster.bootstrap, topic, 1, 3, **{"min.insync.replicas": "2"})
    assert produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(5)]) == []
    leader, replicas, _ = partition_state(cluster.bootstrap, topic)
    behind = next(r for r in replicas if r != leader)
    others = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in cluster.broker_ids if b != behind)
    cluster.kill(behind)
    wait_for(lambda: partition_state(others, topic), lambda s: behind not in s[2], 30, f"{behind} out of the ISR")
    assert produce(others, topic, [f"b{i}".encode() for i in range(10)]) == []       # 5..14 without `behind`
    a = admin(others)
    (fut,) = a.delete_records([TopicPartition(topic, 0, 12)]).values()
    assert fut.result(30).low_watermark == 12, "DeleteRecords: low watermark 12"
    cluster.restart(behind)
    (_, _, isr), waited = wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: behind in s[2], 20,
                                   f"broker {behind} (log end 5, leader's log start 12) back in the ISR")
    assert produce(cluster.bootstrap, topic, [b"c0"]) == [], f"acks=all with ISR {isr}"
    time.sleep(1.0)                                  # the followers fetch the last HW
    cluster.stop()
    log = FileLog(tmp_path / "data" / f"broker-{behind}" / f"{topic}-0")
    try:
        start, end = log.log_start_offset, log.log_end_offset
        data = log.read(start, 1 << 20, end, True).data
    finally:
        log.close()
    records, got = MemoryRecords(data), []
    while (b := records.next_batch()) is not None:
        got += [(r.offset, r.value) for r in b if r.offset >= start]
    assert (start, end) == (12, 16), f"broker {behind}'s log spans {start}..{end}; the leader's is 12..16"
    assert got == [(12, b"b7"), (13, b"b8"), (14, b"b9"), (15, b"c0")], got
    print(f"broker {behind} rejoined {waited:.1f} s after its restart")


def test_list_offsets_not_available_while_a_new_leaders_hw_lags_its_epoch_start(make_cluster) -> None:
    """Issue 18 item 7. Records 10 and 11 are on the leader and one follower only (the other follower is stopped,
    so the HW stays 10); the leader is killed; the follower that has them leads a new epoch starting at 12 with
    HW 10, held there (its ISR is below min.insync.replicas=2 until the stopped follower returns). Kafka answers a
    consumer's ListOffsets LATEST with OFFSET_NOT_AVAILABLE until the HW reaches the epoch start
    (Partition.fetchOffsetForTimestamp), so a consumer never sees the end offset go back from what the old leader
    said; before the fix the new leader answered 10."""
    cluster = make_cluster(**{"min.insync.replicas": "2"})
    topic = "not-available"
    create_topic(cluster.bootstrap, topic, 1, 3)
    assert produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(10)]) == []
    leader, replicas, _ = partition_state(cluster.bootstrap, topic)
    heir, stopped = [r for r in replicas if r != leader]
    cluster.pause(stopped)
    try:
        assert produce(f"127.0.0.1:{cluster.ports[leader]}", topic, [b"b0", b"b1"], acks="1") == []
        time.sleep(0.5)                              # `heir` fetches 10..11; the HW stays 10
        before = leader_state(cluster, topic, leader)
        cluster.kill(leader)
        new = new_leader(cluster, topic, before, down={leader, stopped}).leader
        assert new == heir, f"{heir} (the only live replica in the ISR) must lead after {leader} was killed: {new}"
        got = asyncio.run(list_latest(cluster.ports[heir], topic))
        assert got[0] == 78, (f"ListOffsets LATEST on the new leader {heir} (epoch start 12, HW 10): error {got[0]}, "
                              f"offset {got[1]}; Kafka: OFFSET_NOT_AVAILABLE (78)")
    finally:
        cluster.resume(stopped)
    (err, latest), _ = wait_for(lambda: asyncio.run(list_latest(cluster.ports[heir], topic)),
                                lambda r: r == (0, 12), 30, "LATEST 12 once the stopped follower is back")
    assert (err, latest) == (0, 12)


async def list_latest(port: int, topic: str) -> tuple[int, int]:
    """(error, offset) of a consumer's ListOffsets v7 LATEST for partition 0."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    pd = (await _call(port, req, 7)).topics[0].partitions[0]
    return pd.error_code, pd.offset


def test_idle_stopped_follower_stays_in_the_isr_until_records_arrive(make_cluster) -> None:
    """Issue 18 item 8. A follower at the leader's log end is caught up however long ago it fetched
    (ReplicaState.isCaughtUp: leaderEndOffset == logEndOffset): stopped while nothing is written, it stays in the
    ISR past replica.lag.time.max.ms (until the controller fences it, broker.session.timeout.ms); the first record
    written then puts it behind, and it leaves within the lag check. Before the fix it left after the lag time,
    records or not."""
    cluster = make_cluster(**{"replica.lag.time.max.ms": "1500", "broker.session.timeout.ms": "15000"})
    topic = "idle"
    create_topic(cluster.bootstrap, topic, 1, 3)
    assert produce(cluster.bootstrap, topic, [b"x0", b"x1", b"x2"]) == []
    leader, replicas, _ = partition_state(cluster.bootstrap, topic)
    idle = next(r for r in replicas if r != leader)
    at_leader = f"127.0.0.1:{cluster.ports[leader]}"
    time.sleep(1.0)                                    # every follower has fetched at the log end (3)
    cluster.pause(idle)
    try:
        time.sleep(4.0)                                # > 1.5 x lag + slack, < the session timeout
        _, _, isr = partition_state(at_leader, topic)
        assert idle in isr, (f"follower {idle}, stopped at the leader's log end with nothing written since, left "
                             f"the ISR {isr} after the lag time; Kafka keeps it (caught up: at the log end)")
        assert produce(at_leader, topic, [b"y0"], acks="1") == []
        (_, _, isr), waited = wait_for(lambda: partition_state(at_leader, topic), lambda s: idle not in s[2], 6,
                                       f"{idle} out of the ISR once a record is written")
        assert waited <= 1.5 * 1.5 + 2, waited
    finally:
        cluster.resume(idle)
