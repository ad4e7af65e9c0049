"""InitProducerId (key 22), v0–v4.

Behavior:
- Idempotent producers (transactional_id null) get a fresh producer id with epoch 0, every time — also when a v3+
  request names the producer's current id and epoch (KIP-360): Kafka's TransactionCoordinator.handleInitProducerId
  "blindly" allocates a new id for a null transactional id; only ids kept for a transactional id get bumped epochs.
- A producer id without an epoch, or an epoch without an id, is INVALID_REQUEST (KafkaApis.handleInitProducerIdRequest).
- Transactional ids get INVALID_REQUEST: transactions are not implemented (GAPS.md).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..registry import handles

API_KEY = 22
VERSIONS = (0, 4)
NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1


def _refused(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)


@handles(InitProducerIdRequest, InitProducerIdResponse, VERSIONS)
async def handle(ctx, req):
    pid = getattr(req, "producer_id", NO_PRODUCER_ID)          # v3+ fields; older versions name no producer
    epoch = getattr(req, "producer_epoch", NO_PRODUCER_EPOCH)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _refused(E.InvalidRequestError.errno)
    if req.transactional_id is not None:
        return _refused(E.InvalidRequestError.errno)
    if ctx.broker.faults.on("init_producer_id.bump_epoch") and pid != NO_PRODUCER_ID:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                      producer_epoch=(epoch + 1) & 0x7FFF)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=ctx.broker.next_producer_id(),
                                  producer_epoch=0)
