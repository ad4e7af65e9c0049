"""CreateTopics with manual replica assignments, answered as Apache Kafka answers them (ReplicationControlManager
.createTopic): the same request sent to a 2-broker reference cluster and a 2-node Kafka gets the same error codes,
and an accepted assignment places replicas and the leader where it says."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.wire import Wire, unique_name
from fixtures import make_target
from fixtures.target import Target

pytestmark = pytest.mark.timeout(240)

NONE, INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 0, 42, 39


@pytest.fixture(scope="module", params=["reference", "kafka"])
def two_brokers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    work: Path = tmp_path_factory.mktemp(request.param)
    with make_target(request.param, work_dir=work, config=["brokers=2"]) as t:
        yield t


CASES = [  # (assignments as partition -> replicas, partitions, replication factor, expected error)
    ({0: [1], 1: [0]}, -1, -1, NONE),
    ({0: [1, 0]}, -1, -1, NONE),
    ({0: [1]}, 1, -1, INVALID_REQUEST),                # numPartitions must be -1
    ({0: [1]}, -1, 1, INVALID_REQUEST),                # replicationFactor must be -1
    ({0: []}, -1, -1, INVALID_REPLICA_ASSIGNMENT),     # empty replica list
    ({0: [7]}, -1, -1, INVALID_REPLICA_ASSIGNMENT),    # no such broker
    ({0: [1, 1]}, -1, -1, INVALID_REPLICA_ASSIGNMENT),  # a broker twice
    ({0: [0], 1: [0, 1]}, -1, -1, INVALID_REPLICA_ASSIGNMENT),  # lengths differ
    ({0: [0], 2: [1]}, -1, -1, INVALID_REPLICA_ASSIGNMENT),     # not 0..n-1
]


@pytest.mark.parametrize(("assigned", "partitions", "rf", "expected"), CASES)
def test_manual_assignment_answers_as_kafka(two_brokers: Target, assigned: dict[int, list[int]], partitions: int,
                                            rf: int, expected: int) -> None:
    async def go() -> None:
        w = await Wire.connect(two_brokers.bootstrap)
        try:
            from kafka.protocol.admin import CreateTopicsRequest

            T = CreateTopicsRequest.CreatableTopic
            A = T.CreatableReplicaAssignment
            name = unique_name("assigned")
            req = CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=rf,
                                                assignments=[A(partition_index=i, broker_ids=r)
                                                             for i, r in assigned.items()], configs=[])],
                                      timeout_ms=10000, validate_only=False)
            r = await w.request("CreateTopics", req)
            got = r.body.topics[0].error_code
            assert got == expected, f"{two_brokers.name}: {assigned} answered {got} " \
                                    f"({r.body.topics[0].error_message}), Kafka's rule: {expected}"
            if expected == NONE:
                await w.wait_topic_ready(name, len(assigned))
                md = (await w.metadata([name]))[name]["partitions"]
                assert {i: (p["replicas"], p["leader"]) for i, p in md.items()} == {
                    i: (r, r[0]) for i, r in assigned.items()}, md
        finally:
            await w.close()

    asyncio.run(go())
