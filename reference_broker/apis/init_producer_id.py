"""InitProducerId (key 22), v0–v5.

Behavior:
- Idempotent producers (transactional_id null) get a fresh producer id with epoch 0, every time — also when a v3+
  request names the producer's current id and epoch (KIP-360): Kafka's TransactionCoordinator.handleInitProducerId
  "blindly" allocates a new id for a null transactional id; only ids kept for a transactional id get bumped epochs.
- A producer id without an epoch, or an epoch without an id, is INVALID_REQUEST (KafkaApis.handleInitProducerIdRequest).
- A transactional id goes to its transaction coordinator (reference_broker/txn_coordinator.py): NOT_COORDINATOR
  elsewhere; an empty one INVALID_REQUEST; a timeout outside (0, transaction.max.timeout.ms]
  INVALID_TRANSACTION_TIMEOUT; each call bumps the epoch (fencing the previous producer), aborting an open
  transaction first (CONCURRENT_TRANSACTIONS, the client retries), CONCURRENT_TRANSACTIONS while markers are being
  written; KIP-360's expected id/epoch (v3+) continue or answer PRODUCER_FENCED.
- v5 is v4 (Kafka bumped it for KIP-890); v6's two-phase commit (KIP-939) is not served.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 22
VERSIONS = (0, 5)
NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1


def _refused(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)


@handles(InitProducerIdRequest, InitProducerIdResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    pid = getattr(req, "producer_id", NO_PRODUCER_ID)          # v3+ fields; older versions name no producer
    epoch = getattr(req, "producer_epoch", NO_PRODUCER_EPOCH)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _refused(E.InvalidRequestError.errno)
    if req.transactional_id is not None:
        expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
        err, new_pid, new_epoch = await ctx.broker.txn.init_producer_id(req.transactional_id,
                                                                         req.transaction_timeout_ms, expected)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=err, producer_id=new_pid,
                                      producer_epoch=new_epoch)
    if ctx.broker.faults.on("init_producer_id.bump_epoch") and pid != NO_PRODUCER_ID:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                      producer_epoch=(epoch + 1) & 0x7FFF)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=ctx.broker.next_producer_id(),
                                  producer_epoch=0)
