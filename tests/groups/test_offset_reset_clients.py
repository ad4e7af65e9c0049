"""auto.offset.reset and resuming from committed offsets, with confluent-kafka (librdkafka) as the client.

Kafka's rules: a group with no committed offset for a partition starts where auto.offset.reset says (earliest =
log start, latest = high watermark, none/error = an error to the application); a committed offset below the log
start (after DeleteRecords) is out of range and is reset by the same policy; a restarted member resumes from the
committed offset — also after the broker restarts (offsets are durable in __consumer_offsets).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def setup_topic(bs: str, topic: str, n: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": bs})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(10) == 0
    return admin


def consumer(bs: str, group: str, reset: str) -> Consumer:
    return Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": reset,
                     "enable.auto.commit": False, "session.timeout.ms": 6000})


def first_offset_or_error(c: Consumer, topic: str, timeout: float = 15) -> int | KafkaError:
    if not c.assignment():
        c.subscribe([topic])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            return m.error()
        return m.offset()
    raise AssertionError("neither a record nor an error")


@pytest.mark.parametrize("reset,expected", [("earliest", 0), ("latest", 10)])
def test_new_group_reset_policy(broker, reset, expected):
    bs = broker.bootstrap
    setup_topic(bs, "r", 10)
    c = consumer(bs, f"new-{reset}", reset)
    if reset == "latest":
        c.subscribe(["r"])
        deadline = time.monotonic() + 15
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        time.sleep(0.5)                          # position resolved to the HW (10) before the next produce
        p = Producer({"bootstrap.servers": bs})
        p.produce("r", b"after", partition=0)
        p.flush(10)
    got = first_offset_or_error(c, "r")
    c.close()
    assert got == expected


def test_new_group_reset_none_is_an_error(broker):
    bs = broker.bootstrap
    setup_topic(bs, "r", 3)
    c = consumer(bs, "new-none", "error")
    got = first_offset_or_error(c, "r")
    c.close()
    assert isinstance(got, KafkaError) and got.code() == KafkaError._AUTO_OFFSET_RESET, got


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_committed_offset_below_log_start_is_reset(broker, reset):
    """Committed 5, then DeleteRecords to 10: the committed offset is out of range; the policy decides."""
    bs = broker.bootstrap
    admin = setup_topic(bs, "d", 20)
    c = consumer(bs, f"trim-{reset}", reset)
    c.commit(offsets=[TopicPartition("d", 0, 5)], asynchronous=False)
    res = admin.delete_records([TopicPartition("d", 0, 10)])
    for f in res.values():
        assert f.result(10).low_watermark == 10
    if reset == "latest":
        # wait until the out-of-range committed offset has been reset to the HW (20), then write offset 20
        c.subscribe(["d"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            c.poll(0.1)
            if c.assignment() and c.position([TopicPartition("d", 0)])[0].offset == 20:
                break
        p = Producer({"bootstrap.servers": bs})
        p.produce("d", b"after-reset", partition=0)
        assert p.flush(10) == 0
    got = first_offset_or_error(c, "d")
    c.close()
    if reset == "error":
        assert isinstance(got, KafkaError) and got.code() == KafkaError._AUTO_OFFSET_RESET, got
    else:
        assert got == {"earliest": 10, "latest": 20}[reset]


def test_restarted_member_resumes_from_committed_offset_across_broker_restart(durable_broker):
    bs = durable_broker.bootstrap
    setup_topic(bs, "resume", 30)
    c = consumer(bs, "resumers", "earliest")
    c.subscribe(["resume"])
    seen = []
    deadline = time.monotonic() + 20
    while len(seen) < 12 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.offset())
            if m.offset() == 11:
                c.commit(message=m, asynchronous=False)          # committed position: 12
    c.close()
    assert seen[:12] == list(range(12))
    durable_broker.restart()
    c = consumer(bs, "resumers", "earliest")
    assert first_offset_or_error(c, "resume") == 12
    c.close()
