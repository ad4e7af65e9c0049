"""CreatePartitions (key 37), v0–v3 as Kafka 4.4.0 serves it, on a broker: forwarded to the controller, which
decides and answers (KRaft's ForwardingManager); see controller/apis/create_partitions.py and
controller/partitions.py (KIP-195) for the behaviour.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 37
VERSIONS = (0, 3)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@handles(CreatePartitionsRequest, CreatePartitionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=max(req.timeout_ms, 0) / 1000 + 10)
    except (OSError, TimeoutError, E.KafkaError) as e:
        return CreatePartitionsResponse(throttle_time_ms=0, results=[Result(
            name=t.name, error_code=E.RequestTimedOutError.errno, error_message=f"controller unreachable: {e}")
            for t in req.topics])
