"""Protocol-level client: any request at any version, correlation, pipelining, timing, raw frames, close."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kct_client_helpers import run

from reference_broker.client.cluster import Cluster, parse_bootstrap
from reference_broker.client.protocol import (
    Connection,
    ConnectionClosedError,
    encode_request,
    negotiate_versions,
    request_class,
)


def _hostport(bootstrap: str) -> tuple[str, int]:
    return parse_bootstrap(bootstrap)[0]


def test_negotiate_versions_picks_highest_common() -> None:
    lib_max = MetadataRequest.max_version
    got = negotiate_versions({3: (0, lib_max + 5), 1: (0, 4), 0: (lib_max + 100, lib_max + 200), 9999: (0, 1)})
    assert got[3] == lib_max  # library is the limit
    assert got[1] == 4  # broker is the limit
    assert 0 not in got  # no overlap: not negotiable
    assert 9999 not in got  # unknown to the library


def test_request_class_lookup_covers_core_keys() -> None:
    assert request_class(1) is FetchRequest
    assert request_class(18) is ApiVersionsRequest
    assert request_class(3) is MetadataRequest


def test_api_versions_negotiation_against_broker(broker_bootstrap: str) -> None:
    async def go() -> tuple[dict, dict]:
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            versions = await conn.api_versions()
            return versions, conn.broker_versions

    versions, broker = run(go())
    assert {0, 1, 2, 3, 18} <= set(versions)
    for key, v in versions.items():
        bmin, bmax = broker[key]
        assert bmin <= v <= bmax
        assert v <= request_class(key).max_version
        assert v == min(bmax, request_class(key).max_version)


def test_every_metadata_version_round_trips(broker_bootstrap: str) -> None:
    """Send Metadata at each version the broker advertises; the decoded answer has that version."""

    async def go() -> list[tuple[int, int, int]]:
        out = []
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            await conn.api_versions()
            bmin, _ = conn.broker_versions[3]
            for v in range(bmin, conn.versions[3] + 1):
                resp = await conn.request(MetadataRequest[v](topics=[] if v == 0 else None), v)
                out.append((v, resp.body.version, len(resp.body.brokers)))
        return out

    rows = run(go())
    assert len(rows) >= 2
    for asked, got, brokers in rows:
        assert got == asked
        assert brokers >= 1


def test_api_versions_v0_header_and_old_versions(broker_bootstrap: str) -> None:
    """ApiVersions at v0 and the highest version both decode (its response header is always v0)."""

    async def go() -> list[ApiVersionsResponse]:
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            r0 = await conn.request(ApiVersionsRequest[0](), 0)
            r3 = await conn.request(
                ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), 3
            )
            return [r0.body, r3.body]

    r0, r3 = run(go())
    assert r0.error_code == 0 and r3.error_code == 0
    assert {k.api_key for k in r0.api_keys} == {k.api_key for k in r3.api_keys}


def test_pipelined_requests_are_matched_by_correlation_id(broker_bootstrap: str) -> None:
    async def go() -> tuple[int, list]:
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            await conn.api_versions()
            futs = []
            for i in range(30):
                if i % 2:
                    futs.append(conn.submit(MetadataRequest(topics=None), conn.versions[3]))
                else:
                    futs.append(conn.submit(ApiVersionsRequest[0]()))
            in_flight = conn.in_flight
            return in_flight, await asyncio.gather(*futs)

    in_flight, responses = run(go())
    assert in_flight > 1  # really pipelined, not one at a time
    assert len({r.correlation_id for r in responses}) == 30
    for i, r in enumerate(responses):
        expected = MetadataResponse if i % 2 else ApiVersionsResponse
        assert isinstance(r.body, expected)
        assert r.rtt_ns > 0 and r.received_ns >= r.sent_ns


def test_rtt_measures_parked_fetch(broker_bootstrap: str, new_topic) -> None:
    """A Fetch on an empty partition with max_wait_ms=W takes about W; with W=0 it returns at once."""
    topic = new_topic(1)

    async def go() -> tuple[int, int]:
        async with Cluster(broker_bootstrap) as cluster:
            await cluster.refresh_metadata([topic])
            leader = cluster.leader_for(cluster_tp(topic))
            conn = await cluster.connection(leader)
            v = conn.versions[1]
            times = []
            for wait in (400, 0):
                kw = {"topic": topic}
                if v >= 13:
                    kw["topic_id"] = cluster.topic_id(topic)
                req = FetchRequest(
                    replica_id=-1,
                    max_wait_ms=wait,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[
                        FetchRequest.FetchTopic(
                            partitions=[
                                FetchRequest.FetchTopic.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1
                                )
                            ],
                            **kw,
                        )
                    ],
                    forgotten_topics_data=[],
                    rack_id="",
                )
                resp = await conn.request(req, v)
                # (Tansu answers max_wait_ms=0 with no partition entries at all; see test_client_broker_rules.py)
                assert resp.body.error_code == 0, resp.body
                times.append(resp.rtt_ns)
            return times[0], times[1]

    parked, immediate = run(go())
    assert 0.38e9 <= parked < 2.0e9
    assert immediate < 0.2e9


def cluster_tp(topic: str):
    from reference_broker.client.types import TopicPartition

    return TopicPartition(topic, 0)


def test_raw_frame_round_trip_and_unmatched_queue(broker_bootstrap: str) -> None:
    """A hand-encoded frame written with send_raw comes back as an unmatched raw frame with its id."""

    async def go() -> tuple[int, bytes]:
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            frame = encode_request(ApiVersionsRequest[0](), 0, correlation_id=4242, client_id="raw")
            assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
            await conn.send_raw(frame)
            raw = await conn.read_unmatched_frame(timeout=5)
            return raw.correlation_id, raw.payload

    cid, payload = run(go())
    assert cid == 4242
    body = ApiVersionsResponse.decode(payload, version=0, header=True)
    assert body.error_code == 0 and len(body.api_keys) > 0


def test_send_frame_decodes_prebuilt_frame(broker_bootstrap: str) -> None:
    async def go():
        async with await Connection.connect(*_hostport(broker_bootstrap)) as conn:
            cid = conn.next_correlation_id()
            frame = encode_request(MetadataRequest[1](topics=None), 1, correlation_id=cid)
            return await asyncio.wait_for(conn.send_frame(frame, cid, 3, 1), 5)

    resp = run(go())
    assert isinstance(resp.body, MetadataResponse) and resp.api_version == 1 and resp.body.brokers


def test_broker_closing_connection_is_observed(broker_bootstrap: str) -> None:
    """A frame whose length prefix promises far more than is sent, followed by a close of our write side,
    is not a request; the broker must hang up. Pending requests then fail with ConnectionClosedError."""

    async def go() -> tuple[bool, BaseException | None, bool]:
        conn = await Connection.connect(*_hostport(broker_bootstrap))
        await conn.api_versions()
        # garbage header: api_key 32000 (not a Kafka API), then junk
        junk = struct.pack(">ihhi", 10, 32000, 0, 7) + b"\xff\xff"
        fut = conn.submit(ApiVersionsRequest[0]())  # would normally be answered
        await conn.send_raw(junk)
        closed = await conn.wait_closed(timeout=5)
        err: BaseException | None = None
        try:
            await asyncio.wait_for(fut, 1)
        except BaseException as exc:  # noqa: BLE001
            err = exc
        return closed, err, conn.closed

    closed, err, flag = run(go())
    assert closed and flag
    # the earlier, valid request may legitimately have been answered before the garbage was read
    assert err is None or isinstance(err, ConnectionClosedError)


def test_client_close_fails_pending_requests(broker_bootstrap: str) -> None:
    async def go() -> BaseException | None:
        conn = await Connection.connect(*_hostport(broker_bootstrap))
        await conn.api_versions()
        # no await between submit and close: the answer cannot have been read yet
        fut = conn.submit(ApiVersionsRequest[0]())
        await conn.close()
        try:
            await fut
        except BaseException as exc:  # noqa: BLE001
            return exc
        return None

    err = run(go())
    assert isinstance(err, ConnectionClosedError)
    with pytest.raises(ConnectionClosedError):

        async def again() -> None:
            conn = await Connection.connect(*_hostport(broker_bootstrap))
            await conn.close()
            conn.submit(ApiVersionsRequest[0]())

        run(again())


def test_concurrent_callers_share_one_connection_per_broker(broker_bootstrap: str) -> None:
    """Tasks asking for the same broker at once get one connection, and nobody's request is cut off.

    Java's NetworkClient keeps one connection per node. Once, two producer tasks each opened their own; the second
    closed the first with a Produce on it; the producer retried it, and the log held those records twice.
    """

    async def go() -> tuple[set[int], list[object], bool, set[int]]:
        async with Cluster(broker_bootstrap) as cluster:
            node = min(cluster.brokers)
            conns = await asyncio.gather(*(cluster.connection(node) for _ in range(6)))
            answers = await asyncio.gather(
                *(cluster.send(node, MetadataRequest[1](topics=[])) for _ in range(6)), return_exceptions=True)
            closed = any(c.closed for c in conns)
        async with Cluster(broker_bootstrap) as fresh:  # before any metadata: the bootstrap connection
            fresh._bootstrap_conn = None  # noqa: SLF001 (start() opened it; race the reopening)
            fresh._conns.clear()  # noqa: SLF001
            fresh.brokers.clear()
            boots = await asyncio.gather(*(fresh.any_connection() for _ in range(4)))
        return {id(c) for c in conns}, answers, closed, {id(c) for c in boots}

    conns, answers, closed, boots = run(go())
    assert len(conns) == 1 and not closed
    assert not [a for a in answers if isinstance(a, BaseException)], answers
    assert len(boots) == 1  # one bootstrap connection, not four with three of them leaked
