"""UpdateFeatures (key 57), v0–v2, on a broker: forwarded to the controller (controller/apis/update_features.py), as
Kafka's brokers forward it (KIP-584, KIP-590)."""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 57
VERSIONS = (0, 2)


@handles(UpdateFeaturesRequest, UpdateFeaturesResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    try:
        return await ctx.broker.forward(req, ctx.api_version, timeout=max(req.timeout_ms, 0) / 1000 + 10)
    except (OSError, TimeoutError, E.KafkaError) as e:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=E.RequestTimedOutError.errno,
                                      error_message=f"controller unreachable: {e}", results=[])
