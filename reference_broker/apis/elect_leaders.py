"""ElectLeaders (key 43), v0–v2, on a broker: forwarded to the controller (controller/apis/elect_leaders.py),
KIP-460: preferred or unclean leader election per partition.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 43
VERSIONS = (0, 2)


@handles(ElectLeadersRequest, ElectLeadersResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=max(req.timeout_ms, 0) / 1000 + 10)
    except (OSError, TimeoutError, E.KafkaError):
        return ElectLeadersResponse(throttle_time_ms=0, error_code=E.RequestTimedOutError.errno,
                                    replica_election_results=[])
