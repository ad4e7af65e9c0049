"""How `./run test`'s two workers (pytest-xdist) share the run.

A file is one unit of work (its module fixtures, e.g. one replicated cluster per module, start once), except that
the files which start Apache Kafka JVM clusters form one unit together: two 3-node Kafka clusters side by side on 2
cores starve each other (a follower that should leave the ISR in 3 s, a controller that should fail over), which
tests timing, not Kafka. The longest units go first, so no long file starts last and runs alone at the end.
"""
from __future__ import annotations

from typing import Any

import pytest

# Files that start Kafka (or Kafka in Docker) JVMs: run one after another on one worker.
JVM_UNIT = "kafka-jvm-clusters"
JVM_FILES = (
    "tests/conformance/test_kafka_ground_truth.py",
    "tests/fixtures/test_target_kafka.py",
    "tests/chaos/test_run_kafka.py",
    "tests/chaos/test_java_client.py",
    "tests/fixtures/test_target_docker_kafka.py",
    "tests/chaos/test_txn_workload.py",
    "tests/client/test_client_transactions.py",
    "tests/broker/test_kafka_answer_shapes.py",
    "tests/broker/test_create_topics_assignments.py",
)
# The longest units (measured: a serial run's per-file times), started first in this order.
LONGEST_FIRST = (
    "tests/conformance/test_conformance_suites.py",
    *JVM_FILES,
    "tests/reports/test_spark_job.py",
    "tests/conformance_properties/test_conformance_properties.py",
    "tests/chaos/test_run.py",
    "tests/cluster/test_cluster_replication.py",
    "tests/client/test_client_group.py",
    "tests/reports/test_spark_agreement.py",
    "tests/cluster/test_cluster_failover.py",
    "tests/reports/test_never_cry_wolf.py",
)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(_file(it.nodeid), len(rank)))   # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = _file(nodeid)
            return JVM_UNIT if path in JVM_FILES else path

    return FileScheduling(config, log)
