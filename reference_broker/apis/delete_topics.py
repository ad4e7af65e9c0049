"""DeleteTopics (key 20), v1–v6, on a broker: forwarded to the controller (controller/apis/delete_topics.py).

Once the controller's remove_topic record is applied, every broker drops its replicas and parked fetches on the
topic complete at once with UNKNOWN_TOPIC_OR_PARTITION (DelayedFetch Case C).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 20
VERSIONS = (1, 6)

Result = DeleteTopicsResponse.DeletableTopicResult


@handles(DeleteTopicsRequest, DeleteTopicsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=max(req.timeout_ms, 0) / 1000 + 10)
    except (OSError, TimeoutError, E.KafkaError) as e:
        names = ([(t.name, t.topic_id) for t in req.topics] if ctx.api_version >= 6
                 else [(n, None) for n in req.topic_names])
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[Result(
            name=n, topic_id=tid, error_code=E.RequestTimedOutError.errno,
            error_message=f"controller unreachable: {e}") for n, tid in names])
