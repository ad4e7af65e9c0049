"""Fetch (key 1), v4–v16.

Behavior (Apache Kafka ``ReplicaManager.fetchMessages`` + ``DelayedFetch``): this module decodes the request into
``FetchParams`` and encodes the answer; what to read, whether to park and when to complete is decided in one place,
``ReplicaManager.fetch_messages`` (reference_broker/replica_manager.py), which reads through
``Partition.fetch_records``.
- Answer at once when max_wait_ms <= 0, the request names no partitions, the bytes read already reach
  min_bytes, or any partition read failed; otherwise park (reference_broker/purgatory.py) and complete early on
  DelayedFetch cases A–H — in particular Case G, once the record bytes between each fetch offset and its readable
  end (HW for consumers, LEO for followers), each capped by partition_max_bytes, sum to >= min_bytes — else at
  max_wait. A completed parked fetch reads again, so it returns what is readable at completion.
- Reads: fetch offset below the log start offset or above the LEO is OFFSET_OUT_OF_RANGE (hw/lso/log start -1, as
  Kafka's createLogReadResult(e)); between the HW and the LEO the partition answers empty, no error.
- Size: at most min(max_bytes, fetch.max.bytes) in all and partition_max_bytes per partition, whole batches only;
  until some partition has returned data the first batch is returned whole even when larger (KIP-74). Kafka may
  cut a partition's last batch at the limit; we never do (GAPS.md).
- read_committed (isolation_level 1) reads to the last stable offset (the first offset of the earliest open
  transaction, the HW when none; never above it) and answers the aborted transactions overlapping the records
  returned (producer id, first offset; Kafka's LocalLog.addAbortedTransactions), [] when none; read_uncommitted
  answers null. A parked read_committed fetch completes when the LSO moves (a marker, or the HW passing one).
- Fetch sessions (KIP-227) are not kept: every answer has session_id 0 (sessionless), which clients must accept;
  an incremental fetch (epoch > 0) gets FETCH_SESSION_ID_NOT_FOUND (GAPS.md).
- v13+ name topics by id (KIP-516): an unknown id is UNKNOWN_TOPIC_ID for its partitions, a known id's unknown
  partition UNKNOWN_TOPIC_OR_PARTITION. v15 moves the replica id into ReplicaState (KIP-903).
- Partitions this broker does not know at all (unknown topic or partition; v13+ unknown topic id) are answered by
  the handler, not read (KafkaApis.handleFetchRequest's ``erroneous``): they neither stop the others from parking
  nor count as a read error, and they come last in the answer, after every partition read, in request order;
  their ``aborted_transactions`` is [] (FetchResponse.partitionResponse leaves the schema default) where a read
  partition answers null, except a successful read_committed read, which answers its list.
- Only the leader serves reads (no KIP-392 follower fetching): elsewhere NOT_LEADER_OR_FOLLOWER. Only v16+ answers
  with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carry the current leader and its epoch (``current_leader``)
  and that leader's address (``node_endpoints``, KIP-951); v12-v15 leave the tagged field out (KafkaApis fills it
  for ``versionId >= 16`` only), and UNKNOWN_LEADER_EPOCH never carries it.
- Followers (replica_id >= 0) read to the LEO; v12+ answers diverging_epoch instead of records when their last
  fetched epoch does not match the leader's log (KIP-320), completing a parked fetch at once (DelayedFetch Case H).
  A follower's successful, non-diverging read records its fetch offset as its LEO, which moves the HW and the ISR
  (Partition.fetchRecords: updateFetchState && !divergingEpoch; not again for the read of a completed parked
  fetch). A replica id that is not a follower of the partition gets UNKNOWN_LEADER_EPOCH (with a current leader
  epoch) or NOT_LEADER_OR_FOLLOWER (Partition.followerReplicaOrThrow).
- KIP-320 leader epoch checks: an older current_leader_epoch is FENCED_LEADER_EPOCH, a newer one
  UNKNOWN_LEADER_EPOCH.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import FetchRequest, FetchResponse

from ..context import BrokerContext
from ..partition import FetchIsolation
from ..purgatory import FetchParams, FetchPartitionStatus
from ..registry import handles

API_KEY = 1
VERSIONS = (4, 16)

TopicResp = FetchResponse.FetchableTopicResponse
PartData = TopicResp.PartitionData


def _replica_id(req, version: int) -> int:
    if version >= 15:
        return req.replica_state.replica_id if req.replica_state is not None else -1
    return req.replica_id


def _isolation(req, replica_id: int) -> FetchIsolation:
    if replica_id >= 0:
        return FetchIsolation.LOG_END
    return FetchIsolation.TXN_COMMITTED if req.isolation_level == 1 else FetchIsolation.HIGH_WATERMARK


def _params(b, req, version: int) -> tuple[FetchParams, list[FetchPartitionStatus]]:
    """Decode the request: topics by name (v4–12) or id (v13+), each partition's offsets, epochs and limits. Returns
    the params of the partitions to read and, apart, those unknown to this broker (answered without a read)."""
    replica_id = _replica_id(req, version)
    statuses, unknown = [], []
    for t in req.topics:
        if version >= 13:
            topic = b.topics_by_id.get(t.topic_id)
            name, tid = (topic.name if topic else ""), t.topic_id
        else:
            name, tid = t.topic, None
        for fp in t.partitions:
            known = bool(name) and b.image.partition(name, fp.partition) is not None
            (statuses if known else unknown).append(FetchPartitionStatus(
                name, fp.partition, known, fp.fetch_offset, fp.partition_max_bytes, fp.current_leader_epoch,
                fp.last_fetched_epoch if version >= 12 else -1, topic_id=tid))
    return FetchParams(replica_id, req.max_wait_ms, req.min_bytes, min(req.max_bytes, b.config["fetch.max.bytes"]),
                       _isolation(req, replica_id), statuses), unknown


# KafkaApis.processResponseCallback: the errors whose v16+ answer names the current leader
CURRENT_LEADER_ERRORS = {E.NotLeaderForPartitionError.errno, E.FencedLeaderEpochError.errno}


def _unknown_error(st: FetchPartitionStatus) -> int:
    """An id that names no topic is UNKNOWN_TOPIC_ID; a known topic (by name or id) without that partition is
    UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleFetchRequest checks the resolved name first)."""
    return E.UnknownTopicIdError.errno if st.topic_id is not None and not st.topic else \
        E.UnknownTopicOrPartitionError.errno


def _response(params: FetchParams, reads, unknown: list[FetchPartitionStatus], version: int, b=None,
              session_id: int = 0) -> FetchResponse:
    """Encode the reads, then the unknown partitions (Kafka adds its ``erroneous`` map after the read ones and
    merges only consecutive partitions of one topic into a topic entry)."""
    entries = []
    endpoints = {}
    for r in reads:
        st, err = r.status, r.error
        extra = {}
        if r.diverging_epoch is not None:
            extra["diverging_epoch"] = PartData.EpochEndOffset(epoch=r.diverging_epoch[0],
                                                               end_offset=r.diverging_epoch[1])
        if version >= 16 and err in CURRENT_LEADER_ERRORS and b is not None:
            ps = b.image.partition(st.topic, st.partition_index)
            leader, epoch = (ps.leader, ps.leader_epoch) if ps is not None else (-1, -1)
            extra["current_leader"] = PartData.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            node = next((i for i in b.brokers() if i.broker_id == leader), None)
            if node is not None:
                endpoints[leader] = FetchResponse.NodeEndpoint(node_id=leader, host=node.host, port=node.port,
                                                               rack=node.rack)
        entries.append((st, PartData(
            partition_index=st.partition_index, error_code=err, high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            aborted_transactions=None if r.aborted is None else [
                PartData.AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in r.aborted],
            preferred_read_replica=-1, records=r.records, **extra)))
    for st in unknown:
        entries.append((st, PartData(partition_index=st.partition_index, error_code=_unknown_error(st),
                                     high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                                     aborted_transactions=[], preferred_read_replica=-1, records=b"")))
    topics: list = []
    for st, data in entries:
        if topics and (topics[-1].topic, topics[-1].topic_id) == (st.topic, st.topic_id):
            topics[-1].partitions.append(data)
        else:
            topics.append(TopicResp(topic=st.topic, topic_id=st.topic_id, partitions=[data]))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics,
                         node_endpoints=[endpoints[k] for k in sorted(endpoints)])


@handles(FetchRequest, FetchResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    if ctx.api_version >= 7 and req.session_epoch > 0:
        return FetchResponse(throttle_time_ms=0, error_code=E.FetchSessionIdNotFoundError.errno,
                             session_id=0, responses=[])
    params, unknown = _params(b, req, ctx.api_version)
    reads = await b.replicas.fetch_messages(params)
    return _response(params, reads, unknown, ctx.api_version, b)
