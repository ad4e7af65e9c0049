"""EndTxn (key 26), v0–v5.

Behavior (TransactionCoordinator.endTransaction): commit or abort the producer's ongoing transaction:
PrepareCommit / PrepareAbort is written to ``__transaction_state`` and answered; the markers are then written to
every partition of the transaction (WriteTxnMarkers) and the transaction completes.
- v0–v4 (transaction version 1, KafkaApis: version <= 4 → TV_0): the epoch stays. Errors: NOT_COORDINATOR,
  INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a change or the same
  outcome's markers in progress), INVALID_TXN_STATE (nothing open, or the other outcome); a retry of a completed
  outcome answers NONE.
- v5 (KIP-890 part 2, TV_2): every EndTxn bumps the epoch (the markers carry the new one) and the answer names the
  producer id and epoch to continue with (a new id at epoch 0 once the epochs are exhausted); a retry with the
  previous epoch answers the completed outcome with the current id/epoch; an abort needs no partition; -1/-1 with
  every error. The version decides, as in Kafka, whatever the cluster's transaction.version.
"""
from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 26
VERSIONS = (0, 5)


@handles(EndTxnRequest, EndTxnResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    tv = 2 if ctx.api_version >= 5 else 0
    err, pid, epoch = await ctx.broker.txn.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                                   req.committed, tv=tv)
    if ctx.api_version >= 5:
        return EndTxnResponse(throttle_time_ms=0, error_code=err, producer_id=pid, producer_epoch=epoch)
    return EndTxnResponse(throttle_time_ms=0, error_code=err)
