"""InitProducerId (key 22), v0–v4.

Behavior:
- Idempotent producers (transactional_id null) get a fresh producer id with epoch 0; a v3+ request naming its
  current id and epoch (KIP-360) gets the same id with the epoch bumped.
- Transactional ids get INVALID_REQUEST: transactions are not implemented (GAPS.md).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..registry import handles

API_KEY = 22
VERSIONS = (0, 4)


@handles(InitProducerIdRequest, InitProducerIdResponse, VERSIONS)
async def handle(ctx, req):
    if req.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=E.InvalidRequestError.errno, producer_id=-1,
                                      producer_epoch=-1)
    if ctx.api_version >= 3 and req.producer_id >= 0:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=req.producer_id,
                                      producer_epoch=(req.producer_epoch + 1) & 0x7FFF)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=ctx.broker.next_producer_id(),
                                  producer_epoch=0)
