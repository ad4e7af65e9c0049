"""Fetch (key 1) on the controller listener: brokers replicate the metadata log ``__cluster_metadata`` (KIP-595
style fetch-based metadata propagation), v12.

Behavior: only partition 0 of ``__cluster_metadata`` exists here; the fetch offset is the next record the broker
needs, so it tells the controller what the broker has applied (used to unfence it and to answer CreateTopics once
live brokers know the topic). Empty answers park until a new record is committed or max_wait passes.
"""
from __future__ import annotations

import asyncio

from kafka import errors as E
from kafka.protocol.consumer import FetchRequest, FetchResponse

from ...metadata.records import METADATA_TOPIC
from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 1
VERSIONS = (12, 12)

TopicResp = FetchResponse.FetchableTopicResponse
PartData = TopicResp.PartitionData


def _part(index: int, err: int, records: bytes, end: int) -> PartData:
    return PartData(partition_index=index, error_code=err, high_watermark=end, last_stable_offset=end,
                    log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=records)


@CONTROLLER.handles(FetchRequest, FetchResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    want = [(t.topic, fp) for t in req.topics for fp in t.partitions]
    if len(want) != 1 or want[0][0] != METADATA_TOPIC or want[0][1].partition != 0:
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            TopicResp(topic=t, partitions=[_part(fp.partition, E.UnknownTopicOrPartitionError.errno, b"", -1)])
            for t, fp in want])
    fp = want[0][1]
    offset = fp.fetch_offset
    if req.replica_id >= 0:
        c.note_applied(req.replica_id, offset)
    if offset > c.end_offset:
        part = _part(0, E.OffsetOutOfRangeError.errno, b"", c.end_offset)
    else:
        if offset == c.end_offset and req.max_wait_ms > 0:
            fut = asyncio.get_running_loop().create_future()

            def wake() -> None:
                if not fut.done():
                    fut.set_result(None)
            c.add_listener(wake)
            try:
                await asyncio.wait_for(fut, req.max_wait_ms / 1000)
            except TimeoutError:
                pass
            finally:
                c.remove_listener(wake)
        part = _part(0, 0, c.read_records(offset, fp.partition_max_bytes), c.end_offset)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[TopicResp(topic=METADATA_TOPIC, partitions=[part])])
