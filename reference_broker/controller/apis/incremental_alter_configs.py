"""IncrementalAlterConfigs (key 44), v0–v1, on the controller (brokers forward what they did not answer):
controller/configs.py validates each resource and commits its ConfigRecords; the answer waits (boundedly) until
the live brokers applied them.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from ...registry import CONTROLLER
from ..configs import alter
from ..context import ControllerContext

API_KEY = 44
VERSIONS = (0, 1)
APPLY_WAIT_S = 5.0

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@CONTROLLER.handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    out = []
    for r in req.resources:
        err, msg = alter(c, r.resource_type, r.resource_name,
                         [(x.name, x.config_operation, x.value) for x in r.configs], req.validate_only,
                         replace=c.faults is not None and c.faults.on("configs.incremental_replaces"))
        out.append(Result(error_code=err, error_message=msg, resource_type=r.resource_type,
                          resource_name=r.resource_name))
    if not req.validate_only:
        # acknowledged only once Raft committed it (a deposed leader's records are truncated): wait_applied alone
        # compares with the committed offset, which an uncommitted change is not part of yet
        if not await c.wait_committed():
            out = [Result(error_code=E.NotControllerError.errno, error_message=None, resource_type=x.resource_type,
                          resource_name=x.resource_name) if x.error_code == 0 else x for x in out]
        await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)
