"""TxnOffsetCommit (key 28), v0–v5.

Behavior (KafkaApis.handleTxnOffsetCommitRequest, OffsetMetadataManager.commitTransactionalOffset, Kafka 4): the
offsets are written to the group's ``__consumer_offsets`` partition as the producer's transactional batch and stay
pending until the transaction's marker: invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT for require_stable,
applied by COMMIT, dropped by ABORT. Answered once the write is replicated. NOT_COORDINATOR elsewhere; partitions
that do not exist UNKNOWN_TOPIC_OR_PARTITION (KafkaApis filters them out; the rest go to the coordinator);
metadata longer than offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE. Order (GroupCoordinatorService.
commitTransactionalOffsets → CoordinatorRuntime.scheduleTransactionalWriteOperation): the transaction is verified
first (below), then the group (OffsetMetadataManager.validateTransactionalOffsetCommit): v3+ member id / generation /
instance id validated as ClassicGroup.validateOffsetCommit does for a transactional commit (generation -1 and no
member id: accepted whatever the group's state, a simple group created if unknown; a rebalance being completed
refuses nothing); an unknown group with a generation >= 0 ILLEGAL_GENERATION at every version (abortable for the
producer; GROUP_ID_NOT_FOUND would be fatal). So a fenced producer hears INVALID_PRODUCER_EPOCH before any group
error.
KIP-890 part 1 (transaction.partition.verification.enable): before the producer's first transactional write to the
group's offsets partition, the transaction coordinator must confirm that partition is in the ongoing transaction
(AddOffsetsToTxn put it there): CoordinatorRuntime.scheduleTransactionalWriteOperation → CoordinatorPartitionWriter.
maybeStartTransactionVerification. Not in it: INVALID_TXN_STATE (v0-v3; TRANSACTION_ABORTABLE from v4, the
genericError workflow); fenced: INVALID_PRODUCER_EPOCH (AddPartitionsToTxnManager maps PRODUCER_FENCED); the
coordinator unreachable: COORDINATOR_LOAD_IN_PROGRESS (CoordinatorOperationExceptionHelper, NETWORK_EXCEPTION).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from ..context import BrokerContext
from ..offset_store import OFFSETS_TOPIC, OffsetAndMetadata
from ..registry import handles
from .offset_commit import metadata_too_large

API_KEY = 28
VERSIONS = (0, 5)
TRANSACTION_ABORTABLE = E.TransactionAbortableError.errno
PRODUCER_FENCED = E.ProducerFencedError.errno
CONCURRENT_TRANSACTIONS = E.ConcurrentTransactionsError.errno

TopicR = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartR = TopicR.TxnOffsetCommitResponsePartition


@handles(TxnOffsetCommitRequest, TxnOffsetCommitResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    v = ctx.api_version
    err = await b.coordinator_error(req.group_id)
    generation = req.generation_id if v >= 3 else -1
    member = req.member_id if v >= 3 else ""
    instance = req.group_instance_id if v >= 3 else None
    known = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
             if b.image.partition(t.name, p.partition_index) is not None]
    group_first = b.faults.on("txn.offset_commit_group_first")
    if not err and known and not group_first:
        err = await verified(b, req, v)      # the transaction before the group (scheduleTransactionalWriteOperation)
    g = None
    if not err and known:
        err, g = b.groups.validate_commit(req.group_id, generation, member, instance, v, transactional=True)
    if not err and known and group_first:
        err = await verified(b, req, v)
    now = b.clock.wall_ms()
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = err
            if b.image.partition(t.name, p.partition_index) is None:
                code = E.UnknownTopicOrPartitionError.errno
            elif not code and metadata_too_large(p.committed_metadata, b.faults):
                code = E.OffsetMetadataTooLargeError.errno
            elif not code:
                epoch = p.committed_leader_epoch if v >= 2 else -1
                accepted[(t.name, p.partition_index)] = OffsetAndMetadata(p.committed_offset, epoch,
                                                                          p.committed_metadata or "", now)
            parts.append(PartR(partition_index=p.partition_index, error_code=code))
        topics.append(TopicR(name=t.name, partitions=parts))
    if g is not None and accepted:
        failed = await b.groups.txn_commit(g, req.producer_id, req.producer_epoch, accepted)
        if failed:
            for tr in topics:
                for pr in tr.partitions:
                    if pr.error_code == 0:
                        pr.error_code = failed
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)


async def verified(b, req, v: int) -> int:
    """0, or why the transaction coordinator did not confirm the group's offsets partition in the producer's ongoing
    transaction (asked only before the producer's first transactional write there, as Kafka asks). v5 (KIP-890
    part 2, transaction version 2: the Java client sends no AddOffsetsToTxn then) has the coordinator add the
    partition instead (the addPartition operation, whatever transaction.partition.verification.enable says)."""
    add = v >= 5
    if not add and (not b.config["transaction.partition.verification.enable"]
                    or b.faults.on("txn.no_partition_verification")):
        return 0
    tp = (OFFSETS_TOPIC, b.groups.partition_of(req.group_id))
    p = b.partition(*tp)
    if p is not None and p.log.producer_state.ongoing_first_offset(req.producer_id) is not None:
        entry = p.log.producer_state.last_entry(req.producer_id)
        if entry is not None and entry.epoch == req.producer_epoch:
            return 0
    err = (await b.verify_txn(req.transactional_id, req.producer_id, req.producer_epoch, [tp], add=add)).get(tp, 0)
    for _ in range(5):
        if not (add and err == CONCURRENT_TRANSACTIONS):
            break
        await b.clock.sleep(0.02)           # add.partitions.to.txn.retry.backoff.ms, up to its 100 ms maximum
        err = (await b.verify_txn(req.transactional_id, req.producer_id, req.producer_epoch, [tp], add=True)).get(tp, 0)
    if err == PRODUCER_FENCED:
        return E.InvalidProducerEpochError.errno
    if err == TRANSACTION_ABORTABLE and v < 4:
        return E.InvalidTxnStateError.errno
    if err == E.NetworkExceptionError.errno:
        return E.CoordinatorLoadInProgressError.errno
    return err
