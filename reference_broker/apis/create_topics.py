"""CreateTopics (key 19), v2–v7, on a broker: forwarded to the controller, which decides and answers (KRaft's
ForwardingManager); see controller/apis/create_topics.py for the behaviour. The answer comes back once the live
brokers applied the new topic, so a client may produce to it at once.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 19
VERSIONS = (2, 7)

Result = CreateTopicsResponse.CreatableTopicResult


@handles(CreateTopicsRequest, CreateTopicsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=max(req.timeout_ms, 0) / 1000 + 10)
    except (OSError, TimeoutError, E.KafkaError) as e:
        return CreateTopicsResponse(throttle_time_ms=0, topics=[Result(
            name=t.name, topic_id=None, error_code=E.RequestTimedOutError.errno,
            error_message=f"controller unreachable: {e}", num_partitions=-1, replication_factor=-1, configs=None)
            for t in req.topics])
