"""AlterConfigs (key 33), v0–v2, on the controller: the given set replaces the resource's dynamic configs
(controller/configs.py, ``replace``); the answer waits (boundedly) until the live brokers applied them.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from ...registry import CONTROLLER
from ..configs import SET, alter
from ..context import ControllerContext

API_KEY = 33
VERSIONS = (0, 2)
APPLY_WAIT_S = 5.0

Result = AlterConfigsResponse.AlterConfigsResourceResponse


@CONTROLLER.handles(AlterConfigsRequest, AlterConfigsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    out = []
    for r in req.resources:
        err, msg = alter(c, r.resource_type, r.resource_name, [(x.name, SET, x.value) for x in r.configs],
                         req.validate_only, replace=True)
        out.append(Result(error_code=err, error_message=msg, resource_type=r.resource_type,
                          resource_name=r.resource_name))
    if not req.validate_only:
        # acknowledged only once Raft committed it (a deposed leader's records are truncated): wait_applied alone
        # compares with the committed offset, which an uncommitted change is not part of yet
        if not await c.wait_committed():
            out = [Result(error_code=E.NotControllerError.errno, error_message=None, resource_type=x.resource_type,
                          resource_name=x.resource_name) if x.error_code == 0 else x for x in out]
        await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)
