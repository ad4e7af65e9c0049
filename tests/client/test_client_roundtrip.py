"""Property: whatever records our producer writes (any keys, values, headers, codec, batching), our consumer
reads back identically, in order, at consecutive offsets."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kct_client_helpers import read_all, run

from reference_broker.client.admin import Admin
from reference_broker.client.producer import Producer
from reference_broker.client.types import TopicPartition

maybe_bytes = st.none() | st.binary(max_size=300)
header = st.tuples(st.text(max_size=12), maybe_bytes)
record = st.tuples(maybe_bytes, maybe_bytes, st.lists(header, max_size=4))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    recs=st.lists(record, min_size=1, max_size=30),
    codec=st.sampled_from([None, "gzip", "snappy", "lz4", "zstd"]),
    linger_ms=st.sampled_from([0, 20]),
    batch_size=st.sampled_from([200, 16384]),
)
def test_produce_consume_round_trip(broker_bootstrap: str, recs, codec, linger_ms, batch_size) -> None:
    topic = f"rt-{uuid.uuid4().hex[:10]}"
    tp = TopicPartition(topic, 0)

    async def go():
        async with Admin(broker_bootstrap) as a:
            await a.create_topic(topic, 1)
        async with Producer(
            broker_bootstrap, compression_type=codec, linger_ms=linger_ms, batch_size=batch_size
        ) as p:
            futs = [await p.send(topic, v, key=k, headers=h, partition=0) for k, v, h in recs]
            metas = await asyncio.gather(*futs)
        return metas, await read_all(broker_bootstrap, tp, len(recs))

    metas, got = run(go())
    assert [m.offset for m in metas] == list(range(len(recs)))
    assert [r.offset for r in got] == list(range(len(recs)))
    assert [(r.key, r.value, r.headers) for r in got] == [(k, v, list(h)) for k, v, h in recs]
