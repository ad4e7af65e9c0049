"""IncrementalAlterConfigs (key 44), v0–v1, on the controller (brokers forward what they did not answer):
controller/configs.py validates each resource and commits its ConfigRecords; the answer waits (boundedly) until
the live brokers applied them.
"""
from __future__ import annotations

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from ...registry import CONTROLLER
from ..configs import alter_resources
from ..context import ControllerContext

API_KEY = 44
VERSIONS = (0, 1)

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@CONTROLLER.handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    answers = await alter_resources(c, [(r.resource_type, r.resource_name,
                                         [(x.name, x.config_operation, x.value) for x in r.configs])
                                        for r in req.resources], req.validate_only,
                                    replace=c.faults is not None and c.faults.on("configs.incremental_replaces"))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        Result(error_code=err, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, (err, msg) in zip(req.resources, answers, strict=True)])
