"""IncrementalAlterConfigs (key 44), v0–v1 (KIP-339), on a broker: request-level checks here
(config_admin.precheck, Kafka's ConfigAdminManager), the rest forwarded to the controller, which validates
and writes ConfigRecords (controller/configs.py). Kafka 4.4.0 serves v0–v1.

The answer comes once the live brokers applied the change (as CreateTopics here; Kafka answers once it is
committed, so a DescribeConfigs right after may still show the old value there: GAPS.md), so a DescribeConfigs to
any broker after the answer shows it.
"""
from __future__ import annotations

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from ..config_admin import forward_rest, precheck
from ..context import BrokerContext
from ..registry import handles

API_KEY = 44
VERSIONS = (0, 1)

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    resources = list(req.resources)
    checked = precheck(ctx, resources, incremental=True)
    answers = await forward_rest(ctx, req, resources, checked, lambda todo: IncrementalAlterConfigsRequest(
        resources=todo, validate_only=req.validate_only))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        Result(error_code=err, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, (err, msg) in zip(resources, answers, strict=True)])
