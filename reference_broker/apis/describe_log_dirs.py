"""DescribeLogDirs (key 35), v1–v5 as Kafka 4.4.0 serves them (KIP-113): this broker's log directory and, per
hosted partition, its size and offset lag.

Why: `kafka-log-dirs --describe` and admin clients size partitions and watch replicas catch up with it.

Behavior (Kafka's ReplicaManager.describeLogDirs / getLogEndOffsetLag):
- one result: the broker's data directory (a broker without one, in memory, names "memory"); v4+ total and usable
  bytes of its file system (-1 in memory), v5 is_cordoned false;
- topics null: every partition this broker hosts; else the named partitions this broker hosts (others, and unknown
  topics, are left out; a topic with none here is left out), sorted by topic and partition;
- partition_size: the bytes of the log's record batches from its start to its end; offset_lag: how far the log
  end is behind the high watermark, max(HW - LEO, 0) (a leader: 0); is_future_key false (no
  AlterReplicaLogDirs here).
"""
from __future__ import annotations

import shutil

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 35
VERSIONS = (1, 5)

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Part = Topic.DescribeLogDirsPartition


@handles(DescribeLogDirsRequest, DescribeLogDirsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    rm = ctx.broker.replicas
    if req.topics is None:
        wanted = sorted(rm.partitions)
    else:
        asked = {(t.topic, i) for t in req.topics for i in t.partitions}
        wanted = sorted(tp for tp in asked if tp in rm.partitions)
    topics: dict[str, list] = {}
    for topic, index in wanted:
        p = rm.partitions[(topic, index)]
        log = p.log
        size = log.bytes_between(log.log_start_offset, log.log_end_offset)
        if ctx.broker.faults.on("log_dirs.size_records"):
            size = log.log_end_offset - log.log_start_offset
        lag = max(p.hw - log.log_end_offset, 0)
        topics.setdefault(topic, []).append(Part(partition_index=index, partition_size=size, offset_lag=lag,
                                                 is_future_key=False))
    data_dir = rm.data_dir
    total = usable = -1
    if data_dir is not None:
        try:
            usage = shutil.disk_usage(data_dir)
            total, usable = usage.total, usage.free
        except OSError:
            pass
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[Result(
        error_code=0, log_dir=str(data_dir) if data_dir is not None else "memory",
        topics=[Topic(name=name, partitions=parts) for name, parts in topics.items()],
        total_bytes=total, usable_bytes=usable, is_cordoned=False)])
