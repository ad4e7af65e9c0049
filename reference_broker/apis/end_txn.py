"""EndTxn (key 26), v0–v4.

Behavior (TransactionCoordinator.endTransaction, transaction version 1): commit or abort the producer's ongoing
transaction: PrepareCommit / PrepareAbort is written to ``__transaction_state`` and answered; the markers are then
written to every partition of the transaction (WriteTxnMarkers) and the transaction completes. Errors:
NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a change
or the same outcome's markers in progress), INVALID_TXN_STATE (nothing open, or the other outcome); a retry of a
completed outcome answers NONE.
- v5 (KIP-890 part 2: an epoch bump per transaction, answered with the new epoch) is not served, so clients use
  transaction version 1 (GAPS.md).
"""
from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ..registry import handles

API_KEY = 26
VERSIONS = (0, 4)


@handles(EndTxnRequest, EndTxnResponse, VERSIONS)
async def handle(ctx, req):
    err = await ctx.broker.txn.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return EndTxnResponse(throttle_time_ms=0, error_code=err)
