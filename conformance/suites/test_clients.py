"""Clients: realistic data shapes through real clients (confluent-kafka / librdkafka and kafka-python).

Why: the other suites mostly send one small record per batch through the protocol client. Users send hundreds of
records per batch, compressed, from several producers at once, with keys, headers, tombstones and records near the
size limit — and their consumers seek into the middle of compressed batches and resume from offsets committed in
the middle of one. These checks drive the clients users run (``conformance.clients``: recorded producers and
consumers) and use the protocol client (``conformance.wire``) where the rule is about the exact answer (batch
layout, MESSAGE_TOO_LARGE, DeleteRecords).

Every record carries a unique number at the head of its value (``<n>|...``) or, where the value is null, empty or
binary, of its key, so the session history maps each polled record back to its write (``recording.record_id``).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from conformance.clients import CLIENTS, CODECS, NoOffsetError, Rec, UnsupportedByClient, consumer, producer
from conformance.recording import encode_value
from conformance.rules import rule
from conformance.wire import Batch, TargetDiverged, Wire, unique_name

SUITE = "clients"
MESSAGE_TOO_LARGE = 10
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588      # Kafka's message.max.bytes default (1 MiB + 12 bytes)
BASE_TS = 1_700_000_000_000
CLIENT_TIMEOUT_S = 20.0
NULL_HEADERS = {"confluent-kafka": True, "kafka-python": False}   # kafka-python 3 sends only bytes header values

rule("FETCH-RECORDS-AS-PRODUCED", "Every acknowledged record is fetched exactly once, at the offset its producer "
     "was told, in offset order, with key, value, headers and timestamp as sent (null key, empty value, null value, "
     "many and duplicate headers, binary bytes) — in batches of hundreds, in every compression codec, and with "
     "several producers interleaving into one partition", "Kafka record batch v2 (DefaultRecordBatch / "
     "DefaultRecord: offset = base offset + offset delta); KIP-82 (record headers); KIP-32 (timestamps); KIP-110 "
     "(zstd); Partition.appendRecordsToLeader assigns offsets under the log lock", SUITE)
rule("PRODUCE-MAX-MESSAGE-BYTES", "A record batch of exactly max.message.bytes is appended; one byte more is "
     "MESSAGE_TOO_LARGE and nothing of it is written", "UnifiedLog.analyzeAndValidateRecords (batch size > "
     "config.maxMessageSize -> RecordTooLargeException, error MESSAGE_TOO_LARGE)", SUITE)
rule("CONSUMER-MID-BATCH", "A consumer positioned inside a (compressed) batch gets the batch containing it "
     "(FETCH-MID-BATCH) and skips the records below its position, so a seek or a committed offset in the middle of "
     "a batch "
     "resumes at exactly that offset", "LogSegment.read (translateOffset: the batch whose last offset >= the fetch "
     "offset); consumer CompletedFetch / librdkafka msgset reader skip records below the fetch position", SUITE)
rule("RESET-BATCHED", "auto.offset.reset on a log of multi-record batches: earliest starts at the log start offset "
     "even inside a batch (after DeleteRecords), latest at the high watermark (after the last record of the last "
     "batch), none raises NoOffsetForPartition", "KafkaConsumer auto.offset.reset (ListOffsets EARLIEST = "
     "logStartOffset, LATEST = high watermark); KIP-107 (DeleteRecords moves the log start inside a batch)", SUITE)

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("group_coordinator_ready")]




# -- data -------------------------------------------------------------------------------------------------------
def _id(n: int, tail: bytes = b"") -> bytes:
    return str(n).encode() + b"|" + tail


def shaped_records(topic: str, ids: Sequence[int], *, headers: bool = True, size: int = 60,
                   null_header: bool = True) -> list[Rec]:
    """Records of every shape users send: plain, null key, empty value, tombstone, many/duplicate headers, binary
    key and value, null and non-ASCII header names/values; explicit CreateTime timestamps. The number that
    identifies a record sits in its value or, when the value cannot hold it, in its key. ``null_header=False``
    for clients that cannot send a null header value (kafka-python accepts only bytes)."""
    out = []
    for i, n in enumerate(ids):
        kind = i % 8 if headers else i % 2
        key: bytes | None = _id(n, f"key-{i}".encode())
        value: bytes | None = _id(n, b"v" * (size + i % 17))
        hdrs: tuple[tuple[str, bytes | None], ...] = ()
        if kind == 1:
            key = None
        elif kind == 2:
            value = b""
        elif kind == 3:
            value = None                                             # tombstone
        elif kind == 4:
            hdrs = tuple((f"h{j}", bytes([j]) * j) for j in range(24)) + (("dup", b"1"), ("dup", b"2"), ("e", b""))
        elif kind == 5:
            key, value = bytes(range(255, -1, -1)), _id(n, bytes(range(256)))
        elif kind == 6:
            hdrs = (("trace-id", b"\x00\xff\x7f"), ("nullh", None if null_header else b"\x00"))
        elif kind == 7:
            hdrs = (("ключ-\u2603", "значение".encode()),)
        out.append(Rec(topic, 0, -1, key, value, hdrs, BASE_TS + 7 * i))
    return out


def compare(sent: Sequence[Rec], got: Sequence[Rec]) -> list[str]:
    """Problems between what producers were told and what a consumer read (empty: as produced)."""
    problems = []
    offsets = [r.offset for r in got]
    want = sorted(r.offset for r in sent)
    if offsets != want:
        dup = sorted({o for o in offsets if offsets.count(o) > 1})[:10]
        missing = sorted(set(want) - set(offsets))
        extra = sorted(set(offsets) - set(want))
        disorder = next((f"{a} before {b}" for a, b in zip(offsets, offsets[1:], strict=False) if b <= a), None)
        problems.append(f"offsets read != offsets acknowledged ({len(offsets)} read, {len(want)} acknowledged): "
                        f"missing {missing[:10]} ({len(missing)}), unexpected {extra[:10]}, duplicated {dup}, "
                        f"first out of order: {disorder}")
    by_off = {r.offset: r for r in sent}
    for r in got:
        s = by_off.get(r.offset)
        if s is not None and s.shape() != r.shape():
            diff = [f"{name}: sent {a!r:.80} read {b!r:.80}" for name, a, b in
                    zip(("offset", "key", "value", "headers", "timestamp"), s.shape(), r.shape(), strict=True)
                    if a != b]
            problems.append(f"offset {r.offset}: " + "; ".join(diff))
        if len(problems) > 8:
            break
    return problems


async def send(client: str, bootstrap: str, history: Any, evidence: Any, records: Sequence[Rec], **kw: Any
               ) -> list[Rec]:
    """Send with a real producer (linger so it batches); every record must be acknowledged."""
    def run() -> list[Rec]:
        with producer(client, bootstrap, history, evidence, **kw) as p:
            out = p.send_all(records)
        if out.errors:
            raise TargetDiverged(f"{client} producer: {len(out.errors)} of {len(records)} records failed, e.g. "
                                 f"{out.errors[0][1]}")
        return out.sent

    return await asyncio.to_thread(run)


async def read_all(client: str, bootstrap: str, history: Any, evidence: Any, topic: str, want: int, *,
                   reset: str = "earliest", group: str | None = None, seek: int | None = None) -> list[Rec]:
    """Read ``want`` records with a fresh consumer (and half a second more, to catch duplicates)."""
    def run() -> list[Rec]:
        with consumer(client, bootstrap, group or unique_name("g"), reset, history, evidence) as c:
            c.assign(topic, [0])
            if seek is not None:
                c.seek(topic, 0, seek)
            return c.poll_full(want, CLIENT_TIMEOUT_S, quiet_s=0.5)

    return await asyncio.to_thread(run)


async def layout(wire: Wire, topic: str) -> list[Batch]:
    """The partition's batches as the broker returns them from offset 0 (base, last offset, records)."""
    w = await wire.leader(topic)
    out: list[Batch] = []
    offset = 0
    for _ in range(50):
        # max_wait 500 ms with data present answers at once (min_bytes 1); not 0, whose rule the fetch suite owns
        part = (await w.fetch([(topic, 0, offset)], max_wait_ms=500, min_bytes=1, label="layout")).part(topic)
        if part.error_code or not part.batches:
            break
        out += [b for b in part.batches if b.last_offset >= offset]
        offset = part.batches[-1].last_offset + 1
        if offset >= part.high_watermark:
            break
    return out


def mid_batch(batches: Sequence[Batch]) -> tuple[Batch, int]:
    """A batch of several records and an offset strictly inside it (precondition: the client batched)."""
    for b in batches:
        if b.last_offset - b.base_offset >= 2:
            return b, b.base_offset + (b.last_offset - b.base_offset + 1) // 2
    raise RuntimeError(f"precondition: no batch of 3+ records among {[(b.base_offset, b.last_offset) for b in batches]}"
                       f" — the client did not batch")


async def batched_topic(wire: Wire, client: str, bootstrap: str, history: Any, evidence: Any, n: int = 300,
                        compression: str = "none") -> tuple[str, list[Rec], list[Batch]]:
    topic = await wire.create_topic()
    ids = [wire.new_value() for _ in range(n)]
    sent = await send(client, bootstrap, history, evidence, shaped_records(topic, ids, headers=False),
                      compression=compression)
    batches = await layout(wire, topic)
    evidence.note("batches (base, last)", [(b.base_offset, b.last_offset) for b in batches][:40])
    return topic, sent, batches


# -- records as produced ------------------------------------------------------------------------------------------
@pytest.mark.rule("FETCH-RECORDS-AS-PRODUCED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_keys_headers_and_odd_values_read_back_as_produced(client, wire, bootstrap, history, evidence):
    topic = await wire.create_topic()
    records = shaped_records(topic, [wire.new_value() for _ in range(400)], null_header=NULL_HEADERS[client])
    sent = await send(client, bootstrap, history, evidence, records)
    got = await read_all(client, bootstrap, history, evidence, topic, len(sent))
    problems = compare(sent, got)
    assert not problems, f"{client}: fetched records differ from those produced:\n" + "\n".join(problems)


@pytest.mark.rule("FETCH-RECORDS-AS-PRODUCED")
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
async def test_compressed_batches_read_back_as_produced(client, codec, wire, bootstrap, history, evidence):
    topic = await wire.create_topic()
    records = shaped_records(topic, [wire.new_value() for _ in range(300)], size=200,
                             null_header=NULL_HEADERS[client])
    try:
        sent = await send(client, bootstrap, history, evidence, records, compression=codec)
    except UnsupportedByClient as exc:
        pytest.skip(f"{client} as installed cannot compress with {codec}: {exc}")
    batches = await layout(wire, topic)
    evidence.note("batches (base, last)", [(b.base_offset, b.last_offset) for b in batches][:40])
    mid_batch(batches)
    got = await read_all(client, bootstrap, history, evidence, topic, len(sent))
    problems = compare(sent, got)
    assert not problems, f"{client} {codec}: fetched records differ from those produced:\n" + "\n".join(problems)


@pytest.mark.rule("FETCH-RECORDS-AS-PRODUCED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_producers_interleaving_into_one_partition(client, wire, bootstrap, history, evidence):
    """Four idempotent producers send rounds of batches into one partition at the same time."""
    topic = await wire.create_topic()
    producers, rounds, per_round = 4, 4, 50
    plan = [[shaped_records(topic, [wire.new_value() for _ in range(per_round)], headers=False)
             for _ in range(rounds)] for _ in range(producers)]
    sent: list[list[Rec]] = [[] for _ in range(producers)]
    errors: list[str] = []
    start = threading.Barrier(producers)
    idem: dict[str, Any] = ({"enable.idempotence": True, "retries": 5} if client == "confluent-kafka" else
                            {"enable_idempotence": True, "retries": 5})

    def run(i: int) -> None:
        try:
            with producer(client, bootstrap, history, evidence, linger_ms=5, **idem) as p:
                start.wait(10)
                for batch in plan[i]:
                    out = p.send_all(batch)
                    sent[i] += out.sent
                    errors.extend(e for _r, e in out.errors)
        except Exception as exc:  # noqa: BLE001 - reported below with the producer it hit
            errors.append(f"producer {i}: {exc!r}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    await asyncio.to_thread(lambda: [t.join(60) for t in threads])
    if errors:
        raise TargetDiverged(f"{client} idempotent producers failed: {errors[:3]}")
    for i, s in enumerate(sent):
        offs = [r.offset for r in s]
        assert offs == sorted(offs) and len(set(offs)) == len(offs), (
            f"producer {i}'s records were acknowledged at offsets out of its send order: {offs[:20]}")
    owner = {r.offset: i for i, s in enumerate(sent) for r in s}
    evidence.note("producer of each batch, by base offset", [(b.base_offset, owner.get(b.base_offset))
                                                             for b in await layout(wire, topic)][:60])
    everything = [r for s in sent for r in s]
    got = await read_all(client, bootstrap, history, evidence, topic, len(everything))
    problems = compare(everything, got)
    assert not problems, (f"{client}: {producers} producers into one partition, fetched records differ from those "
                          f"produced:\n" + "\n".join(problems))


# -- max.message.bytes --------------------------------------------------------------------------------------------
async def max_message_bytes(wire_factory: Any, topic: str, evidence: Any) -> int:
    """The topic's max.message.bytes from DescribeConfigs (topic resource), else Kafka's default. On its own
    connection: a target that does not serve it may close the connection (its rule is not this check's)."""
    async with await wire_factory() as wire:
        if not wire.serves("DescribeConfigs"):
            res = None
        else:
            R = DescribeConfigsRequest.DescribeConfigsResource
            req = DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=topic,
                                                      configuration_keys=["max.message.bytes"])],
                                         include_synonyms=False, include_documentation=False)
            try:
                res = (await wire.request("DescribeConfigs", req)).body.results[0]
            except TargetDiverged as exc:
                evidence.note("DescribeConfigs", f"not answered: {exc}")
                res = None
        if res is not None and not res.error_code:
            for cfg in res.configs:
                if cfg.name == "max.message.bytes" and cfg.value:
                    evidence.note("max.message.bytes (DescribeConfigs)", cfg.value)
                    return int(cfg.value)
    async with await wire_factory() as wire:      # the topic's default: the broker's message.max.bytes
        try:
            md = await wire.metadata([topic], record=False)
            leader = md[topic]["partitions"][0]["leader"]
            found = await wire.broker_configs(leader, ["message.max.bytes"])
        except (TargetDiverged, KeyError) as exc:
            evidence.note("DescribeConfigs (broker)", f"not answered: {exc}")
            found = None
        if found and found.get("message.max.bytes"):
            evidence.note("message.max.bytes (DescribeConfigs, broker)", found["message.max.bytes"])
            return int(found["message.max.bytes"])
    evidence.note("max.message.bytes (Kafka default: DescribeConfigs not answered)", KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
    return KAFKA_DEFAULT_MAX_MESSAGE_BYTES


def payload_for_batch(n: int, batch_bytes: int) -> bytes:
    """A one-record payload whose uncompressed v2 batch is exactly ``batch_bytes`` long (varints make the
    overhead depend on the size, so search a few sizes around the estimate)."""
    from conformance.wire import record_batch

    size = batch_bytes - 80
    for _ in range(40):
        got = len(record_batch([encode_value(n, size)]))
        if got == batch_bytes:
            return encode_value(n, size)
        size += batch_bytes - got
    raise RuntimeError(f"no payload size gives a {batch_bytes}-byte batch")


@pytest.mark.rule("PRODUCE-MAX-MESSAGE-BYTES")
async def test_batch_at_max_message_bytes_accepted_one_more_refused(wire, wire_factory, evidence):
    topic = await wire.create_topic()
    limit = await max_message_bytes(wire_factory, topic, evidence)
    w = await wire.leader(topic)
    at = await w.produce(topic, payloads=[payload_for_batch(w.new_value(), limit)], check=False)
    above = await w.produce(topic, payloads=[payload_for_batch(w.new_value(), limit + 1)], check=False)
    evidence.note("produced", {"at_limit": [at.batch_bytes, at.error_code, at.base_offset],
                               "above_limit": [above.batch_bytes, above.error_code, above.base_offset]})
    assert at.error_code == 0, f"a batch of exactly max.message.bytes={limit} was refused with error {at.error_code}"
    assert above.error_code == MESSAGE_TOO_LARGE, (
        f"a batch of max.message.bytes + 1 = {limit + 1} bytes answered error {above.error_code} (offset "
        f"{above.base_offset}), expected MESSAGE_TOO_LARGE (10)")
    part = (await w.fetch([(topic, 0, 0)], max_wait_ms=500, min_bytes=1, max_bytes=4 * limit,
                          partition_max_bytes=4 * limit)).part(topic)
    assert part.high_watermark == 1 and part.offsets == [0], (
        f"only the batch at the limit may be written: HW {part.high_watermark}, offsets {part.offsets}")
    value = part.offsets_and_values[0][1]
    assert value is not None and len(value) == len(payload_for_batch(at.values[0], limit)), "the record came back cut"


CLIENT_SIZE_LIMITS = {"confluent-kafka": "message.max.bytes", "kafka-python": "max_request_size"}


@pytest.mark.rule("PRODUCE-MAX-MESSAGE-BYTES")
@pytest.mark.parametrize("client", CLIENTS)
async def test_records_near_max_message_bytes_through_clients(client, wire, wire_factory, bootstrap, history,
                                                              evidence):
    """A record just below the limit goes through and reads back whole; one just above comes back from the broker
    as MESSAGE_TOO_LARGE (the client's own size check is raised out of the way, so the broker has to refuse)."""
    topic = await wire.create_topic()
    limit = await max_message_bytes(wire_factory, topic, evidence)
    below, above = wire.new_value(), wire.new_value()
    small = Rec(topic, 0, -1, _id(below), _id(below, b"b" * (limit - 4096)), (), BASE_TS)
    big = Rec(topic, 0, -1, _id(above), _id(above, b"B" * (limit + 64)), (), BASE_TS)

    def run() -> tuple[Any, Any]:
        with producer(client, bootstrap, history, evidence, linger_ms=0,
                      **{CLIENT_SIZE_LIMITS[client]: 4 * limit}) as p:
            return p.send_all([small], timeout_s=20), p.send_all([big], timeout_s=20)

    ok, refused = await asyncio.to_thread(run)
    evidence.note("client said", {"below": [r.offset for r in ok.sent] or [e for _r, e in ok.errors],
                                  "above": [r.offset for r in refused.sent] or [e for _r, e in refused.errors]})
    assert ok.sent and not ok.errors, f"{client}: a record {limit - 4096} bytes under the limit failed: {ok.errors}"
    assert not [r.offset for r in refused.sent], (f"{client}: a record whose batch exceeds max.message.bytes={limit} was appended at "
                              f"offset {refused.sent[0].offset}, expected MESSAGE_TOO_LARGE")
    errors = " ".join(e for _r, e in refused.errors)
    assert "TOO_LARGE" in errors.upper() or "TOOLARGE" in errors.upper(), (
        f"{client}: the record above the limit failed with {errors!r}, expected MESSAGE_TOO_LARGE")
    got = await read_all(client, bootstrap, history, evidence, topic, 1)
    problems = compare(ok.sent, got)
    assert not problems, f"{client}: the record near the limit came back different:\n" + "\n".join(problems)


# -- fetch inside a batch ------------------------------------------------------------------------------------------
@pytest.mark.rule("CONSUMER-MID-BATCH")
@pytest.mark.parametrize("client", CLIENTS)
async def test_seek_into_the_middle_of_a_compressed_batch(client, wire, bootstrap, history, evidence):
    topic, sent, batches = await batched_topic(wire, client, bootstrap, history, evidence, compression="gzip")
    batch, mid = mid_batch(batches)
    w = await wire.leader(topic)
    part = (await w.fetch([(topic, 0, mid)], max_wait_ms=500, min_bytes=1, label="fetch inside a batch")).part(topic)
    first = part.batches[0] if part.batches else None
    assert first is not None and first.base_offset <= mid <= first.last_offset, (
        f"a fetch at offset {mid} (inside batch {batch.base_offset}-{batch.last_offset}) returned batches "
        f"{[(b.base_offset, b.last_offset) for b in part.batches]}, expected the batch containing it first")
    got = await read_all(client, bootstrap, history, evidence, topic, len(sent) - mid, seek=mid)
    problems = compare([r for r in sent if r.offset >= mid], got)
    assert not problems, f"{client} seek to {mid} (inside a gzip batch):\n" + "\n".join(problems)


@pytest.mark.rule("CONSUMER-MID-BATCH")
@pytest.mark.parametrize("client", CLIENTS)
async def test_resume_from_offset_committed_mid_batch(client, wire, bootstrap, history, evidence):
    topic, sent, batches = await batched_topic(wire, client, bootstrap, history, evidence)
    _batch, mid = mid_batch(batches)
    group = unique_name("g")

    def first_consumer() -> list[Rec]:
        with consumer(client, bootstrap, group, "earliest", history, evidence) as c:
            c.assign(topic, [0])
            got = c.poll_full(mid, CLIENT_TIMEOUT_S)
            c.commit(topic, 0, mid)
            return got

    before = await asyncio.to_thread(first_consumer)
    assert [r.offset for r in before][:mid] == list(range(mid)), f"the first consumer read {len(before)} records"
    after = await read_all(client, bootstrap, history, evidence, topic, len(sent) - mid, reset="none", group=group)
    problems = compare([r for r in sent if r.offset >= mid], after)
    assert not problems, (f"{client}: after committing {mid} (inside a batch) and restarting, the consumer read:\n"
                          + "\n".join(problems))


# -- auto.offset.reset on batched data -----------------------------------------------------------------------------
@pytest.mark.rule("RESET-BATCHED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_earliest_from_a_log_start_inside_a_batch(client, wire, bootstrap, history, evidence):
    if not wire.serves("DeleteRecords"):
        pytest.skip("target does not serve DeleteRecords: the log start cannot be moved inside a batch")
    topic, sent, batches = await batched_topic(wire, client, bootstrap, history, evidence)
    _batch, mid = mid_batch(batches)
    w = await wire.leader(topic)
    try:
        err, low = await w.delete_records(topic, 0, mid)
    except TargetDiverged as exc:
        pytest.skip(f"precondition: DeleteRecords failed ({exc}); the offsets suite owns that rule (KIP-107)")
    assert (err, low) == (0, mid), f"DeleteRecords to {mid}: error {err}, low watermark {low}"
    got = await read_all(client, bootstrap, history, evidence, topic, len(sent) - mid)
    problems = compare([r for r in sent if r.offset >= mid], got)
    assert not problems, f"{client} earliest after DeleteRecords({mid}, inside a batch):\n" + "\n".join(problems)


@pytest.mark.rule("RESET-BATCHED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_latest_starts_after_the_last_batch(client, wire, bootstrap, history, evidence):
    topic, sent, _batches = await batched_topic(wire, client, bootstrap, history, evidence)
    end = max(r.offset for r in sent) + 1
    more = shaped_records(topic, [wire.new_value() for _ in range(50)], headers=False)

    def run() -> tuple[list[Rec], list[Rec], list[Rec]]:
        eof = {"enable.partition.eof": True} if client == "confluent-kafka" else {}   # its position signal
        with consumer(client, bootstrap, unique_name("g"), "latest", history, evidence, **eof) as c:
            c.assign(topic, [0])
            early: list[Rec] = []
            for _ in range(20):                # until the client has reset its position (ListOffsets LATEST)
                early += c.poll_full(1, 0.5)
                if c.position(topic, 0) is not None:
                    break
            early += c.poll_full(1, 0.5)
            with producer(client, bootstrap, history, evidence) as p:
                out = p.send_all(more)
            return early, out.sent, c.poll_full(len(out.sent), CLIENT_TIMEOUT_S, quiet_s=0.5)

    early, new, got = await asyncio.to_thread(run)
    early_offsets = [r.offset for r in early]
    assert not early_offsets, f"{client} latest read old records at offsets {early_offsets[:20]} (HW {end})"
    assert len(new) == len(more), "every new record must be acknowledged"
    problems = compare(new, got)
    assert not problems, f"{client} latest (HW {end}) then {len(new)} new records:\n" + "\n".join(problems)


@pytest.mark.rule("RESET-BATCHED")
@pytest.mark.parametrize("client", CLIENTS)
async def test_reset_none_raises_on_batched_log(client, wire, bootstrap, history, evidence):
    topic, _sent, _batches = await batched_topic(wire, client, bootstrap, history, evidence, n=100)
    with consumer(client, bootstrap, unique_name("g"), "none", history, evidence) as c:
        c.assign(topic, [0])
        try:
            got = await asyncio.to_thread(c.poll_records, 1, 8.0)
        except NoOffsetError as exc:
            evidence.note("client error", str(exc))
            return
    raise AssertionError(f"{client} with auto.offset.reset=none and no committed offset read "
                         f"{[o for _t, _p, o, _v in got][:10]} instead of raising NoOffsetForPartition")
