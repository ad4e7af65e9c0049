"""Interop: our group consumer and a librdkafka (confluent-kafka) consumer in one group share the partitions by
the range assignor (whichever of them leads), and together read every record exactly once."""

from __future__ import annotations

import asyncio
import threading
import time

from confluent_kafka import Consumer as CKConsumer
from kct_client_helpers import run
from kct_group_helpers import create_topic, produce, unique, until

from reference_broker.client.group import GroupConsumer
from reference_broker.client.types import TopicPartition

PARTS = 6


class Librdkafka(threading.Thread):
    """A confluent-kafka consumer polling in its own thread, committing synchronously after each message."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = CKConsumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": "librdkafka",
            "partition.assignment.strategy": "range", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
        })
        self.topic = topic
        self.assigned: set[TopicPartition] = set()
        self.values: list[bytes] = []
        self.member_id = ""
        self.timeline: list[tuple[float, str, object]] = []  # (monotonic, what, detail): evidence on failure
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _on_assign(self, consumer: CKConsumer, parts: list) -> None:
        self.assigned = {TopicPartition(p.topic, p.partition) for p in parts}
        self.timeline.append((time.monotonic(), "assigned", sorted(p.partition for p in parts)))

    def _on_revoke(self, consumer: CKConsumer, parts: list) -> None:
        self.assigned = set()
        self.timeline.append((time.monotonic(), "revoked", sorted(p.partition for p in parts)))

    def run(self) -> None:
        try:
            self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stop.is_set():
                msg = self.consumer.poll(0.05)
                self.member_id = self.consumer.memberid() or self.member_id
                if msg is None:
                    continue
                if msg.error():
                    continue
                self.values.append(msg.value())
                self.timeline.append((time.monotonic(), "read", (msg.partition(), msg.offset())))
                self.consumer.commit(message=msg, asynchronous=False)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.consumer.close()


def test_shares_partitions_with_librdkafka_by_range(group_broker: tuple[str, str]) -> None:
    _, bootstrap = group_broker

    async def go() -> None:
        topic = await create_topic(bootstrap, PARTS)
        group = unique("g")
        rd = Librdkafka(bootstrap, group, topic)
        ours = GroupConsumer(bootstrap, group, assignors=["range"], session_timeout_ms=6000,
                             heartbeat_interval_ms=300, auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=100)
        got: list[bytes] = []
        stop = asyncio.Event()

        ours_reads: list[tuple[float, str, object]] = []

        async def loop() -> None:
            ours.subscribe([topic])
            while not stop.is_set():
                recs = await ours.poll(100)
                got.extend(r.value for rs in recs.values() for r in rs)
                ours_reads.extend((time.monotonic(), "read", (tp.partition, rs[0].offset, len(rs)))
                                  for tp, rs in recs.items())
                if recs:
                    await ours.commit()

        rd.start()
        task = asyncio.get_running_loop().create_task(loop())
        try:
            every = {TopicPartition(topic, p) for p in range(PARTS)}

            def shared() -> bool:
                return (ours.stable and rd.member_id != "" and len(ours.assignment()) == 3
                        and ours.assignment() | rd.assigned == every and not ours.assignment() & rd.assigned)

            await until(shared, 40, "our consumer and librdkafka sharing 3 + 3 partitions")
            # Java's RangeAssignor: members sorted by member id, the first takes partitions 0-2 (whoever leads)
            first, second = sorted([ours.member_id, rd.member_id])
            expected = {first: {TopicPartition(topic, p) for p in range(3)},
                        second: {TopicPartition(topic, p) for p in range(3, 6)}}
            assert ours.assignment() == expected[ours.member_id]
            assert rd.assigned == expected[rd.member_id]

            sent = await produce(bootstrap, topic, PARTS, 120, "mixed")
            await until(lambda: set(got) | set(rd.values) >= sent, 20, "every record read by one of the two")
            await asyncio.sleep(0.3)
            both = got + rd.values
            assert sorted(both) == sorted(sent), _twice(got, rd, ours, ours_reads)
            assert got and rd.values
            assert rd.error is None
        finally:
            stop.set()
            rd.stop.set()
            await task
            await ours.close()
            await asyncio.get_running_loop().run_in_executor(None, rd.join, 15)

    run(go(), timeout=90)


def _twice(got: list[bytes], rd: Librdkafka, ours: GroupConsumer, ours_reads: list) -> str:
    """The evidence for "read twice": which side repeated what, and both members' timelines side by side."""
    lines = [f"a record was read by both members or twice: {len(got) - len(set(got))} repeated by ours, "
             f"{len(rd.values) - len(set(rd.values))} by librdkafka, {len(set(got) & set(rd.values))} by both",
             f"member ids: ours {ours.member_id!r}, librdkafka {rd.member_id!r}"]
    ours_events = [(ns / 1e9, name, detail) for ns, name, detail in ours.events]
    for t, who, what, detail in sorted([(t, "ours", w, d) for t, w, d in ours_events + ours_reads]
                                       + [(t, "librdkafka", w, d) for t, w, d in rd.timeline]):
        lines.append(f"  {t:.3f} {who:10} {what} {detail}")
    return "\n".join(lines[:400])
