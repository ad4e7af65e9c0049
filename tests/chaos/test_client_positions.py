"""kafka-python, confluent-kafka and Java client polls record the fetch position they read from (history contract poll
``positions``), so a real-client history shows a read that skipped a record. Real clients against a real
reference broker on loopback; the broker is stopped by the fixture."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.client_stacks import make_client
from chaos.clients import ClientConfig
from conformance.clients import consumer as conformance_consumer
from fixtures.reference import ReferenceTarget
from history import Recorder, read
from reports.analysis import check_history

TOPIC = "pos"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ReferenceTarget({"memory": "true", "kafka.group.initial.rebalance.delay.ms": "0"},
                         work_dir=tmp_path_factory.mktemp("broker")) as t:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": t.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            f.result(10)
        producer = make_client("reference", ClientConfig(t.bootstrap))
        try:
            for v in range(6):
                assert producer.send(TOPIC, 0, "k", v) == v
        finally:
            producer.close()
        yield t.bootstrap


def _poll_until(client, want: int) -> list:  # noqa: ANN001
    polls = []
    deadline = time.monotonic() + 20
    got = 0
    while got < want and time.monotonic() < deadline:
        recs, positions = client.poll(0.5)
        polls.append((recs, positions))
        got += len(recs)
    assert got >= want, polls
    return polls


@pytest.mark.parametrize("name", ["kafka-python", "confluent", "java"])
def test_assigned_polls_record_where_they_read_from(broker: str, name: str) -> None:
    """Each poll that returned records lists, for their partition, the position it read from: where the
    previous poll ended. (The first may list none: the start position is not known before the first fetch.)"""
    c = make_client(name, ClientConfig(broker, group=f"g-{name}"))
    producer = make_client("reference", ClientConfig(broker))
    try:
        c.assign([(TOPIC, 0)])
        polls = _poll_until(c, 6)
        end = producer.send(TOPIC, 0, "k", 100) + 1  # more records after the consumer has a position
        polls += _poll_until(c, 1)
    finally:
        c.close()
        producer.close()
    assert all(pos is None for recs, pos in polls if not recs), polls  # empty polls prove nothing: unlisted
    expect, listed = 0, 0
    for recs, pos in polls:
        if not recs:
            continue
        if pos is not None:
            assert pos == {f"{TOPIC}/0": expect} and recs[0][2] == expect, (pos, recs)
            listed += 1
        expect = recs[-1][2] + 1
    assert listed and expect == end, polls


@pytest.mark.parametrize("name", ["kafka-python", "confluent", "java"])
def test_subscribed_polls_record_no_positions(broker: str, name: str) -> None:
    """In a group a rebalance inside poll may move the position: nothing is claimed."""
    c = make_client(name, ClientConfig(broker, group=f"sub-{name}"))
    try:
        c.subscribe([TOPIC])
        polls = _poll_until(c, 1)
    finally:
        c.close()
    assert all(pos is None for _recs, pos in polls)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_conformance_recorder_writes_positions_with_reset_none(broker: str, client: str, tmp_path: Path) -> None:
    """The conformance recorder lists positions with reset=none (no reset can move a position inside poll)."""
    from conformance.recording import SessionHistory

    path = tmp_path / "h.jsonl"
    hist = SessionHistory("conf-pos", "reference", str(path))
    group = f"conf-{client}"
    with conformance_consumer(client, broker, group, "earliest") as c:  # commit 1 so reset=none has a start
        c.assign(TOPIC, [0])
        c.commit(TOPIC, 0, 1)
    with conformance_consumer(client, broker, group, "none", history=hist) as c:
        c.assign(TOPIC, [0])
        c.position(TOPIC, 0)  # kafka-python: resolve the committed start now (librdkafka knows it after a fetch)
        got = c.poll_records(5, 20)
    hist.close()
    assert [o for _t, _p, o, _v in got][:5] == [1, 2, 3, 4, 5]
    (h,) = read(str(path))
    polls = [op["value"] for op in h.ops if op["f"] == "poll" and op["type"] == "ok" and op["value"]["records"]]
    listed = [v for v in polls if "positions" in v]
    assert listed and all(v["positions"] == {f"{TOPIC}/0": v["records"][0]["offset"]} for v in listed), polls


def test_a_recorded_skip_is_caught(tmp_path: Path) -> None:
    """What the positions buy: a poll from position 2 whose first record is offset 3, while offset 2 was
    acknowledged, is illegal (the recorder's encoding, checked end to end)."""
    path = tmp_path / "skip.jsonl"
    r = Recorder("skip", target="reference", settings={"sub_via": ["assign"]}, sink=str(path))
    for v in range(4):
        r.invoke(0, "send", {"topic": TOPIC, "partition": 0, "key": "k", "value": v})
        r.ok(0, "send", {"topic": TOPIC, "partition": 0, "key": "k", "value": v, "offset": v})
    r.invoke(1, "poll", {})
    r.ok(1, "poll", {"records": [{"topic": TOPIC, "partition": 0, "offset": 3, "key": "k", "value": 3}],
                     "positions": {f"{TOPIC}/0": 2}})
    r.close()
    (h,) = read(str(path))
    assert check_history(h, budget_s=5).lin["partition-log"] == "illegal"
