"""AlterPartition on the cluster's controller process, answered as Kafka's ReplicationControlManager answers it:
which error, in which order (validateAlterPartitionData), and STALE_BROKER_EPOCH for the whole request
(ClusterControlManager.checkBrokerEpoch). The requests are sent over the controller's listener as a leader sends
them; the broker epochs, topic id and partition state come from the controller's own metadata log, fetched as a
broker fetches it (issue 18 item 14)."""
from __future__ import annotations

import asyncio
import uuid

from kafka.protocol.consumer import FetchRequest
from kct_cluster_helpers import create_topic, move_leadership, partition_state, wait_for

from reference_broker.client.protocol import Connection
from reference_broker.controller.messages import AlterPartitionRequest
from reference_broker.metadata.image import Delta, MetadataImage
from reference_broker.metadata.records import METADATA_TOPIC, decode_batches

UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER, INVALID_REQUEST, FENCED_LEADER_EPOCH = 3, 41, 42, 74
STALE_BROKER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_ID, INELIGIBLE_REPLICA = 77, 95, 100, 107


async def metadata_image(port: int) -> MetadataImage:
    """The controller's committed metadata, replayed from its log as a broker replays it."""
    image = MetadataImage()
    T = FetchRequest.FetchTopic
    async with await Connection.connect("127.0.0.1", port, timeout=5) as c:
        while True:
            req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
                               session_id=0, session_epoch=-1, topics=[T(topic=METADATA_TOPIC, partitions=[
                                   T.FetchPartition(partition=0, current_leader_epoch=-1,
                                                    fetch_offset=image.offset + 1, last_fetched_epoch=-1,
                                                    log_start_offset=-1, partition_max_bytes=8 << 20)])],
                               forgotten_topics_data=[], rack_id="")
            pd = (await c.request(req, 12, timeout=10)).body.responses[0].partitions[0]
            if pd.error_code or not pd.records:
                return image
            delta = Delta()
            for offset, rec in decode_batches(bytes(pd.records)):
                image.apply(offset, rec, delta)


async def alter(port: int, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, index: int, leader_epoch: int,
                partition_epoch: int, new_isr: list[int]) -> tuple[int, int | None]:
    """(top-level error, partition error or None when the answer names no partition)."""
    T = AlterPartitionRequest.TopicData
    req = AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, topics=[T(topic_id=topic_id, partitions=[
        T.PartitionData(partition_index=index, leader_epoch=leader_epoch, new_isr=new_isr,
                        partition_epoch=partition_epoch)])])
    async with await Connection.connect("127.0.0.1", port, timeout=5) as c:
        resp = (await c.request(req, 0, timeout=10)).body
    parts = [p for t in resp.topics for p in t.partitions]
    return resp.error_code, (parts[0].error_code if parts else None)


def test_alter_partition_errors_in_kafkas_order(make_cluster) -> None:
    cluster = make_cluster()
    topic = "alter"
    create_topic(cluster.bootstrap, topic, 1, 3)
    move_leadership(cluster, topic, "pause")           # leader epoch 1, so an older epoch exists
    wait_for(lambda: partition_state(cluster.bootstrap, topic), lambda s: s[2] == [0, 1, 2], 30, "a full ISR")
    # The cases are answered against the partition state read first; if that state moved meanwhile (a broker whose
    # session lapsed on a loaded machine is fenced, an ISR change bumps the partition epoch), they ask other
    # questions: read again and ask again (final run of this stop: 5 cases answered for a moved state, alone: pass).
    for _attempt in range(3):
        image = asyncio.run(metadata_image(cluster.controller_port))
        st = image.partition(topic, 0)
        tid = image.topics[topic].topic_id
        leader, le, pe = st.leader, st.leader_epoch, st.partition_epoch
        other = next(r for r in st.replicas if r != leader)
        epoch = {b: image.brokers[b].epoch for b in st.replicas}
        assert le >= 1, st
        ok = (leader, epoch[leader], tid, 0, le, pe, list(st.isr))
        cases = [
            # (what, request, top-level error, partition error) — Kafka's order: each case would also fail a later
            # check, so the error shows which check comes first.
            ("stale broker epoch", (leader, epoch[leader] + 7, uuid.uuid4(), 9, le - 1, pe - 1, [9]),
             STALE_BROKER_EPOCH, None),
            ("unknown topic id", (leader, epoch[leader], uuid.uuid4(), 9, le - 1, pe, [9]), 0, UNKNOWN_TOPIC_ID),
            ("unknown partition", (leader, epoch[leader], tid, 9, le - 1, pe, [9]), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ("newer leader epoch, from a follower", (other, epoch[other], tid, 0, le + 1, pe, [9]), 0, NOT_CONTROLLER),
            ("newer partition epoch, from a follower", (other, epoch[other], tid, 0, le, pe + 1, [9]), 0,
             NOT_CONTROLLER),
            ("older leader epoch, from a follower", (other, epoch[other], tid, 0, le - 1, pe - 1, [9]), 0,
             FENCED_LEADER_EPOCH),
            ("not the leader", (other, epoch[other], tid, 0, le, pe - 1, [9]), 0, INVALID_REQUEST),
            ("older partition epoch", (leader, epoch[leader], tid, 0, le, pe - 1, [9]), 0, INVALID_UPDATE_VERSION),
            ("ISR with a non-replica", (leader, epoch[leader], tid, 0, le, pe, [leader, 9]), 0, INVALID_REQUEST),
            ("ISR with a duplicate", (leader, epoch[leader], tid, 0, le, pe, [leader, leader]), 0, INVALID_REQUEST),
            ("ISR without the leader", (leader, epoch[leader], tid, 0, le, pe, [other]), 0, INVALID_REQUEST),
            ("the current ISR (no change)", ok, 0, 0),
        ]
        got = {what: asyncio.run(alter(cluster.controller_port, *req)) for what, req, _t, _p in cases}
        after = asyncio.run(metadata_image(cluster.controller_port))
        st_after = after.partition(topic, 0)
        moved = ((st_after.leader, st_after.leader_epoch, st_after.partition_epoch, list(st_after.isr))
                 != (leader, le, pe, list(st.isr))) or any(after.brokers[b].epoch != epoch[b] for b in st.replicas)
        if not moved:
            break
    want = {what: (top, part) for what, _r, top, part in cases}
    # A fenced broker cannot be (or stay) in the ISR: stop `other` until the controller fenced it (and removed it
    # from the ISR), then propose it back.
    others = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in cluster.broker_ids if b != other)
    cluster.pause(other)
    try:
        wait_for(lambda: partition_state(others, topic), lambda s: other not in s[2], 30, f"{other} fenced")
        st2 = asyncio.run(metadata_image(cluster.controller_port)).partition(topic, 0)
        got["ISR with a fenced broker"] = asyncio.run(alter(cluster.controller_port, leader, epoch[leader], tid, 0,
                                                            st2.leader_epoch, st2.partition_epoch,
                                                            sorted({*st2.isr, other})))
        want["ISR with a fenced broker"] = (0, INELIGIBLE_REPLICA)
    finally:
        cluster.resume(other)
    wrong = {w: f"got {got[w]}, Kafka {want[w]}" for w in want if got[w] != want[w]}
    assert not wrong, f"AlterPartition (top-level error, partition error) per case: {wrong}"
