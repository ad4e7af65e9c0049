"""Parked-fetch wake latency and max_wait error, timed on the wire by the reference client's Connection.

- wake: a Fetch (max_wait 5 s, min_bytes 1) parked on an idle partition, then an acks=1 Produce on a second
  connection; the time from the Produce's answer to the Fetch's answer (negative: the Fetch answered first).
  Kafka's DelayedFetch completes when the append advances the high watermark (ReplicaManager.fetchMessages,
  DelayedFetch.tryComplete), so on one node both answers should leave within the same millisecond.
- max_wait error: Fetches on the idle partition with max_wait 100 ms; answer time minus 100 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from reference_broker.client.protocol import Connection

from .clients import create_topic
from .stats import pct

MS = 1e6
PARK_MS = 5000
MAX_WAIT_MS = 100


def _batch(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


def _fetch(topic: str, offset: int, max_wait: int) -> FetchRequest:
    FT = FetchRequest.FetchTopic
    return FetchRequest[11](replica_id=-1, max_wait_ms=max_wait, min_bytes=1, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1,
                            topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                current_leader_epoch=-1, log_start_offset=-1)])],
                            forgotten_topics_data=[], rack_id="")


def _produce(topic: str) -> ProduceRequest:
    PT = ProduceRequest.TopicProduceData
    return ProduceRequest[8](transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        PT(name=topic, partition_data=[PT.PartitionProduceData(index=0, records=_batch(b"v"))])])


async def _measure(host: str, port: int, topic: str, samples: int, max_wait_samples: int) -> dict:
    fetcher = await Connection.connect(host, port)
    producer = await Connection.connect(host, port)
    try:
        await fetcher.api_versions()
        await producer.api_versions()
        wake, wake_from_send, early = [], [], 0
        offset = 0
        for _ in range(samples):
            f = fetcher.submit(_fetch(topic, offset, PARK_MS))
            await asyncio.sleep(0.005)
            early += f.done()
            ack = await producer.request(_produce(topic))
            r = await asyncio.wait_for(f, 10)
            wake.append((r.received_ns - ack.received_ns) / MS)
            wake_from_send.append((r.received_ns - ack.sent_ns) / MS)
            offset += 1
        errs = []
        for _ in range(max_wait_samples):
            r = await fetcher.request(_fetch(topic, offset, MAX_WAIT_MS))
            errs.append(r.rtt_ns / MS - MAX_WAIT_MS)
    finally:
        await fetcher.close()
        await producer.close()
    return {"samples": samples, "max_wait_samples": max_wait_samples,
            "wake_ack_to_answer_ms_p50": round(pct(wake, .5), 3), "wake_ack_to_answer_ms_p99": round(pct(wake, .99), 3),
            "wake_send_to_answer_ms_p50": round(pct(wake_from_send, .5), 3),
            "wake_send_to_answer_ms_p99": round(pct(wake_from_send, .99), 3),
            "answered_before_produce": early,
            "max_wait_error_ms_p50": round(pct(errs, .5), 3), "max_wait_error_ms_p99": round(pct(errs, .99), 3),
            "max_wait_error_ms_mean": round(statistics.mean(errs), 3)}


def latencies(bootstrap: str, samples: int, *, topic: str = "lat", max_wait_samples: int | None = None) -> dict:
    """Wake latency over `samples` parked fetches and max_wait error over max(20, samples/4) idle fetches, on a
    fresh one-partition topic, both connections to its leader."""
    create_topic(bootstrap, topic, 1, 1)
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    leader = md.brokers[md.topics[topic].partitions[0].leader]
    n_wait = max_wait_samples if max_wait_samples is not None else max(20, samples // 4)
    return asyncio.run(_measure(leader.host, leader.port, topic, samples, n_wait))
