"""Produce (key 0), v3–v12.

Behavior:
- acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS). acks=0 gets no response at all — and when any partition
  fails, the connection is closed, the only way to tell the client (KafkaApis.handleProduceRequest); acks=1 is
  answered after the
  leader's append; acks=-1 after the high watermark passes the batch (DelayedProduce), or REQUEST_TIMED_OUT at
  ``timeout_ms``. With fewer in-sync replicas than ``min.insync.replicas`` (topic config, else broker; at most the
  replication factor: Kafka >= 3.7's effectiveMinIsr) acks=-1 fails with NOT_ENOUGH_REPLICAS before appending; when the ISR shrinks below it after the append, the batch answers
  NOT_ENOUGH_REPLICAS_AFTER_APPEND once the HW passes it (or REQUEST_TIMED_OUT: the HW is held below min ISR,
  KAFKA-15583). Only the partition's leader appends: others answer NOT_LEADER_OR_FOLLOWER.
- Records whose first batch names an unknown magic are CORRUPT_MESSAGE before anything else (also for a topic that
  does not exist), with the reason: the only error_message a produce answer carries. Everything else has none
  (KafkaApis' PartitionResponse(error), ReplicaManager.LogAppendResult.errorMessage): INVALID_RECORD for records that
  are not exactly one complete v2 batch (fewer than 12 trailing bytes are ignored), NOT_ENOUGH_REPLICAS,
  MESSAGE_TOO_LARGE, CORRUPT_MESSAGE for a CRC mismatch, ...
- Each partition carries exactly one record batch v2 (ProduceRequest v3+ rule): zero, several or a partial batch,
  or an older magic, is INVALID_RECORD; a CRC32C mismatch is CORRUPT_MESSAGE; a batch above ``message.max.bytes`` is
  MESSAGE_TOO_LARGE (topic max.message.bytes, else broker message.max.bytes); a client write to an internal topic is INVALID_TOPIC_EXCEPTION. Nothing of a rejected batch
  is written.
- Batches are stored as sent (compressed batches stay compressed); only base offset and leader epoch are set.
- Idempotent producers: duplicates of the last five batches return the original offset; gaps are
  OUT_OF_ORDER_SEQUENCE_NUMBER; stale epochs INVALID_PRODUCER_EPOCH. The producer state is the partition log's
  (``log/producer_state.py``): kept by followers, rebuilt after truncation and on restart, so this holds after a
  failover too.
- Transactional batches (KIP-98) append like idempotent ones and open the producer's transaction in that log (the
  LSO stops at its first offset). KIP-890 part 1 (transaction.partition.verification.enable): before the first
  transactional batch of a producer in a partition, the leader asks the transaction coordinator whether the
  partition is in the ongoing transaction (ReplicaManager.appendRecords verification): not in it is
  INVALID_TXN_STATE for these produce versions (v3–v10), a fenced epoch INVALID_PRODUCER_EPOCH, a coordinator that
  cannot answer yet (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...) NOT_ENOUGH_REPLICAS so old clients retry.
  Control batches from clients are INVALID_RECORD (LogValidator: clients may not write control records).
- Transactional checks of the whole request, before anything else (``request_refusal``): a transactional batch in a
  request without a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition
  (KafkaApis.handleProduceRequest: hasTransactionalRecords and no transactional id); transactional batches of more
  than one producer id are INVALID_PRODUCER_ID_MAPPING for every partition (ReplicaManager.handleProduceAppend:
  "Transactional records contained more than one producer ID"). Either is an orphan transactional batch no
  coordinator will ever end, the LSO stuck below it for ever (a hanging transaction, what KIP-890 prevents). With
  acks=0 the connection is closed instead (ProduceRequest.getErrorResponse has no answer for acks=0). A
  non-transactional batch from a producer whose transaction is open in that partition is INVALID_TXN_STATE (the
  log's producer state, ProducerAppendInfo.appendDataBatch).
- v10 (KIP-951: current leader / node endpoints, tagged; not filled), v11 (KIP-890: TRANSACTION_ABORTABLE reaches
  the client as it is, AddPartitionsToTxnManager genericErrorSupported), v12 (KIP-890 part 2, transaction version 2,
  the ``addPartition`` operation): the leader does not ask whether the partition is in the transaction, it adds it
  (AddPartitionsToTxn v5 verifyOnly=false to the coordinator, whatever transaction.partition.verification.enable
  says); CONCURRENT_TRANSACTIONS (the previous transaction's markers still being written) is retried by the leader
  every 20 ms for up to 100 ms (add.partitions.to.txn.retry.backoff[.max].ms) and then answered as it is, not as
  NOT_ENOUGH_REPLICAS (ReplicaManager.appendRecords, maybeRetryOnConcurrentTransactions).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from ..context import BrokerContext
from ..log import batch as B
from ..partition import AppendOrigin
from ..registry import CloseConnection, handles
from ..replica_manager import AppendEntry

API_KEY = 0
VERSIONS = (3, 12)

TopicResp = ProduceResponse.TopicProduceResponse
PartResp = TopicResp.PartitionProduceResponse
INVALID_TXN_STATE = E.InvalidTxnStateError.errno
CONCURRENT_TRANSACTIONS = E.ConcurrentTransactionsError.errno
TRANSACTION_ABORTABLE = E.TransactionAbortableError.errno
ADD_RETRY_BACKOFF_S, ADD_RETRY_MAX_S = 0.02, 0.1    # add.partitions.to.txn.retry.backoff.ms / .max.ms defaults


LOG_OVERHEAD = 12   # base offset + length: fewer trailing bytes than this are not read as a batch at all


def magic_error(records) -> str | None:
    """Records whose first batch names no known magic are refused with the whole request, before the topic is
    looked at: CORRUPT_MESSAGE, the one produce error Kafka 4.4 sends with a message ("Invalid magic found in
    record: N", as its record iteration raises it)."""
    if records is not None and len(records) > B.MAGIC and records[B.MAGIC] > 2:
        return f"Invalid magic found in record: {records[B.MAGIC]}"
    return None


def validate_batch(records, max_bytes: int) -> tuple[int, B.BatchHeader | None, bytes]:
    """The ProduceRequest v3+ and LogValidator checks a leader makes before appending → (error, header, the batch's
    bytes). Not exactly one complete v2 batch is INVALID_RECORD (ProduceRequest.validateRecords), a CRC32C mismatch
    CORRUPT_MESSAGE (LogValidator); fewer than 12 trailing bytes are ignored, as Kafka's batch iterator does."""
    data = bytes(records or b"")
    try:
        batches = list(B.iter_batches(data, strict=False))
    except B.InvalidBatch:
        return E.InvalidRecordError.errno, None, data
    consumed = sum(h.size for _, h in batches)
    if len(batches) != 1 or len(data) - consumed >= LOG_OVERHEAD:
        return E.InvalidRecordError.errno, None, data
    data = data[:consumed]
    _, h = batches[0]
    if h.magic != 2 or h.records_count <= 0:
        return E.InvalidRecordError.errno, None, data
    if h.size > max_bytes:
        return E.MessageSizeTooLargeError.errno, None, data
    try:
        h = B.validate(data)
    except B.InvalidBatch:
        return E.CorruptRecordError.errno, None, data
    if h.is_control:
        return E.InvalidRecordError.errno, None, data
    return 0, h, data


# Coordinator answers a leader cannot pass on as they are (ReplicaManager.appendRecords' postVerificationCallback,
# AddPartitionsToTxnManager): retriable ones become NOT_ENOUGH_REPLICAS, a fenced producer INVALID_PRODUCER_EPOCH,
# a partition outside the transaction INVALID_TXN_STATE (Produce v3-v10).
VERIFY_ERRORS = {
    E.ConcurrentTransactionsError.errno: E.NotEnoughReplicasError.errno,
    E.NetworkExceptionError.errno: E.NotEnoughReplicasError.errno,
    E.CoordinatorLoadInProgressError.errno: E.NotEnoughReplicasError.errno,
    E.CoordinatorNotAvailableError.errno: E.NotEnoughReplicasError.errno,
    E.NotCoordinatorError.errno: E.NotEnoughReplicasError.errno,
    E.ProducerFencedError.errno: E.InvalidProducerEpochError.errno,
    E.TransactionAbortableError.errno: INVALID_TXN_STATE,
}


def _ongoing_here(b, tp: tuple[str, int], h: B.BatchHeader) -> bool:
    """UnifiedLog.hasOngoingTransaction(producerId, producerEpoch): this producer's transaction of this epoch is
    already open in the partition's log (nothing to ask the coordinator)."""
    p = b.partition(*tp)
    if p is None:
        return True
    st = p.log.producer_state
    entry = st.last_entry(h.producer_id)
    return st.ongoing_first_offset(h.producer_id) is not None and entry is not None and \
        entry.epoch == h.producer_epoch


async def verify_transactional(b, req, batches: dict[tuple[str, int], B.BatchHeader],
                               version: int = 9) -> dict[tuple[str, int], int]:
    """KIP-890: the partitions whose first transactional batch of this producer the coordinator must confirm (part
    1, Produce <= v11) or add (part 2, v12+), and the error for each it did not."""
    add = version >= 12
    if req.transactional_id is None or (not add and (not b.config["transaction.partition.verification.enable"]
                                                     or b.faults.on("txn.no_partition_verification"))):
        return {}
    todo = [tp for tp, h in batches.items() if h.is_transactional and not _ongoing_here(b, tp, h)]
    if not todo:
        return {}
    h = batches[todo[0]]
    for tp in todo:                  # maybeStartTransactionVerificationForPartition: the verification state entry
        p = b.partition(*tp)
        if p is not None:
            p.log.producer_state.start_verification(batches[tp].producer_id, batches[tp].base_sequence, add)
    answers = await b.verify_txn(req.transactional_id, h.producer_id, h.producer_epoch, todo, add=add)
    waited = 0.0
    while add and CONCURRENT_TRANSACTIONS in answers.values() and waited < ADD_RETRY_MAX_S:
        await b.clock.sleep(ADD_RETRY_BACKOFF_S)
        waited += ADD_RETRY_BACKOFF_S
        again = [tp for tp, err in answers.items() if err == CONCURRENT_TRANSACTIONS]
        answers.update(await b.verify_txn(req.transactional_id, h.producer_id, h.producer_epoch, again, add=True))
    out = {}
    for tp, err in answers.items():
        if not err:
            continue
        if err == TRANSACTION_ABORTABLE and version >= 11:
            out[tp] = err
        elif err == CONCURRENT_TRANSACTIONS and add:
            out[tp] = err
        else:
            out[tp] = VERIFY_ERRORS.get(err, err)
    return out


def _first_batch_header(records) -> B.BatchHeader | None:
    """The header of a partition's first v2 batch, unvalidated (RequestUtils.hasTransactionalRecords looks only
    at each partition's first batch); None when there is no complete v2 header."""
    data = bytes(records or b"")
    if len(data) < B.HEADER_SIZE or data[B.MAGIC] != 2:
        return None
    try:
        return B.parse_header(data)
    except (B.InvalidBatch, ValueError):
        return None


PID_MAPPING_MESSAGE = "Transactional records contained more than one producer ID"   # Kafka 4.4.0's, answered


def request_refusal(req) -> int:
    """The error every partition of the request gets before any append, or 0: transactional batches without a
    transactional id (KafkaApis.handleProduceRequest, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or from more than one
    producer id (ReplicaManager.handleProduceAppend, INVALID_PRODUCER_ID_MAPPING). Kafka counts the producer ids
    only of partitions that passed their own checks; here of every partition whose first batch is transactional."""
    heads = [_first_batch_header(pd.records) for td in req.topic_data for pd in td.partition_data]
    txn = [h for h in heads if h is not None and h.is_transactional]
    if not txn:
        return 0
    if req.transactional_id is None:
        return E.TransactionalIdAuthorizationFailedError.errno
    if len({h.producer_id for h in txn}) > 1:
        return E.InvalidProducerIdMappingError.errno
    return 0


def refused_response(req, err: int):
    """ProduceRequest.getErrorResponse: ``err`` for every partition of the request, with the exception's message
    (none for TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka 4.4.0 answers); acks=0 gets no answer, the
    connection is closed (RequestHandlerHelper.sendErrorOrCloseConnection)."""
    if req.acks == 0:
        raise CloseConnection(f"acks=0 produce refused with error {err}")
    msg = PID_MAPPING_MESSAGE if err == E.InvalidProducerIdMappingError.errno else None
    return ProduceResponse(responses=[TopicResp(name=td.name, partition_responses=[
        PartResp(index=pd.index, error_code=err, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                 record_errors=[], error_message=msg) for pd in td.partition_data]) for td in req.topic_data],
        throttle_time_ms=0)


# ReplicaManager.appendToLocalLog: these failures answer LogAppendInfo.UNKNOWN_LOG_APPEND_INFO (log start -1); any
# other failure of the append (sequence, producer epoch, min.insync.replicas, record validation, and the acks=all
# outcomes after it) answers the partition's log start offset (processFailedRecord). Kafka 4.4.0, one node:
# OUT_OF_ORDER_SEQUENCE answered log_start_offset 0, MESSAGE_TOO_LARGE / UNKNOWN_TOPIC_OR_PARTITION /
# INVALID_TXN_STATE -1.
NO_LOG_START = frozenset({0, E.UnknownTopicOrPartitionError.errno, E.NotLeaderForPartitionError.errno,
                          E.MessageSizeTooLargeError.errno, E.RecordListTooLargeError.errno,
                          E.CorruptRecordError.errno, E.KafkaStorageError.errno})


@handles(ProduceRequest, ProduceResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    acks = req.acks
    refusal = 0 if b.faults.on("txn.produce_txn_checks_off") else request_refusal(req)
    if refusal:
        return refused_response(req, refusal)
    results: dict[tuple[str, int], list] = {}   # (topic, partition) -> [error, base_offset, message]
    appended: set[tuple[str, int]] = set()       # partitions whose answer comes from the append itself
    checked: dict[tuple[str, int], tuple] = {}   # passed every check before the append: (partition, bytes, header)
    for td in req.topic_data:
        for pd in td.partition_data:
            key = (td.name, pd.index)
            results[key] = [0, -1, None]          # answered in request order whatever happens below
            bad_magic = magic_error(pd.records)
            if bad_magic is not None:
                results[key] = [E.CorruptRecordError.errno, -1, bad_magic]
                continue
            if acks not in (-1, 0, 1):
                results[key] = [E.InvalidRequiredAcksError.errno, -1, f"acks={acks} must be -1, 0 or 1"]
                continue
            t = b.topics.get(td.name)
            if t is not None and t.internal:
                results[key] = [E.InvalidTopicError.errno, -1, f"cannot append to internal topic {td.name}"]
                continue
            p, err = b.leader_partition(td.name, pd.index)
            if err:
                results[key] = [err, -1, None]
                continue
            max_bytes = b.topic_setting(td.name, "max.message.bytes")
            if b.faults.on("produce.ignore_max_message_bytes"):    # clients suite switch
                max_bytes = 1 << 31
            err, header, data = validate_batch(pd.records, max_bytes)
            if err:
                results[key] = [err, -1, None]
                continue
            checked[key] = (p, data, header)
    if checked:
        refused = await verify_transactional(b, req, {k: h for k, (_p, _d, h) in checked.items()}, ctx.api_version)
        for key in refused:
            results[key] = [refused[key], -1, None]
        # ReplicaManager.appendRecords (origin CLIENT): min.insync.replicas, sequences, the append, acks=all.
        pending = b.replicas.append_records(
            [AppendEntry(key[0], key[1], data, header) for key, (_p, data, header) in checked.items()
             if key not in refused], acks, AppendOrigin.CLIENT, max(req.timeout_ms, 0) / 1000)
        for key, r in (await pending.wait()).items():         # acks=0/1: at once
            results[key] = [r.error, r.base_offset, r.message]
            appended.add(key)
    if acks == 0:
        failed = {k: v for k, v in results.items() if v[0]}
        if failed:
            # KafkaApis.handleProduceRequest: with acks=0 the only signal is closing the connection
            raise CloseConnection(f"acks=0 produce failed for {sorted(failed)}")
        return None
    by_topic: dict[str, list] = {}
    for (topic, idx), (err, base, msg) in results.items():
        if msg is not None and not msg.startswith("Invalid magic"):
            msg = None      # Kafka: PartitionResponse(error) and LogAppendResult.errorMessage carry none

        p = b.partition(topic, idx)
        with_start = p is not None and (err == 0 or ((topic, idx) in appended and err not in NO_LOG_START))
        by_topic.setdefault(topic, []).append(PartResp(
            index=idx, error_code=err, base_offset=base, log_append_time_ms=-1,
            log_start_offset=p.log.log_start_offset if with_start else -1,
            record_errors=[], error_message=msg))
    return ProduceResponse(responses=[TopicResp(name=t, partition_responses=ps) for t, ps in by_topic.items()],
                           throttle_time_ms=0)
