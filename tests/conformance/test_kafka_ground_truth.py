"""Apache Kafka is the arbiter: the suites run against Kafka itself (the `kafka` target, jars from Maven Central) and
every check passes there. A check Kafka fails is a wrong check (or, with evidence and a Kafka issue key, a Kafka
defect listed in KNOWN_KAFKA_DIVERGENCES) — this is what makes a divergence reported against another broker mean
"differs from Kafka".

CI runs the fetch and offsets suites on one Kafka node and the ISR/HW suite on three brokers with a controller of
their own (node faults by PID; with combined roles, killing one node and pausing another would also take the
controller quorum's majority, and the check that needs exactly that skips); both child runs at once, since they
mostly wait on timers. The whole matrix (every suite, 1 and 3 nodes, the property machines) is `./run main`'s.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_conformance_suites import FETCH, ISR_HW, OFFSETS, by_rule, run_suites

pytestmark = pytest.mark.timeout(900)

# (suite file, check name) -> why Kafka's answer is kept as a divergence (a Kafka defect, with its issue key)
KNOWN_KAFKA_DIVERGENCES: dict[tuple[str, str], str] = {}


def _judge(doc: dict) -> list[tuple[str, str, str | None]]:
    """The checks that did not pass on Kafka and are not known Kafka defects."""
    return [(c["nodeid"], c["outcome"], (c["message"] or "")[:600]) for c in doc["checks"]
            if c["outcome"] in ("divergence", "error") and (c["suite"], c["name"]) not in KNOWN_KAFKA_DIVERGENCES]


RUNS = {
    "one-node": ([FETCH, OFFSETS], ()),
    "three-brokers": ([ISR_HW], ("--target-config", "brokers=3", "--target-config", "controllers=1")),
}


@pytest.fixture(scope="module")
def kafka_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Both child runs started together; each test waits for its own."""
    pool = ThreadPoolExecutor(max_workers=len(RUNS))
    futures = {name: pool.submit(run_suites, tmp_path_factory.mktemp(name), paths, *extra, target="kafka",
                                 name=name, timeout_s=800)
               for name, (paths, extra) in RUNS.items()}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def test_fetch_and_offsets_suites_pass_on_one_kafka_node(kafka_runs: Any) -> None:
    doc = kafka_runs["one-node"].result(timeout=850)
    assert doc["target"]["name"] == "kafka" and doc["target"]["version"].startswith("Apache Kafka 4.")
    bad = _judge(doc)
    assert not bad, f"Apache Kafka must pass every check (else the check is wrong):\n{json.dumps(bad, indent=1)}"
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] in ("fetch", "offsets")}
    ran = {r for r, outs in by_rule(doc).items() if outs & {"pass", "divergence"}}
    assert declared <= ran, f"rules not checked on Kafka: {sorted(declared - ran)}"


def test_isr_hw_suite_passes_on_three_kafka_brokers(kafka_runs: Any) -> None:
    """Leader kill -9, follower SIGSTOP, ISR shrink and expand, truncation by epoch: Kafka's own replication."""
    doc = kafka_runs["three-brokers"].result(timeout=850)
    assert (doc["target"]["config"]["brokers"], doc["target"]["config"]["controllers"]) == (3, 1)
    bad = _judge(doc)
    assert not bad, f"Apache Kafka must pass every check (else the check is wrong):\n{json.dumps(bad, indent=1)}"
    skipped = [(c["name"], c["message"]) for c in doc["checks"] if c["outcome"] == "skipped"]
    assert not skipped, f"every ISR/HW check runs on 3 Kafka brokers: {skipped}"
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "isr_hw"}
    assert declared <= set(by_rule(doc)), f"rules not checked: {sorted(declared - set(by_rule(doc)))}"
