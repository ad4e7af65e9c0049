"""AddOffsetsToTxn (key 25), v0–v4.

Behavior (TransactionCoordinator.handleAddOffsetsToTransaction): the group's ``__consumer_offsets`` partition
joins the producer's transaction (so its TxnOffsetCommit gets the transaction's marker); errors as
AddPartitionsToTxn (NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS).
"""
from __future__ import annotations

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 25
VERSIONS = (0, 4)


@handles(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    err = await b.ensure_offsets_topic()
    if not err:
        err = await b.txn.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=err)
