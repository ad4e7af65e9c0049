"""Produce: what an idempotent producer is promised (KIP-98), checked over the Kafka protocol.

Each check sends the exact batches an idempotent producer sends — its producer id, epoch and sequence numbers, built
by kafka.record — through the protocol client (``conformance.wire``), so a retry is byte for byte the batch it
repeats, as a real producer's retry is after a lost answer.

- InitProducerId without a transactional id always gives a new producer id with epoch 0, also when the request
  names the producer's current id and epoch (v3+): only the transaction coordinator bumps epochs of an id it keeps.
- A retry of one of a producer's last five batches is a duplicate: answered NONE with the batch's original base
  offset, nothing appended; a retry of an older batch is OUT_OF_ORDER_SEQUENCE_NUMBER, nothing appended.
- The same after a failover (a target with replication and broker kills): the new leader — which restarted since the
  batch was written, so it rebuilt its producer state from its log — answers the retry of the last acknowledged batch
  as a duplicate.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import NONE
from conformance.rules import rule
from conformance.suites.test_isr_hw import Cluster, eventually, state
from conformance.wire import LATEST, Wire, idempotent_batch
from fixtures.target import Target

SUITE = "produce"
INVALID_REQUEST = 42
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 14, 15    # retriable: Kafka's id block not yet allocated
RETAINED = 5          # ProducerStateEntry.NUM_BATCHES_TO_RETAIN

rule("INIT-PRODUCER-ID-IDEMPOTENT", "InitProducerId without a transactional id gives a new producer id with epoch "
     "0 every time, also when the request (v3+) names the producer's current id and epoch; an id without an epoch "
     "(or an epoch without an id) is INVALID_REQUEST",
     "TransactionCoordinator.handleInitProducerId (transactionalId == null → producerIdManager.generateProducerId, "
     "epoch 0); KafkaApis.handleInitProducerIdRequest (NO_PRODUCER_ID with an epoch, or an id with "
     "NO_PRODUCER_EPOCH → INVALID_REQUEST); KIP-360", SUITE)
rule("PRODUCE-IDEMPOTENT-DUPLICATE", "a retry of one of an idempotent producer's last five batches (same producer "
     "id, epoch and sequence range) is answered NONE with that batch's original base offset and is not appended "
     "again; a retry of an older batch is OUT_OF_ORDER_SEQUENCE_NUMBER and not appended either",
     "KIP-98; ProducerStateEntry.findDuplicateBatch (NUM_BATCHES_TO_RETAIN = 5); "
     "UnifiedLog.analyzeAndValidateProducerState (a duplicate answers the original offsets); "
     "ProducerAppendInfo.checkSequence (out of sequence → OutOfOrderSequenceException)", SUITE)
rule("PRODUCE-IDEMPOTENT-FAILOVER", "after a failover the new leader answers the retry of a batch the old leader "
     "acknowledged as a duplicate (NONE, the original base offset) and does not append it again, also when the new "
     "leader restarted after the batch was written: producer state is rebuilt from the log and its snapshots",
     "KIP-98; UnifiedLog.rebuildProducerState / ProducerStateManager.truncateAndReload (snapshots + log replay "
     "on load and truncation); ProducerAppendInfo (REPLICATION origin: followers keep producer state from the "
     "batches they replicate)", SUITE)

pytestmark = pytest.mark.timeout(300)


async def init_producer_id(w: Wire, **kw: Any) -> tuple[int, int, int]:
    """InitProducerId, retried as clients retry while the answer is retriable (a fresh Kafka broker answers
    COORDINATOR_LOAD_IN_PROGRESS until the controller gave it a block of producer ids)."""
    for _ in range(100):
        answer = await w.init_producer_id(**kw)
        if answer[0] not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE):
            return answer
        await asyncio.sleep(0.1)
    return answer


async def init_producer(w: Wire) -> tuple[int, int]:
    """A fresh idempotent producer id and epoch (InitProducerId, no transactional id)."""
    err, pid, epoch = await init_producer_id(w)
    assert err == NONE and pid >= 0 and epoch >= 0, f"InitProducerId answered error {err}, id {pid}, epoch {epoch}"
    return pid, epoch


async def log_values(w: Wire, topic: str) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) of partition 0 as a consumer reads it (up to the HW)."""
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        f = await ops.fetch(w, topic, 0, offset, max_wait_ms=10, min_bytes=0)
        assert f.error == NONE, f"Fetch of {topic} at {offset} answered error {f.error}"
        got = [r for r in f.records if r[0] >= offset]
        if not got:
            return out
        out += got
        offset = got[-1][0] + 1


# ------------------------------------------------------------------------------------------- single broker


@pytest.mark.rule("INIT-PRODUCER-ID-IDEMPOTENT")
async def test_init_producer_id_without_transactional_id_gives_a_new_id(wire: Wire, evidence: Evidence) -> None:
    if (wire.broker_max_version("InitProducerId") or 0) < 3:
        pytest.skip("the target serves InitProducerId below v3: requests cannot name a current producer id")
    pid, epoch = await init_producer(wire)
    again = await init_producer_id(wire, producer_id=pid, producer_epoch=epoch)
    evidence.note("init_producer_id", {"first": [pid, epoch], "naming_it": list(again)})
    assert again[0] == NONE and again[1] not in (pid, -1) and again[2] == 0, (
        f"InitProducerId (no transactional id) naming the current id {pid} and epoch {epoch} answered error "
        f"{again[0]}, id {again[1]}, epoch {again[2]}; Kafka allocates a new id with epoch 0 (only the transaction "
        f"coordinator bumps the epoch of an id it keeps)")
    for bad_pid, bad_epoch in ((-1, 3), (pid, -1)):
        err, _, _ = await init_producer_id(wire, producer_id=bad_pid, producer_epoch=bad_epoch)
        assert err == INVALID_REQUEST, (
            f"InitProducerId with producer id {bad_pid} and epoch {bad_epoch} answered {err}; Kafka: INVALID_REQUEST "
            f"({INVALID_REQUEST}), an id and an epoch come together or not at all")


@pytest.mark.rule("PRODUCE-IDEMPOTENT-DUPLICATE")
async def test_retry_of_recent_batch_is_a_duplicate(wire: Wire, evidence: Evidence) -> None:
    """Six batches of two records; retries of the last one and of the fifth from last are duplicates, a retry of
    the sixth from last (no longer remembered) is out of sequence; the log holds each record once."""
    topic = await wire.create_topic(partitions=1, replication_factor=1)
    leader = await wire.leader(topic)
    pid, epoch = await init_producer(leader)
    batches: list[tuple[bytes, int]] = []            # (bytes sent, base offset answered)
    for i in range(RETAINED + 1):
        b = idempotent_batch([f"d{i}-0".encode(), f"d{i}-1".encode()], pid, epoch, 2 * i)
        err, base = await leader.produce_batch(topic, 0, b, label=f"batch {i}")
        assert err == NONE, f"batch {i} (sequence {2 * i}) answered error {err}"
        batches.append((b, base))
    end = batches[-1][1] + 2
    answers = {}
    for i in (RETAINED, 1):                            # the last batch, and the oldest of the last five
        answers[i] = await leader.produce_batch(topic, 0, batches[i][0], label=f"retry of batch {i}")
    answers[0] = await leader.produce_batch(topic, 0, batches[0][0], label="retry of batch 0 (sixth from last)")
    evidence.note("sent", [base for _, base in batches])
    evidence.note("retries", {str(i): list(a) for i, a in answers.items()})
    for i in (RETAINED, 1):
        assert answers[i] == (NONE, batches[i][1]), (
            f"the retry of batch {i} (producer {pid}, epoch {epoch}, sequences {2 * i}..{2 * i + 1}, first written at "
            f"offset {batches[i][1]}) answered error {answers[i][0]} at offset {answers[i][1]}; Kafka answers a "
            f"duplicate of one of the last {RETAINED} batches with NONE and its original base offset")
    assert answers[0][0] == OUT_OF_ORDER_SEQUENCE_NUMBER, (
        f"the retry of batch 0 (sequence 0, six batches back) answered {answers[0]}; Kafka keeps the last "
        f"{RETAINED} batches only, so it is out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER)")
    err, latest, _ = await leader.list_offsets(topic, 0, LATEST)
    got = await log_values(leader, topic)
    assert err == NONE and latest == end, f"retries must append nothing: the log end moved from {end} to {latest}"
    want = [(batches[i][1] + k, f"d{i}-{k}".encode()) for i in range(RETAINED + 1) for k in (0, 1)]
    assert got == want, f"each record once, where it was first written: {want}; the log holds {got}"


# ------------------------------------------------------------------------------------------- replicated


@pytest.fixture
async def cluster(replicated_target: Target, evidence: Evidence) -> Any:
    """A fresh replicated target and a Wire to it; every fault undone after."""
    c = Cluster(replicated_target, await Wire.connect(replicated_target.bootstrap, evidence=evidence))
    try:
        await c.start()
        yield c
    finally:
        c.heal()
        await c.close()


async def restart_in_sync(c: Cluster, topic: str, node: int) -> None:
    """kill -9 a follower, start it again and wait until it is back in the ISR."""
    await c.kill(node)
    await asyncio.sleep(0.5)
    c.restart(node)
    obs = await c.observer()
    st, _ = await eventually(lambda: state(obs, topic), lambda s: node in s.isr and len(s.isr) == len(s.replicas), 60)
    assert node in st.isr, f"broker {node} never rejoined the ISR after its restart: {st}"


@pytest.mark.requires_capability("replication", "kill_broker", "pause_broker", "restart")
@pytest.mark.rule("PRODUCE-IDEMPOTENT-FAILOVER")
async def test_retry_after_failover_is_a_duplicate(cluster: Cluster, evidence: Evidence) -> None:
    """Write with acks=all; restart each follower (kill -9) so its producer state must come from its log; kill the
    leader; the retry of the last acknowledged batch on the new leader is a duplicate."""
    topic, st = await cluster.topic(3, {"min.insync.replicas": "2"})
    leader = await cluster.to(st.leader)
    pid, epoch = await init_producer(leader)
    sent: list[tuple[bytes, int]] = []
    for i in range(3):
        b = idempotent_batch([f"f{i}-0".encode(), f"f{i}-1".encode()], pid, epoch, 2 * i)
        err, base = await leader.produce_batch(topic, 0, b, label=f"batch {i}")
        assert err == NONE, f"acks=all batch {i} answered error {err}"
        sent.append((b, base))
    end = sent[-1][1] + 2
    for node in [r for r in st.replicas if r != st.leader]:
        await restart_in_sync(cluster, topic, node)
    await cluster.kill(st.leader)
    obs = await cluster.observer({st.leader})
    st2, _ = await eventually(lambda: state(obs, topic),
                              lambda s: s.leader >= 0 and s.leader != st.leader and s.leader_epoch > st.leader_epoch,
                              60)
    assert st2.leader != st.leader and st2.leader in st.isr, f"no clean leader from ISR {st.isr} after kill: {st2}"
    new = await cluster.to(st2.leader)
    answer = await new.produce_batch(topic, 0, sent[-1][0], label="retry of the last batch on the new leader")
    err, latest, _ = await new.list_offsets(topic, 0, LATEST)
    got = await log_values(new, topic)
    evidence.note("failover", {"old_leader": st.leader, "new_leader": st2.leader, "sent": [b for _, b in sent],
                               "retry": list(answer), "latest_after": latest})
    assert answer == (NONE, sent[-1][1]), (
        f"the new leader {st2.leader} answered the retry of the last acknowledged batch (producer {pid}, epoch "
        f"{epoch}, sequences 4..5, written at offset {sent[-1][1]}) with error {answer[0]} at offset {answer[1]}; "
        f"Kafka: a duplicate, NONE with the original base offset")
    want = [(sent[i][1] + k, f"f{i}-{k}".encode()) for i in range(3) for k in (0, 1)]
    assert (err, latest, got) == (NONE, end, want), (
        f"the retry must append nothing: log end {latest} (was {end}), records {got}; want {want}")
