"""ListOffsets (key 2), v1–v9.

Behavior (Kafka ``UnifiedLog.fetchOffsetByTimestamp`` / ``Partition.fetchOffsetForTimestamp``):
- EARLIEST (-2) is the log start offset; LATEST (-1) is the HW for consumers, the last stable offset for
  read_committed (isolation_level 1; Partition.fetchOffsetForTimestamp's lastFetchableOffset, also the bound of a
  timestamp lookup) and the LEO for a replica id >= 0; MAX_TIMESTAMP (-3, v7+, KIP-734) is the offset of the largest timestamp.
- EARLIEST_LOCAL (-4, v8+, KIP-405) is the local log start, which is the log start here (no tiered storage);
  LATEST_TIERED (-5, v9+, KIP-1005) is the highest offset in remote storage: -1 (timestamp -1, epoch -1) on a
  log without remote storage, which is every log here. v8 and v9 change nothing else.
- A timestamp >= 0 gives the earliest offset whose timestamp is >= it, only if that offset is below the readable
  end; otherwise offset -1, timestamp -1. Other negative timestamps find nothing (offset -1).
- Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION; KIP-320 epoch checks (v4+) as in Fetch.
- A fresh leader whose HW is still below the start of its leader epoch answers a consumer (replica id -1)
  OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before) for LATEST and for a timestamp lookup that finds
  nothing below the readable end, instead of an end offset that may be below what the previous leader answered
  (Partition.fetchOffsetForTimestamp, ReplicaManager.fetchOffset). EARLIEST is always answered.
"""
from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.record.memory_records import MemoryRecords

from ..context import BrokerContext
from ..log.base import TimestampOffset
from ..record_faults import last_batch_base
from ..registry import handles

API_KEY = 2
VERSIONS = (1, 9)
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
LEADER_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE = 5, 78

TopicResp = ListOffsetsResponse.ListOffsetsTopicResponse
PartResp = TopicResp.ListOffsetsPartitionResponse


def epoch_at(p, offset: int) -> int:
    epoch = -1
    for e in p.log.epoch_entries():
        if e.start_offset <= offset:
            epoch = e.epoch
    return epoch


def _exact_max_timestamp(p, faults):
    """KIP-734 (Kafka 3.8+): the offset of the record with the largest timestamp, not its batch's last offset."""
    found = p.log.max_timestamp()
    if found is None or faults.on("list_offsets.max_timestamp_batch_last"):
        return found
    res = p.log.read(found.offset, 1, found.offset + 1, True)
    records = MemoryRecords(res.data)
    best = None
    while (b := records.next_batch()) is not None:
        for r in b:
            if best is None or r.timestamp > best.timestamp:
                best = TimestampOffset(r.offset, r.timestamp)
    return best or found


def _batch_base(p, offset: int) -> int:
    """Base offset of the batch holding ``offset`` (only for the list_offsets.timestamp_batch_base switch)."""
    records = MemoryRecords(p.log.read(offset, 1, offset + 1, True).data)
    b = records.next_batch()
    return b.base_offset if b is not None else offset


class NotAvailable(Exception):
    """Partition.fetchOffsetForTimestamp's OffsetNotAvailableException: the HW lags the epoch start."""


def lookup(p, ts: int, replica_id: int, isolation_level: int, faults) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one partition; raises NotAvailable as Kafka throws
    OffsetNotAvailableException for a consumer while a fresh leader's HW lags its epoch start."""
    end = p.log.log_end_offset if replica_id >= 0 or p.fault_latest_is_leo else \
        p.last_stable_offset if isolation_level == 1 else p.hw
    lagging = replica_id == -1 and p.hw_behind_epoch_start and not faults.on("list_offsets.no_offset_not_available")
    if ts == EARLIEST and faults.on("list_offsets.earliest_is_latest"):
        ts = LATEST
    if ts in (EARLIEST, EARLIEST_LOCAL) and not (ts == EARLIEST_LOCAL and faults.on(
            "list_offsets.earliest_local_unknown")):
        off = p.log.log_start_offset
        return off, -1, epoch_at(p, off)
    if ts == LATEST_TIERED and faults.on("list_offsets.latest_tiered_is_latest"):
        ts = LATEST
    if ts == LATEST:
        if lagging:
            raise NotAvailable()
        if faults.on("list_offsets.latest_minus_one") and end > p.log.log_start_offset:
            end -= 1
        return end, -1, p.leader_epoch
    if ts == LATEST_TIERED:
        return -1, -1, -1
    if ts == MAX_TIMESTAMP:
        found = _exact_max_timestamp(p, faults)
    elif ts >= 0:
        found = p.log.offset_for_timestamp(ts)
    else:
        found = None
    if found is None or found.offset >= end:
        if lagging:
            raise NotAvailable()
        return -1, -1, -1
    off = _batch_base(p, found.offset) if ts >= 0 and faults.on("list_offsets.timestamp_batch_base") else \
        found.offset
    return off, found.timestamp, epoch_at(p, off)


@handles(ListOffsetsRequest, ListOffsetsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            p, err = b.leader_partition(t.name, rp.partition_index, rp.current_leader_epoch)
            if err:
                parts.append(PartResp(partition_index=rp.partition_index, error_code=err, timestamp=-1, offset=-1,
                                      leader_epoch=-1))
                continue
            ts = rp.timestamp + 1 if rp.timestamp >= 0 and b.faults.on("list_offsets.timestamp_exclusive") else \
                rp.timestamp
            try:
                off, ts, epoch = lookup(p, ts, req.replica_id, req.isolation_level, b.faults)
            except NotAvailable:
                err = OFFSET_NOT_AVAILABLE if ctx.api_version >= 5 else LEADER_NOT_AVAILABLE
                parts.append(PartResp(partition_index=rp.partition_index, error_code=err, timestamp=-1, offset=-1,
                                      leader_epoch=-1))
                continue
            if rp.timestamp == EARLIEST and b.faults.on("list_offsets.earliest_is_zero"):
                off = 0
            if rp.timestamp == LATEST and off > 0 and b.faults.on("list_offsets.latest_is_last_batch_base"):
                off = last_batch_base(p.log.read(off - 1, 1, off, True).data, off)   # clients suite switch
            parts.append(PartResp(partition_index=rp.partition_index, error_code=0, timestamp=ts, offset=off,
                                  leader_epoch=epoch))
        topics.append(TopicResp(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
