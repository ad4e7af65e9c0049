"""The reference client's Admin.list_transactions and Admin.describe_producers against a real broker: Apache Kafka
4.4.0 (one KRaft node, the arbiter) and the reference broker, the same answers from both."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from kct_client_helpers import run

from fixtures import make_target
from reference_broker.client import Admin, NewTopic, Producer, TopicPartition
from reference_broker.client.admin import TransactionListing

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=["reference", "kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    opts = {"memory": "true"} if request.param == "reference" else {}
    with make_target(request.param, config=opts, work_dir=tmp_path_factory.mktemp(f"adm-{request.param}")) as t:
        yield t.bootstrap


def test_list_transactions_and_describe_producers_of_an_open_transaction(bootstrap: str) -> None:
    """An open transaction: listed Ongoing (by state, by producer id, by a pattern of its whole id), not by a
    10-minute duration; its producer described at the leader with the transaction's first offset; after the commit
    listed CompleteCommit and described with no open transaction."""
    name = f"adm-txn-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(name, 0)

    async def go() -> dict:
        async with Admin(bootstrap) as a:
            await a.create_topics([NewTopic(name, 1)])
            await a.cluster.wait_for_topic(name)
            async with Producer(bootstrap, transactional_id=name) as p:
                await p.init_transactions()
                p.begin_transaction()
                await p.send(name, b"a", partition=0)
                await p.send(name, b"b", partition=0)
                await p.flush()
                pid = p.producer_id
                seen = {"ongoing": await a.list_transactions(states=["Ongoing"]),
                        "by_pid": await a.list_transactions(producer_ids=[pid]),
                        "by_pattern": await a.list_transactions(pattern=f"{name}|nothing"),
                        "long": await a.list_transactions(duration_ms=600_000),
                        "producers": (await a.describe_producers([tp]))[tp]}
                await p.commit_transaction()
            seen["pid"] = pid
            for _ in range(50):              # the commit's markers are written after EndTxn answered
                seen["after"] = await a.list_transactions(producer_ids=[pid])
                if seen["after"] and seen["after"][0].state != "PrepareCommit":
                    break
                await asyncio.sleep(0.1)
            for _ in range(50):
                seen["producers_after"] = (await a.describe_producers([tp]))[tp]
                if seen["producers_after"] and seen["producers_after"][0].current_txn_start_offset == -1:
                    break
                await asyncio.sleep(0.1)
            return seen

    s = run(go())
    pid = s["pid"]
    open_ = TransactionListing(name, pid, "Ongoing")
    assert open_ in s["ongoing"] and s["by_pid"] == [open_] and s["by_pattern"] == [open_]
    assert all(t.transactional_id != name for t in s["long"])
    assert [(x.producer_id, x.last_sequence, x.current_txn_start_offset) for x in s["producers"]] == [(pid, 1, 0)]
    assert s["after"] == [TransactionListing(name, pid, "CompleteCommit")]
    assert [(x.producer_id, x.current_txn_start_offset) for x in s["producers_after"]] == [(pid, -1)]
