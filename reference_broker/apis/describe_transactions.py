"""DescribeTransactions (key 65), v0 (KIP-664).

Behavior (TransactionCoordinator.handleDescribeTransactions): per transactional id its state, producer id and
epoch, timeout, start time (-1 when none is open) and partitions; NOT_COORDINATOR for ids this broker does not
coordinate, TRANSACTIONAL_ID_NOT_FOUND for unknown ones, INVALID_REQUEST for "".
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 65
VERSIONS = (0, 0)

S = DescribeTransactionsResponse.TransactionState


@handles(DescribeTransactionsRequest, DescribeTransactionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    out = []
    for txn_id in req.transactional_ids:
        err, m = ctx.broker.txn.describe(txn_id)
        if err or m is None:
            out.append(S(error_code=err, transactional_id=txn_id, transaction_state="", transaction_timeout_ms=0,
                         transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        out.append(S(error_code=0, transactional_id=txn_id, transaction_state=m.state,
                     transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                     producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                     topics=[S.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)
