"""ListTransactions (key 66), v0–v2 (KIP-664, KIP-994, KIP-1152).

Behavior (TransactionStateManager.listTransactionStates, Kafka 4.4): the transactional ids this broker coordinates,
Dead ones left out (also ids at epoch -1, state Empty, are listed), filtered by state names and producer ids (empty:
all), v1+ by ``now - transaction start > duration_filter`` ms for any state (-1: no filter; an Empty id has no
start, -1, so it passes every duration filter; a completed one keeps its last transaction's start), v2+ by a
transactional id pattern (null or "": all) that must match the whole id (re2j ``Matcher.matches``); a pattern that
does not compile INVALID_REGULAR_EXPRESSION with nothing listed. Unknown state names are listed back in
unknown_state_filters (and match nothing).
"""
from __future__ import annotations

import re

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from ..context import BrokerContext
from ..registry import handles
from ..txn_coordinator import STATES

API_KEY = 66
VERSIONS = (0, 2)
INVALID_REGULAR_EXPRESSION = 128     # Errors.INVALID_REGULAR_EXPRESSION (KIP-848); kafka-python has no class for it

S = ListTransactionsResponse.TransactionState


@handles(ListTransactionsRequest, ListTransactionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    v = ctx.api_version
    states = set(req.state_filters or [])
    unknown = sorted(s for s in states if s not in STATES)
    duration = req.duration_filter if v >= 1 else -1
    pattern = req.transactional_id_pattern if v >= 2 else None
    matches = None
    if pattern:
        try:
            matches = re.compile(pattern).fullmatch
        except re.error:
            return ListTransactionsResponse(throttle_time_ms=0, error_code=INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=[], transaction_states=[])
    found = ctx.broker.txn.list(set(req.producer_id_filters or []), states, duration, matches)
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                    transaction_states=[S(transactional_id=m.transactional_id,
                                                          producer_id=m.producer_id, transaction_state=m.state)
                                                        for m in found])
