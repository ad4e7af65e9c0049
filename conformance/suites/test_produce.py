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
- The same after a truncation (replication and pauses): an old leader that truncated a batch only it had (diverging
  epoch) and leads again answers a retry of a batch below the truncation point as a duplicate, and takes the retry
  of the truncated batch as new data — its producer state is the log's below the truncation point.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import errors as E

from conformance.cluster import Cluster, eventually, state
from conformance.evidence import Evidence
from conformance.properties import ops
from conformance.properties.ops import NONE
from conformance.rules import rule
from conformance.wire import LATEST, Wire, idempotent_batch

SUITE = "produce"
INVALID_REQUEST = E.InvalidRequestError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER = E.OutOfOrderSequenceNumberError.errno
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
rule("PRODUCE-IDEMPOTENT-TRUNCATION", "a replica that truncates its log keeps the producer state of the batches "
     "below the truncation point and forgets the truncated ones: leading again, it answers the retry of a batch "
     "below as a duplicate (NONE, the original base offset) and appends the retry of a truncated batch as new data",
     "KIP-98; KIP-101; UnifiedLog.truncateTo → rebuildProducerState (ProducerStateManager.truncateAndReload: "
     "snapshots above the new end deleted, the latest remaining one reloaded, the log replayed to the new end)",
     SUITE)
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
    st2, new, _ = await cluster.new_leader(topic, st)
    assert st2.leader in st.isr, f"no clean leader from ISR {st.isr} after kill: {st2}"
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


@pytest.mark.requires_capability("replication", "pause_broker")
@pytest.mark.rule("PRODUCE-IDEMPOTENT-TRUNCATION")
async def test_retry_after_truncation_is_a_duplicate(cluster: Cluster, evidence: Evidence) -> None:
    """P writes three acks=all batches. With the followers paused the leader L appends Q's batch B (acks=1), which
    only L has; L is paused until the controller fences it and a follower leads and writes C at B's offset; L
    resumes, truncates B away (diverging epoch) and follows; the preferred leader L is elected again. P's retry of
    its last batch is a duplicate; Q's retry of B is new (after C), not a duplicate of what sits at B's offset."""
    topic, st = await cluster.topic(3, {"min.insync.replicas": "1"})
    old = st.leader
    if old != st.replicas[0]:
        pytest.skip(f"the first leader {old} is not the preferred replica {st.replicas[0]}: cannot move it back")
    followers = [r for r in st.replicas if r != old]
    lw = await cluster.to(old)
    p_id, p_epoch = await init_producer(lw)
    q_id, q_epoch = await init_producer(lw)
    p_batches = [idempotent_batch([f"p{i}".encode()], p_id, p_epoch, i) for i in range(3)]
    for i, b in enumerate(p_batches):
        answer = await lw.produce_batch(topic, 0, b, label=f"P batch {i}")
        assert answer == (NONE, i), f"acks=all batch {i} of P answered {answer}"
    for f in followers:
        cluster.pause(f)
    # A follower fetch parked at the leader when it was paused would still carry B into its socket buffer (read on
    # resume); after replica.fetch.wait.max.ms (Kafka: 500 ms) every parked fetch has been answered empty.
    await asyncio.sleep(1.0)
    b_batch = idempotent_batch([b"q0"], q_id, q_epoch, 0)
    answer = await lw.produce_batch(topic, 0, b_batch, acks=1, label="Q's batch B, only on the leader")
    assert answer == (NONE, 3), f"acks=1 batch B answered {answer}"
    cluster.pause(old)
    for f in followers:
        cluster.resume(f)
    st2, new, _ = await cluster.new_leader(topic, st, among=followers)
    err, base_c, _ = await ops.produce(new, topic, 0, [b"c"], acks=1)
    assert (err, base_c) == (NONE, 3), f"the new leader {st2.leader} must append C at 3 (B never reached it): {err}"
    cluster.resume(old)
    st3, _ = await eventually(lambda: state(new, topic), lambda s: old in s.isr, 90)
    assert old in st3.isr, f"the old leader {old} never rejoined the ISR (after truncating B): {st3}"
    assert await ops.elect_preferred_leader(new, topic, 0) in (NONE, 84), "ElectLeaders failed"  # 84: already
    st4, _ = await eventually(lambda: state(new, topic), lambda s: s.leader == old, 60)
    if st4.leader != old:
        pytest.skip(f"could not move leadership back to {old}: {st4}")
    await cluster.drop(old)            # a connection from before the pause may have been closed meanwhile
    _, back, _ = await cluster.new_leader(topic, st3, among=[old])
    p_retry, _ = await eventually(lambda: back.produce_batch(topic, 0, p_batches[2], label="P's retry"),
                                  lambda r: r[0] == NONE, 15)
    q_retry = await back.produce_batch(topic, 0, b_batch, label="Q's retry of the truncated B")
    got, _ = await eventually(lambda: log_values(back, topic), lambda v: len(v) >= 5, 15)
    evidence.note("truncation", {"old_leader": old, "interim_leader": st2.leader, "p_retry": list(p_retry),
                                 "q_retry": list(q_retry), "log": [[o, v.decode() if v else v] for o, v in got]})
    assert p_retry == (NONE, 2), (
        f"the old leader {old}, after truncating to 3, answered P's retry of its last batch (offset 2, below the "
        f"truncation point) with {p_retry}; Kafka rebuilds producer state up to the truncation offset: a duplicate "
        f"at 2")
    assert q_retry == (NONE, 4), (
        f"Q's retry of B (truncated away; C now at 3) answered {q_retry}; it is new data, appended at 4")
    assert got == [(0, b"p0"), (1, b"p1"), (2, b"p2"), (3, b"c"), (4, b"q0")], f"the partition holds {got}"
