"""InitProducerId as Kafka answers it for idempotent producers (TransactionCoordinator.handleInitProducerId with a
null transactional id; KafkaApis.handleInitProducerIdRequest)."""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import InitProducerIdRequest

from ._wire import connect


async def init(c, version: int, pid: int = -1, epoch: int = -1, txn: str | None = None):
    req = InitProducerIdRequest[version](transactional_id=txn, transaction_timeout_ms=60000,
                                         **({"producer_id": pid, "producer_epoch": epoch} if version >= 3 else {}))
    return (await c.request(req)).body


async def test_every_idempotent_init_gets_a_new_id_with_epoch_zero(broker):
    """v3+ naming the current id and epoch: a new id, epoch 0 (before the fix: the same id, epoch + 1)."""
    c = await connect(broker)
    first = await init(c, 4)
    assert (first.error_code, first.producer_epoch) == (0, 0) and first.producer_id >= 0
    seen = {first.producer_id}
    for version in (3, 4):
        again = await init(c, version, first.producer_id, first.producer_epoch)
        assert again.error_code == 0 and again.producer_epoch == 0, again
        assert again.producer_id not in seen, f"v{version} answered an id already given out: {again}"
        seen.add(again.producer_id)
    old = await init(c, 2)
    assert old.error_code == 0 and old.producer_id not in seen and old.producer_epoch == 0


async def test_id_and_epoch_come_together(broker):
    c = await connect(broker)
    first = await init(c, 4)
    for pid, epoch in ((-1, 0), (first.producer_id, -1)):
        r = await init(c, 4, pid, epoch)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.InvalidRequestError.errno, -1, -1), r
