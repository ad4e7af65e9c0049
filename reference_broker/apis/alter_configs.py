"""AlterConfigs (key 33), v0–v2, on a broker: the legacy whole-set replacement (the given configs become the
resource's dynamic configs; names not given are removed), checked and forwarded as IncrementalAlterConfigs is
(config_admin, controller/configs.py). Kafka 4.4.0 serves v0–v2.
"""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from ..config_admin import forward_rest, precheck
from ..context import BrokerContext
from ..registry import handles

API_KEY = 33
VERSIONS = (0, 2)

Result = AlterConfigsResponse.AlterConfigsResourceResponse


@handles(AlterConfigsRequest, AlterConfigsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    resources = list(req.resources)
    checked = precheck(ctx, resources, incremental=False)
    answers = await forward_rest(ctx, req, resources, checked, lambda todo: AlterConfigsRequest(
        resources=todo, validate_only=req.validate_only))
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        Result(error_code=err, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, (err, msg) in zip(resources, answers, strict=True)])
