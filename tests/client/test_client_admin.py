"""Admin client: create/describe/delete topics, list offsets; Kafka errors surface as kafka.errors classes."""

from __future__ import annotations

import uuid

import kafka.errors as Errors
import pytest
from kct_client_helpers import run

from reference_broker.client.admin import EARLIEST, LATEST, Admin, NewTopic
from reference_broker.client.producer import Producer
from reference_broker.client.types import TopicPartition


def _name() -> str:
    return f"adm-{uuid.uuid4().hex[:10]}"


def test_create_describe_list_delete(broker_bootstrap: str) -> None:
    name = _name()

    async def go():
        async with Admin(broker_bootstrap) as a:
            codes = await a.create_topics([NewTopic(name, 3)])
            described = (await a.describe_topics([name]))[name]
            listed = await a.list_topics()
            deleted = await a.delete_topics([name])
            after = (await a.describe_topics([name]))[name]
        return codes, described, listed, deleted, after

    codes, described, listed, deleted, after = run(go())
    assert codes == {name: 0}
    assert sorted(described.partitions) == [0, 1, 2]
    assert all(p.leader >= 0 and p.leader in p.replicas for p in described.partitions.values())
    assert name in listed
    assert deleted == {name: 0}
    assert after.error_code == Errors.UnknownTopicOrPartitionError.errno and not after.partitions


def test_create_existing_topic_raises_unless_exist_ok(broker_bootstrap: str) -> None:
    name = _name()

    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.create_topic(name, 1)
            with pytest.raises(Errors.TopicAlreadyExistsError):
                await a.create_topic(name, 1)
            return await a.create_topics([NewTopic(name, 1)], exist_ok=True)

    assert run(go()) == {name: Errors.TopicAlreadyExistsError.errno}


def test_delete_unknown_topic_raises(broker_bootstrap: str) -> None:
    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.delete_topics([_name()])

    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        run(go())


def test_list_offsets_earliest_and_latest(broker_bootstrap: str) -> None:
    name = _name()
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)

    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.create_topic(name, 2)
            empty = await a.list_offsets({tp0: EARLIEST, tp1: LATEST})
            async with Producer(a.cluster) as p:
                for i in range(4):  # one batch per record: see the LATEST quirk in test_client_broker_rules.py
                    await p.send_and_wait(name, b"%d" % i, partition=0)
            return empty, await a.earliest_offsets([tp0, tp1]), await a.latest_offsets([tp0, tp1])

    empty, earliest, latest = run(go())
    assert empty[tp0].offset == 0 and empty[tp1].offset == 0
    assert earliest == {tp0: 0, tp1: 0}
    assert latest == {tp0: 4, tp1: 0}


def test_list_offsets_unknown_partition_raises(broker_bootstrap: str) -> None:
    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.list_offsets({TopicPartition(_name(), 0): LATEST})

    with pytest.raises((Errors.UnknownTopicOrPartitionError, Errors.LeaderNotAvailableError)):
        run(go())
