"""FindCoordinator (key 10), v0–v4.

Behavior:
- Group keys (key_type 0) are coordinated by the leader of the ``__consumer_offsets`` partition
  abs(hash(group)) % offsets.topic.num.partitions (created on first use with offsets.topic.replication.factor,
  as Kafka's AutoTopicCreationManager, also on fenced brokers; COORDINATOR_NOT_AVAILABLE while fewer brokers are
  registered); a leaderless partition is COORDINATOR_NOT_AVAILABLE. Coordination moves with that partition's
  leadership. Deliberate difference (GAPS.md): the creation is awaited, so the first lookup answers at once.
- Transaction keys (key_type 1) are coordinated by the leader of the ``__transaction_state`` partition
  abs(hash(transactional.id)) % transaction.state.log.num.partitions, created on first use with
  transaction.state.log.replication.factor and min.insync.replicas = transaction.state.log.min.isr (Kafka's
  AutoTopicCreationManager); an empty transactional id is INVALID_REQUEST (KafkaApis.getCoordinator).
- Other key types: INVALID_REQUEST.
- v4+ batch many keys (KIP-699).
- error_message as Kafka 4.x sends it: v1–v3 "NONE" on success (KafkaApis answers with Errors.message()), the
  reason otherwise; v4 "" for every key (KafkaApis sets no message; the schema default).
- An empty group id is a key like any other (KafkaApis.getCoordinator hashes it; JoinGroup refuses it later).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 10
VERSIONS = (0, 4)
GROUP, TRANSACTION = 0, 1


async def coordinator_for(b, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port)."""
    if key_type == TRANSACTION:
        if not key:
            return E.InvalidRequestError.errno, "Transactional id can not be empty", -1, "", -1
        if await b.ensure_txn_topic():
            return E.CoordinatorNotAvailableError.errno, "the transaction state topic could not be created", -1, "", -1
        st = b.txn_coordinator_for(key)
        what = "transaction state"
    elif key_type == GROUP:
        if await b.ensure_offsets_topic():   # Kafka creates __consumer_offsets on the first lookup
            return E.CoordinatorNotAvailableError.errno, "the offsets topic could not be created", -1, "", -1
        st = b.coordinator_for(key)
        what = "group's offsets"
    else:
        return E.InvalidRequestError.errno, f"Unknown coordinator type {key_type}", -1, "", -1
    node = b.image.brokers.get(st.leader) if st is not None else None
    if node is None or node.fenced:
        return E.CoordinatorNotAvailableError.errno, f"the {what} partition has no leader", -1, "", -1
    return 0, None, node.broker_id, node.host, node.port


@handles(FindCoordinatorRequest, FindCoordinatorResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    key_type = req.key_type if ctx.api_version >= 1 else GROUP
    if ctx.api_version >= 4:
        coords = []
        for key in req.coordinator_keys:
            err, msg, node, host, port = await coordinator_for(b, key, key_type)
            coords.append(FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port,
                                                              error_code=err, error_message=""))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coords)
    err, msg, node, host, port = await coordinator_for(b, req.key, key_type)
    if err == 0:
        msg = "NONE"
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=err, error_message=msg, node_id=node, host=host,
                                   port=port)
