"""DescribeQuorum (key 55), v0–v2, on a broker: forwarded to the active controller (controller/apis/
describe_quorum.py), as Kafka's brokers forward it (KafkaApis.handleDescribeQuorumRequest); the broker's controller
link tries the voters until the quorum's leader answers. No controller reachable: REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 55
VERSIONS = (0, 2)


@handles(DescribeQuorumRequest, DescribeQuorumResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=10.0)
    except (OSError, TimeoutError, E.KafkaError) as e:
        return DescribeQuorumResponse(error_code=E.RequestTimedOutError.errno, error_message=f"controller: {e}",
                                      topics=[], nodes=[])
