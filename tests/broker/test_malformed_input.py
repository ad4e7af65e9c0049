"""Bad input closes (or answers) only the offending connection; the broker keeps serving, and nothing is lost."""
from __future__ import annotations

import asyncio
import struct

import psutil
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import errors as E
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from reference_broker.client.protocol import Connection

from ._wire import batch, connect, create_topic, fetch_request, only_partition, produce


async def _assert_serving_and_intact(broker, topic: str, expected: int) -> None:
    """A fresh connection still works and every record written before is still there."""
    c = await connect(broker)
    r = await c.request(fetch_request([(topic, 0, 0)], 0, 1))
    p = only_partition(r.body)
    assert p.error_code == 0 and p.high_watermark == expected
    await c.close()


async def _closed_by_broker(c: Connection) -> bool:
    return await c.wait_closed(timeout=5)


async def _setup(broker) -> None:
    c = await connect(broker)
    await create_topic(c, "keep")
    assert (await produce(c, "keep", batch([b"precious"]))).error_code == 0
    await c.close()


async def test_truncated_frame(broker):
    await _setup(broker)
    bystander = await connect(broker)
    bad = await Connection.connect("127.0.0.1", broker.port)
    await bad.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00\x00")   # promises 100 bytes, sends 4
    await bad.close()
    # the bystander connection opened before is unaffected
    assert (await bystander.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
            ).body.error_code == 0
    await bystander.close()
    await _assert_serving_and_intact(broker, "keep", 1)


async def test_frame_above_socket_request_max_bytes_closes_connection(broker):
    await _setup(broker)
    bad = await Connection.connect("127.0.0.1", broker.port)
    await bad.send_raw(struct.pack(">i", 104_857_600 + 1))
    assert await _closed_by_broker(bad)
    neg = await Connection.connect("127.0.0.1", broker.port)
    await neg.send_raw(struct.pack(">i", -5))
    assert await _closed_by_broker(neg)
    await _assert_serving_and_intact(broker, "keep", 1)


async def test_unknown_api_key_closes_connection(broker):
    await _setup(broker)
    bad = await Connection.connect("127.0.0.1", broker.port)
    payload = struct.pack(">hhi", 999, 0, 7) + struct.pack(">h", 1) + b"x"
    await bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert await _closed_by_broker(bad)
    await _assert_serving_and_intact(broker, "keep", 1)


async def test_unsupported_version_of_other_api_closes_connection(broker):
    await _setup(broker)
    bad = await Connection.connect("127.0.0.1", broker.port)
    payload = struct.pack(">hhi", 0, 2, 7) + struct.pack(">h", 1) + b"x"      # Produce v2 is below Kafka 4's v3
    await bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert await _closed_by_broker(bad)
    await _assert_serving_and_intact(broker, "keep", 1)


async def test_unsupported_api_versions_version_gets_v0_fallback(broker):
    """KIP-511: answer UNSUPPORTED_VERSION in a v0 body with the supported ranges, header v0."""
    payload = struct.pack(">hhi", 18, 99, 4242) + struct.pack(">h", 1) + b"x" + b"\x00"
    raw = await _raw_roundtrip(broker.port, payload)
    (corr,) = struct.unpack_from(">i", raw)
    body = ApiVersionsResponse.decode(raw[4:], version=0)
    assert corr == 4242
    assert body.error_code == E.UnsupportedVersionError.errno
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[18] == (0, 4) and keys[1][0] == 4 and 0 in keys


async def _raw_roundtrip(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(struct.pack(">i", len(payload)) + payload)
    await writer.drain()
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
    data = await asyncio.wait_for(reader.readexactly(size), 5)
    writer.close()
    return data


async def test_corrupt_batch_is_rejected_and_nothing_written(broker):
    """LogValidator: a CRC mismatch is CORRUPT_MESSAGE and the log is unchanged."""
    await _setup(broker)
    c = await connect(broker)
    good = bytearray(batch([b"a", b"b"]))
    good[-1] ^= 0xFF                      # flip a bit inside the records: CRC no longer matches
    r = await produce(c, "keep", bytes(good))
    assert r.error_code == E.CorruptRecordError.errno
    two = batch([b"a"]) + batch([b"b"])
    assert (await produce(c, "keep", two)).error_code == E.InvalidRecordError.errno
    assert (await produce(c, "keep", b"")).error_code == E.InvalidRecordError.errno
    await c.close()
    await _assert_serving_and_intact(broker, "keep", 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(min_size=0, max_size=300), api_key=st.integers(-2, 100), version=st.integers(-1, 20))
def test_fuzz_garbage_frames_never_hurt_other_clients(broker, junk, api_key, version):
    """Random frames (random key/version/body) or raw garbage: the broker answers or closes, never dies."""

    async def go():
        if not getattr(broker, "_fuzz_ready", False):
            await _setup(broker)
            broker._fuzz_ready = True
        bad = await Connection.connect("127.0.0.1", broker.port)
        payload = struct.pack(">hhi", api_key, version, 1) + junk
        await bad.send_raw(struct.pack(">i", len(payload)) + payload)
        await bad.send_raw(junk)
        await asyncio.sleep(0)
        await bad.close()
        await _assert_serving_and_intact(broker, "keep", 1)

    asyncio.run(asyncio.wait_for(go(), 20))
    assert psutil.Process(broker.pid).status() != psutil.STATUS_ZOMBIE, "broker process died"


async def test_failed_acks0_produce_closes_connection(broker):
    """KafkaApis.handleProduceRequest: an acks=0 produce that fails closes the connection; a good one does not."""
    await _setup(broker)
    c = await connect(broker)
    await produce(c, "keep", batch([b"fire-and-forget"]), acks=0)
    assert not await c.wait_closed(timeout=0.5), "a successful acks=0 produce must keep the connection"
    await produce(c, "no-such-topic", batch([b"lost"]), acks=0)
    assert await _closed_by_broker(c)
    await _assert_serving_and_intact(broker, "keep", 2)
