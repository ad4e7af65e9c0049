"""Fetch (key 1), v4–v16.

Behavior (Apache Kafka ``ReplicaManager.fetchMessages`` + ``DelayedFetch``):
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
- read_committed reads to the last stable offset, which equals the HW (no transactions; GAPS.md).
- Fetch sessions (KIP-227) are not kept: every answer has session_id 0 (sessionless), which clients must accept;
  an incremental fetch (epoch > 0) gets FETCH_SESSION_ID_NOT_FOUND (GAPS.md).
- v13+ name topics by id (KIP-516): an unknown id is UNKNOWN_TOPIC_ID for its partitions. v15 moves the replica id
  into ReplicaState (KIP-903). v16 node endpoints (KIP-951) are sent empty (clients refresh metadata instead).
- Only the leader serves reads (no KIP-392 follower fetching): elsewhere NOT_LEADER_OR_FOLLOWER; with that error and
  FENCED/UNKNOWN_LEADER_EPOCH, v12+ answers carry the current leader and its epoch (``current_leader``).
- Followers (replica_id >= 0) read to the LEO; their fetch offset is recorded as their LEO, which moves the HW and
  the ISR (Partition.updateFollowerFetchState); v12+ answers diverging_epoch when their last fetched epoch does not
  match the leader's log (KIP-320), completing a parked fetch at once (DelayedFetch Case H).
- KIP-320 leader epoch checks: an older current_leader_epoch is FENCED_LEADER_EPOCH, a newer one
  UNKNOWN_LEADER_EPOCH.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import FetchRequest, FetchResponse

from .. import record_faults as RF
from ..partition import FetchIsolation
from ..purgatory import FetchPartitionStatus
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


def read_all(b, statuses: list[FetchPartitionStatus], max_bytes: int, isolation: FetchIsolation,
             oor_as_empty: bool = False, replica_id: int = -1, expired: bool = False):
    """ReplicaManager.readFromLocalLog: partitions in request order, shrinking byte budget, min-one until data.
    A follower's read first records its fetch offset as its LEO (updateFollowerFetchState) and gets the diverging
    epoch instead of records when its last fetched epoch disagrees with the leader's log (KIP-320).
    ``expired``: the read a parked fetch makes when max_wait passed (only the fetch.* fault switches care)."""
    faults = b.faults
    limit = max_bytes
    min_one = not faults.on("fetch.no_min_one")
    out = []
    for st in statuses:
        p = b.partition(st.topic, st.partition_index) if st.known else None
        if p is None:
            if not st.known or b.image.partition(st.topic, st.partition_index) is None:
                err = E.UnknownTopicIdError.errno if st.topic_id is not None else E.UnknownTopicOrPartitionError.errno
            else:
                err = E.NotLeaderForPartitionError.errno
            out.append((st, err, b"", -1, -1, -1, None))
            continue
        if replica_id >= 0 and p.is_leader and not p.check_leader_epoch(st.current_leader_epoch):
            if replica_id in p.replicas and 0 <= st.fetch_offset <= p.log.log_end_offset:
                b.replicas.record_follower_fetch(p, replica_id, st.fetch_offset)
            div = p.diverging_epoch(st.fetch_offset, st.last_fetched_epoch)
            if div is not None:
                out.append((st, 0, b"", p.hw, p.hw, p.log.log_start_offset, div))
                continue
        offset = st.fetch_offset
        if faults.on("fetch.serve_below_log_start") and offset < p.log.log_start_offset:
            offset = p.log.log_start_offset
        if expired and replica_id < 0 and faults.on("fetch.expired_at_leo_oor") and \
                offset == p.log.log_end_offset > p.log.log_start_offset:
            out.append((st, E.OffsetOutOfRangeError.errno, b"", -1, -1, -1, None))
            continue
        cap = limit if faults.on("fetch.ignore_partition_max_bytes") else min(st.partition_max_bytes, limit)
        info = p.read(offset, cap, isolation, min_one, st.current_leader_epoch)
        if info.error == E.OffsetOutOfRangeError.errno and oor_as_empty and offset > p.log.log_end_offset:
            out.append((st, 0, b"", p.hw, p.hw, p.log.log_start_offset, None))
            continue
        if info.error:
            out.append((st, info.error, b"", -1, -1, -1, None))
            continue
        if replica_id < 0 and b.faults.enabled & CLIENT_SWITCHES:     # clients suite switches only
            info = info._replace(records=_client_faults(b.faults, p, st, info.records, isolation, min_one))
        if info.records:
            min_one = False
            if not faults.on("fetch.max_bytes_per_partition"):
                limit = max(0, limit - len(info.records))
        out.append((st, 0, info.records, info.high_watermark, info.last_stable_offset, info.log_start_offset, None))
    return out


# -- clients suite fault switches (reference_broker/record_faults.py), kept apart from the read path ----------
CLIENT_SWITCHES = frozenset(("fetch.drop_headers", "fetch.swap_producer_batches", "fetch.compressed_base_is_last",
                             "fetch.mid_batch_next_batch"))


def _client_faults(faults, p, st, records: bytes, isolation: FetchIsolation, min_one: bool) -> bytes:
    if faults.on("fetch.mid_batch_next_batch"):
        records = RF.next_batch_for_mid_batch(records, st.fetch_offset, lambda off: p.read(
            off, st.partition_max_bytes, isolation, min_one, st.current_leader_epoch).records)
    if faults.on("fetch.drop_headers"):
        records = RF.drop_headers(records)
    if faults.on("fetch.swap_producer_batches"):
        records = RF.swap_producer_batches(records)
    if faults.on("fetch.compressed_base_is_last"):
        records = RF.compressed_base_is_last(records)
    return records


LEADERSHIP_ERRORS = {E.NotLeaderForPartitionError.errno, E.FencedLeaderEpochError.errno,
                     E.UnknownLeaderEpochError.errno}


def _response(reads, session_id: int = 0, image=None) -> FetchResponse:
    by_topic: dict[tuple, list] = {}
    for st, err, records, hw, lso, lstart, div in reads:
        extra = {}
        if div is not None:
            extra["diverging_epoch"] = PartData.EpochEndOffset(epoch=div[0], end_offset=div[1])
        if err in LEADERSHIP_ERRORS and image is not None:
            # v12+ current-leader hint (KIP-951 carries it further): who leads now, at which epoch.
            ps = image.partition(st.topic, st.partition_index)
            if ps is not None:
                extra["current_leader"] = PartData.LeaderIdAndEpoch(leader_id=ps.leader, leader_epoch=ps.leader_epoch)
        by_topic.setdefault((st.topic, st.topic_id), []).append(PartData(
            partition_index=st.partition_index, error_code=err, high_watermark=hw, last_stable_offset=lso,
            log_start_offset=lstart, aborted_transactions=None, preferred_read_replica=-1, records=records,
            **extra))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id,
                         responses=[TopicResp(topic=t, topic_id=tid, partitions=ps)
                                    for (t, tid), ps in by_topic.items()], node_endpoints=[])


@handles(FetchRequest, FetchResponse, VERSIONS)
async def handle(ctx, req):
    b = ctx.broker
    if ctx.api_version >= 7 and req.session_epoch > 0:
        return FetchResponse(throttle_time_ms=0, error_code=E.FetchSessionIdNotFoundError.errno,
                             session_id=0, responses=[])
    replica_id = _replica_id(req, ctx.api_version)
    isolation = _isolation(req, replica_id)
    if b.faults.on("fetch.read_past_hw") and isolation != FetchIsolation.LOG_END:
        isolation = FetchIsolation.LOG_END
    statuses = []
    for t in req.topics:
        if ctx.api_version >= 13:
            topic = b.topics_by_id.get(t.topic_id)
            name, tid = (topic.name if topic else ""), t.topic_id
        else:
            name, tid = t.topic, None
        for fp in t.partitions:
            known = bool(name) and b.image.partition(name, fp.partition) is not None
            statuses.append(FetchPartitionStatus(name, fp.partition, known, fp.fetch_offset, fp.partition_max_bytes,
                                                 fp.current_leader_epoch,
                                                 fp.last_fetched_epoch if ctx.api_version >= 12 else -1,
                                                 topic_id=tid))
    max_bytes = min(req.max_bytes, b.config["fetch.max.bytes"])
    oor = b.faults.on("fetch.oor_as_empty")
    reads = read_all(b, statuses, max_bytes, isolation, oor, replica_id)
    per_partition = b.faults.on("fetch.min_bytes_per_partition")
    sizes = [len(r[2]) for r in reads]
    readable = max(sizes, default=0) if per_partition else sum(sizes)
    errored = any(r[1] or r[6] is not None for r in reads)
    faults = b.faults
    enough = readable > req.min_bytes if faults.on("fetch.min_bytes_exclusive") else readable >= req.min_bytes
    zero_parks = req.max_wait_ms <= 0 and faults.on("fetch.zero_wait_parks")
    if (req.max_wait_ms <= 0 and not zero_parks) or not statuses or enough or errored or \
            faults.on("fetch.ignore_max_wait"):
        return _response(reads, image=b.image)
    reason = await b.replicas.park_fetch(statuses, req.min_bytes, isolation, replica_id >= 0,
                                         2.0 if zero_parks else req.max_wait_ms / 1000)
    return _response(read_all(b, statuses, max_bytes, isolation, oor, replica_id, expired=reason == "expired"),
                     image=b.image)
