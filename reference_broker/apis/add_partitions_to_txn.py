"""AddPartitionsToTxn (key 24), v0–v5.

Behavior (TransactionCoordinator.handleAddPartitionsToTransaction / handleVerifyPartitionsInTransaction):
- v0–v3 (clients): the partitions join the producer's transaction, which starts (Ongoing) if none is open; every
  partition gets the same error: NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING (unknown id or another producer id),
  PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a change being written, or markers of the previous
  transaction still being written), or NONE once the change is in __transaction_state. Partitions that do not exist
  answer UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (KafkaApis).
- v4+ (brokers, KIP-890): a batch of transactions; ``verify_only`` answers per partition whether it is in the
  ongoing transaction (NONE or TRANSACTION_ABORTABLE) without changing anything, which partition leaders ask before
  the first transactional append; without verify_only, v4+ adds as v3 does — v5 is what a partition leader sends
  for a Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2): the add of transaction version 2.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 24
VERSIONS = (0, 5)
OPERATION_NOT_ATTEMPTED = E.OperationNotAttemptedError.errno

R = AddPartitionsToTxnResponse
TopicResult = R.AddPartitionsToTxnTopicResult
PartResult = TopicResult.AddPartitionsToTxnPartitionResult


def _results(errors: dict[tuple[str, int], int]) -> list:
    by_topic: dict[str, list] = {}
    for (t, p), err in errors.items():
        by_topic.setdefault(t, []).append(PartResult(partition_index=p, partition_error_code=err))
    return [TopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


async def _add(b, txn_id: str, pid: int, epoch: int, topics, verify_only: bool,
               tv: int = 0) -> dict[tuple[str, int], int]:
    tps = [(t.name, p) for t in topics for p in t.partitions]
    if verify_only:
        return b.txn.verify(txn_id, pid, epoch, tps)
    unknown = {tp for tp in tps if b.image.partition(*tp) is None}
    if unknown:
        return {tp: E.UnknownTopicOrPartitionError.errno if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in tps}
    err = await b.txn.add_partitions(txn_id, pid, epoch, set(tps), tv=tv)
    return dict.fromkeys(tps, err)


@handles(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    if ctx.api_version <= 3:
        errors = await _add(b, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                            req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_results(errors))
    out = []
    for t in req.transactions:
        errors = await _add(b, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only,
                            tv=2 if ctx.api_version >= 5 else 0)
        out.append(R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_results(errors)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=out)
