"""ListTransactions (key 66), v0–v1 (KIP-664, KIP-994).

Behavior (TransactionStateManager.listTransactionStates): the transactional ids this broker coordinates, filtered
by state names and producer ids (empty: all) and, v1+, by running longer than duration_filter ms (-1: no filter;
only Ongoing transactions have a duration); unknown state names are listed back in unknown_state_filters.
"""
from __future__ import annotations

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from ..context import BrokerContext
from ..registry import handles
from ..txn_coordinator import STATES

API_KEY = 66
VERSIONS = (0, 1)


@handles(ListTransactionsRequest, ListTransactionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    states = set(req.state_filters or [])
    unknown = sorted(s for s in states if s not in STATES)
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    found = ctx.broker.txn.list(set(req.producer_id_filters or []), states, duration)
    S = ListTransactionsResponse.TransactionState
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                    transaction_states=[S(transactional_id=m.transactional_id,
                                                          producer_id=m.producer_id, transaction_state=m.state)
                                                        for m in found])
