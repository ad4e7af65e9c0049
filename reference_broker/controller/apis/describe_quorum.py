"""DescribeQuorum (key 55), v0–v2, on the controller listener (KIP-595, KIP-836 timestamps, KIP-853 nodes).

Behavior (KafkaRaftClient.handleDescribeQuorumRequest): only the Raft leader describes the quorum; another
controller answers NOT_LEADER_OR_FOLLOWER for ``__cluster_metadata``-0, with the leader and epoch it knows. The
leader lists the voters (itself first, its fetch and caught-up timestamps now, as Kafka reports them) and the observers (the brokers fetching the metadata), each with its last known log
end offset (its last fetch offset), last fetch and last caught-up wall times, the high watermark and the leader
epoch; v2 adds every voter's CONTROLLER listener. A single controller (no controller.quorum.voters) is no quorum:
it answers with leader -1 and no voters (GAPS.md; the reference cluster names that controller -1), so whoever asks
"which node is the active controller" gets no node, as before DescribeQuorum was served.

error_message (v2): "" where there is no error, the top level's and the partition's, as Kafka's generated
DescribeQuorumResponseData leaves a string field with no default (DescribeQuorumResponse.singletonResponse, and
getPartitionLevelErrorResponse for the top level of a not-leader answer); the differential mode showed the
reference's null against Kafka 4.4.0's "".
"""
from __future__ import annotations

import uuid

from kafka import errors as E
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from ...metadata.records import METADATA_TOPIC
from ...raft.quorum_state import LeaderState
from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 55
VERSIONS = (0, 2)

R = DescribeQuorumResponse
T = R.TopicData
P = T.PartitionData
ZERO = uuid.UUID(int=0)
NO_MESSAGE = ""     # a nullable string field without a default in Kafka's schema: "" unless set


def _replica(replica_id: int, leo: int, fetch: int, caught: int) -> P.ReplicaState:
    return P.ReplicaState(replica_id=replica_id, replica_directory_id=ZERO, log_end_offset=leo,
                          last_fetch_timestamp=fetch, last_caught_up_timestamp=caught)


def describe(node) -> DescribeQuorumResponse:
    """The answer of controller service ``node`` (shared with the brokers' forwarding path in tests)."""
    c = node.controller
    raft = node.raft
    me = node.config["node.id"]
    now = node.clock.wall_ms()
    if raft is None:    # a single controller is no quorum: described leaderless, as "the controller" (-1)
        observers = [_replica(b, off, -1, -1) for b, off in sorted(c.applied_by.items())]
        part = P(partition_index=0, error_code=0, error_message=NO_MESSAGE, leader_id=-1, leader_epoch=-1,
                 high_watermark=c.log.log_end_offset, current_voters=[], observers=observers)
        return R(error_code=0, error_message=NO_MESSAGE, topics=[T(topic_name=METADATA_TOPIC, partitions=[part])],
                 nodes=[])
    client = raft.client
    st = client.state
    if not isinstance(st, LeaderState):
        part = P(partition_index=0, error_code=E.NotLeaderForPartitionError.errno,
                 error_message="This controller is not the quorum's leader",
                 leader_id=-1 if client.leader_id() is None else client.leader_id(), leader_epoch=client.epoch,
                 high_watermark=-1, current_voters=[], observers=[])
        return R(error_code=0, error_message=NO_MESSAGE, topics=[T(topic_name=METADATA_TOPIC, partitions=[part])],
                 nodes=[])
    voters = [_replica(me, client.log.end_offset(), now, now)]
    for v in sorted(st.replicas):
        prog = st.replicas[v]
        _off, fetch, caught = raft.fetches.get(v, (-1, -1, -1))
        voters.append(_replica(v, prog.end_offset if prog.last_fetch_ms is not None else -1, fetch, caught))
    observers = [_replica(b, off, fetch, caught) for b, (off, fetch, caught) in sorted(raft.fetches.items())
                 if b not in raft.voters]
    if c.faults is not None and c.faults.on("describe_quorum.no_observers"):
        observers = []
    part = P(partition_index=0, error_code=0, error_message=NO_MESSAGE, leader_id=me, leader_epoch=client.epoch,
             high_watermark=client.high_watermark, current_voters=voters, observers=observers)
    nodes = [R.Node(node_id=v, listeners=[R.Node.Listener(name="CONTROLLER", host=addr[0], port=addr[1])])
             for v, addr in sorted(raft.voters.items())]
    return R(error_code=0, error_message=NO_MESSAGE, topics=[T(topic_name=METADATA_TOPIC, partitions=[part])], nodes=nodes)


@CONTROLLER.handles(DescribeQuorumRequest, DescribeQuorumResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    topics = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if topics != [(METADATA_TOPIC, 0)]:
        return R(error_code=E.InvalidRequestError.errno, error_message="only __cluster_metadata-0 has a quorum",
                 topics=[], nodes=[])
    return describe(ctx.node)
