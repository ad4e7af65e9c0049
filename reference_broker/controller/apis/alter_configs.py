"""AlterConfigs (key 33), v0–v2, on the controller: the given set replaces the resource's dynamic configs
(controller/configs.py, ``replace``); the answer waits (boundedly) until the live brokers applied them.
"""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from ...registry import CONTROLLER
from ..configs import SET, alter_resources
from ..context import ControllerContext

API_KEY = 33
VERSIONS = (0, 2)

Result = AlterConfigsResponse.AlterConfigsResourceResponse


@CONTROLLER.handles(AlterConfigsRequest, AlterConfigsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    answers = await alter_resources(ctx.node.controller, [(r.resource_type, r.resource_name,
                                                           [(x.name, SET, x.value) for x in r.configs])
                                                          for r in req.resources], req.validate_only, replace=True)
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        Result(error_code=err, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, (err, msg) in zip(req.resources, answers, strict=True)])
