"""CreatePartitions (key 37), v0–v3, on the controller (brokers forward it): controller/partitions.py decides and
writes; a topic named twice gets one answer, INVALID_REQUEST "Duplicate topic name." (as Kafka 4.4.0); the answer
waits (boundedly) until the live brokers applied the new partitions, so Metadata to any broker shows them.
"""
from __future__ import annotations

from collections import Counter

from kafka import errors as E
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from ...registry import CONTROLLER
from ..context import ControllerContext
from ..partitions import create_partitions

API_KEY = 37
VERSIONS = (0, 3)
APPLY_WAIT_S = 5.0

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@CONTROLLER.handles(CreatePartitionsRequest, CreatePartitionsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    counts = Counter(t.name for t in req.topics)
    results, answered = [], set()
    for t in req.topics:
        if t.name in answered:
            continue
        answered.add(t.name)
        if counts[t.name] > 1:
            err, msg = E.InvalidRequestError.errno, "Duplicate topic name."
        else:
            err, msg = create_partitions(c, t.name, t.count,
                                         None if t.assignments is None else [list(a.broker_ids) for a in t.assignments],
                                         req.validate_only)
        results.append(Result(name=t.name, error_code=err, error_message=msg))
    if not req.validate_only:
        # acknowledged only once Raft committed it (a deposed leader's records are truncated): wait_applied alone
        # compares with the committed offset, which the new partitions are not part of yet
        if not await c.wait_committed():
            results = [Result(name=r.name, error_code=E.NotControllerError.errno, error_message=None)
                       if r.error_code == 0 else r for r in results]
        await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
