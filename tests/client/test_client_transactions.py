"""The reference client's transactional producer and read_committed consumer against a real broker.

Targets: TXN_TARGETS. Apache Kafka 4.4.0 (`kafka`, one KRaft node) is the arbiter and runs now. The reference broker
joins the list when it serves transactions (branch txnbroker: until then it refuses every transactional request,
GAPS.md, and a test on it would only show that) — the tests are written target-neutral so adding "reference" is
the whole change. KCT_TXN_TARGETS=kafka,reference overrides the list.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import kafka.errors as Errors
import pytest
from kct_client_helpers import run

from fixtures import make_target
from reference_broker.client import (
    Admin,
    Consumer,
    GroupConsumer,
    NewTopic,
    Producer,
    TopicPartition,
    TxnState,
)

TXN_TARGETS = [t for t in os.environ.get("KCT_TXN_TARGETS", "kafka").split(",") if t]
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=TXN_TARGETS)
def txn_bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node broker that serves transactions (Kafka: transaction state log of replication factor 1);
    KCT_TXN_BOOTSTRAP=host:port uses a running one instead (for one target only)."""
    if os.environ.get("KCT_TXN_BOOTSTRAP"):
        yield os.environ["KCT_TXN_BOOTSTRAP"]
        return
    opts = {"memory": "true"} if request.param == "reference" else {}
    with make_target(request.param, config=opts, work_dir=tmp_path_factory.mktemp(f"txn-{request.param}")) as t:
        yield t.bootstrap


def _topic(bootstrap: str, partitions: int = 2, configs: dict[str, str] | None = None) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_topics([NewTopic(name, partitions, configs=configs or {})])
            # Ready = every partition's leader answers: Kafka's leaders learn of a new topic from the metadata log
            # a moment after CreateTopics answers (a first transactional send got NOT_LEADER_OR_FOLLOWER).
            deadline = asyncio.get_running_loop().time() + 15
            while True:
                try:
                    await admin.latest_offsets([TopicPartition(name, i) for i in range(partitions)])
                    return
                except Errors.KafkaError:
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.1)

    run(create())
    return name


async def _read(bootstrap: str, topic: str, partitions: int, isolation: int, polls: int = 6) -> list[tuple]:
    """(partition, offset, value) of everything readable from offset 0, at this isolation level."""
    out: list[tuple] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation,
                        fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        for _ in range(polls):
            got = await c.poll(200)
            out += [(r.partition, r.offset, r.value) for recs in got.values() for r in recs]
    return sorted(out)


def test_read_committed_sees_committed_never_aborted(txn_bootstrap: str) -> None:
    """KIP-98: a committed transaction is visible in every partition it wrote; an aborted one never is under
    read_committed (aborted_transactions + ABORT marker), while read_uncommitted sees its records. Markers are
    never handed out."""
    topic = _topic(txn_bootstrap)

    async def go() -> tuple[list, list]:
        async with Producer(txn_bootstrap, transactional_id=f"t-{topic}") as p:
            await p.init_transactions()
            for i, abort in enumerate([False, True, False, True, True, False]):
                p.begin_transaction()
                futs = [await p.send(topic, f"{'a' if abort else 'c'}{i}-{part}".encode(), partition=part)
                        for part in (0, 1)]
                if abort:
                    await p.flush()  # the records reach the log first: the abort must hide them
                    await p.abort_transaction()
                else:
                    await p.commit_transaction()
                    assert all(f.result().offset >= 0 for f in futs)
        return (await _read(txn_bootstrap, topic, 2, 1), await _read(txn_bootstrap, topic, 2, 0))

    committed, uncommitted = run(go())
    values = [v.decode() for _, _, v in committed]
    assert sorted(values) == sorted(f"c{i}-{p}" for i in (0, 2, 5) for p in (0, 1)), committed
    assert sorted(v.decode() for _, _, v in uncommitted) == sorted(f"{x}{i}-{p}" for i, x in enumerate("cacaac")
                                                                  for p in (0, 1)), uncommitted
    assert all(v is not None for _, _, v in uncommitted)  # no control record came out as a record


def test_open_transaction_is_invisible_until_commit(txn_bootstrap: str) -> None:
    """read_committed stops at the last stable offset: an open transaction's records (and everything after them)
    wait for its commit."""
    topic = _topic(txn_bootstrap, 1)
    tp = TopicPartition(topic, 0)

    async def go() -> None:
        async with Producer(txn_bootstrap, transactional_id=f"t-{topic}") as p, \
                Producer(txn_bootstrap) as plain:
            await p.init_transactions()
            p.begin_transaction()
            await (await p.send(topic, b"open", partition=0))
            await plain.send_and_wait(topic, b"after", partition=0)
            async with Consumer(txn_bootstrap, auto_offset_reset="earliest", isolation_level=1,
                                fetch_max_wait_ms=100) as c:
                c.assign([tp])
                got = await c.poll(800)
                assert not got.get(tp), got
                assert c.last_stable_offsets[tp] == 0 and c.high_watermarks[tp] == 2
                await p.commit_transaction()
                seen: list[bytes] = []
                for _ in range(10):
                    seen += [r.value for r in (await c.poll(200)).get(tp, [])]
                    if len(seen) >= 2:
                        break
                assert seen == [b"open", b"after"]

    run(go())


def test_a_newer_producer_fences_the_older_one(txn_bootstrap: str) -> None:
    """InitProducerId for the same transactional id bumps the epoch: the old producer's commit is refused with
    PRODUCER_FENCED (fatal: the producer refuses everything after), and its open transaction is aborted."""
    topic = _topic(txn_bootstrap, 1)

    async def go() -> None:
        tid = f"t-{topic}"
        old = Producer(txn_bootstrap, transactional_id=tid, max_block_ms=10000)
        await old.start()
        await old.init_transactions()
        old.begin_transaction()
        await (await old.send(topic, b"zombie", partition=0))
        async with Producer(txn_bootstrap, transactional_id=tid) as new:
            await new.init_transactions()
            assert new.producer_epoch > old.producer_epoch or new.producer_id != old.producer_id
            with pytest.raises(Errors.ProducerFencedError):
                await old.commit_transaction()
            assert old.txn is not None and old.txn.state is TxnState.FATAL_ERROR
            with pytest.raises(Errors.ProducerFencedError):
                old.begin_transaction()
            new.begin_transaction()
            await new.send(topic, b"live", partition=0)
            await new.commit_transaction()
        await old.close()
        assert [v for _, _, v in await _read(txn_bootstrap, topic, 1, 1)] == [b"live"]

    run(go())


def test_back_to_back_transactions_ride_out_concurrent_transactions(txn_bootstrap: str) -> None:
    """A transaction begun right after a commit meets the coordinator still writing markers (CONCURRENT_TRANSACTIONS
    to AddPartitionsToTxn): the producer retries as Java does and every transaction commits."""
    topic = _topic(txn_bootstrap, 3)

    async def go() -> tuple[list, list]:
        async with Producer(txn_bootstrap, transactional_id=f"t-{topic}") as p:
            await p.init_transactions()
            for i in range(25):
                p.begin_transaction()
                for part in range(3):
                    await p.send(topic, f"v{i}-{part}".encode(), partition=part)
                await p.commit_transaction()
            assert p.txn is not None
            return p.txn.errors_seen, await _read(txn_bootstrap, topic, 3, 1)

    errors, got = run(go())
    assert {name for _, name in errors} <= {"ConcurrentTransactionsError", "CoordinatorLoadInProgressError"}, errors
    assert len(got) == 75


def test_consume_transform_produce_commits_offsets_in_the_transaction(txn_bootstrap: str) -> None:
    """send_offsets_to_transaction (AddOffsetsToTxn + TxnOffsetCommit with the member's generation, KIP-447):
    the group's offsets move with the transaction's commit and not with its abort."""
    src, dst = _topic(txn_bootstrap, 1), _topic(txn_bootstrap, 1)
    group = f"g-{src}"
    tp = TopicPartition(src, 0)

    async def go() -> None:
        async with Producer(txn_bootstrap) as plain:
            for i in range(6):
                await plain.send_and_wait(src, f"in{i}".encode(), partition=0)
        async with GroupConsumer(txn_bootstrap, group, enable_auto_commit=False, auto_offset_reset="earliest",
                                 isolation_level=1, session_timeout_ms=6000, heartbeat_interval_ms=500) as c, \
                Producer(txn_bootstrap, transactional_id=f"t-{src}") as p:
            await p.init_transactions()
            c.subscribe([src])
            got: list = []
            for _ in range(40):
                got += (await c.poll(300)).get(tp, [])
                if len(got) >= 6:
                    break
            assert [r.value for r in got] == [f"in{i}".encode() for i in range(6)]
            # first transaction: inputs 0..2, committed
            p.begin_transaction()
            for r in got[:3]:
                await p.send(dst, b"out-" + r.value, partition=0)
            await p.send_offsets_to_transaction({tp: got[2].offset + 1}, c.group_metadata())
            await p.commit_transaction()
            assert await c.committed([tp]) == {tp: 3}
            # second: inputs 3..5, aborted -> the committed offset stays at 3
            p.begin_transaction()
            for r in got[3:]:
                await p.send(dst, b"out-" + r.value, partition=0)
            await p.send_offsets_to_transaction({tp: got[5].offset + 1}, c.group_metadata())
            await p.abort_transaction()
            assert await c.committed([tp]) == {tp: 3}
        out = [v for _, _, v in await _read(txn_bootstrap, dst, 1, 1)]
        assert out == [b"out-in0", b"out-in1", b"out-in2"]

    run(go())


def test_stale_generation_cannot_commit_offsets_in_a_transaction(txn_bootstrap: str) -> None:
    """KIP-447: TxnOffsetCommit with a generation the group no longer has is refused (ILLEGAL_GENERATION or
    UNKNOWN_MEMBER_ID -> CommitFailedError), and the transaction is abortable, not fatal."""
    src = _topic(txn_bootstrap, 1)
    group = f"g-{src}"
    tp = TopicPartition(src, 0)

    async def go() -> None:
        from reference_broker.client import ConsumerGroupMetadata

        async with GroupConsumer(txn_bootstrap, group, enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=500) as c, \
                Producer(txn_bootstrap, transactional_id=f"t-{src}", max_block_ms=10000) as p:
            c.subscribe([src])
            for _ in range(40):
                await c.poll(200)
                if c.stable:
                    break
            meta = c.group_metadata()
            assert meta.generation_id >= 1
            await p.init_transactions()
            p.begin_transaction()
            stale = ConsumerGroupMetadata(group, meta.generation_id + 5, meta.member_id)
            with pytest.raises(Errors.CommitFailedError):
                await p.send_offsets_to_transaction({tp: 0}, stale)
            assert p.txn is not None and p.txn.state is TxnState.ABORTABLE_ERROR
            await p.abort_transaction()
            assert p.txn.state is TxnState.READY
            assert await c.committed([tp]) == {}

    run(go())


def test_a_failed_record_makes_the_transaction_abortable_and_abort_bumps_the_epoch(txn_bootstrap: str) -> None:
    """A record that fails (here: larger than the topic's max.message.bytes, MESSAGE_TOO_LARGE) cannot be part of a
    committed transaction: commit raises, the producer must abort, and after the abort its epoch is bumped
    (InitProducerId with its id and epoch, KIP-360) so the next transaction starts clean."""
    # a topic whose leader answers before the first send (the full run once got NOT_LEADER_OR_FOLLOWER on Kafka)
    topic = _topic(txn_bootstrap, 1, {"max.message.bytes": "2000"})

    async def go() -> None:
        async with Producer(txn_bootstrap, transactional_id=f"t-{topic}", retries=0) as p:
            await p.init_transactions()
            epoch = p.producer_epoch
            p.begin_transaction()
            await p.send(topic, b"small", partition=0)
            await p.flush()
            big = await p.send(topic, b"x" * 5000, partition=0)
            with pytest.raises(Errors.KafkaError):
                await p.commit_transaction()
            assert big.done() and big.exception() is not None
            assert p.txn is not None and p.txn.state is TxnState.ABORTABLE_ERROR and not p.txn.commit_sent
            await p.abort_transaction()
            assert p.producer_epoch == epoch + 1
            p.begin_transaction()
            await p.send(topic, b"next", partition=0)
            await p.commit_transaction()
        assert [v for _, _, v in await _read(txn_bootstrap, topic, 1, 1)] == [b"next"]

    run(go())


def test_transactional_calls_out_of_order_are_refused(txn_bootstrap: str) -> None:
    topic = _topic(txn_bootstrap, 1)

    async def go() -> None:
        async with Producer(txn_bootstrap, transactional_id=f"t-{topic}") as p:
            with pytest.raises(Errors.IllegalStateError):
                p.begin_transaction()  # before init_transactions
            await p.init_transactions()
            with pytest.raises(Errors.IllegalStateError):
                await p.send(topic, b"x", partition=0)  # outside a transaction
            with pytest.raises(Errors.IllegalStateError):
                await p.commit_transaction()
            p.begin_transaction()
            await p.commit_transaction()  # empty: no EndTxn needed
        await asyncio.sleep(0)

    run(go())


@pytest.mark.parametrize("allowed", [2, 1])
def test_transaction_version_follows_the_finalized_feature(txn_bootstrap: str, allowed: int) -> None:
    """A cluster that finalizes transaction.version 2 (Kafka 4.x, the reference broker by default) gets the TV2
    protocol from a producer that allows it: no AddPartitionsToTxn (Produce v12 adds the partition), EndTxn v5 bumps
    the epoch at every commit and abort; a producer capped at transaction_version=1 keeps one epoch (TV1). Both
    commit what they sent."""
    topic = _topic(txn_bootstrap, 2)

    async def go() -> None:
        async with Producer(txn_bootstrap, transactional_id=f"tv-{topic}",
                            transaction_version=allowed) as p:
            await p.init_transactions()
            assert p.txn is not None
            conn = await p.txn._coordinator(1, p.txn.transactional_id)
            finalized = conn.finalized_features.get("transaction.version", 0)
            tv2 = finalized >= 2 and allowed >= 2
            assert p.txn.tv2 is tv2
            pid, epochs = p.producer_id, [p.producer_epoch]
            for i, commit in enumerate([True, False, True]):
                p.begin_transaction()
                for part in range(2):
                    await (await p.send(topic, f"v{i}-{part}".encode(), partition=part))
                await (p.commit_transaction() if commit else p.abort_transaction())
                epochs.append(p.producer_epoch)
            assert p.producer_id == pid
            assert epochs == ([epochs[0] + i for i in range(4)] if tv2 else [epochs[0]] * 4), (finalized, epochs)
            assert not any(api == "AddPartitionsToTxn" for api, _ in p.txn.errors_seen) or not tv2
        got = sorted(v for _, _, v in await _read(txn_bootstrap, topic, 2, 1))
        assert got == [b"v0-0", b"v0-1", b"v2-0", b"v2-1"], got

    run(go())
