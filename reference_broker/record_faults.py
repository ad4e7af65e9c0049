"""Record-level fault switches (test-only) for the clients suite: how a broker can return records that are not
the records it was sent. Each function is called only when its switch is on (reference_broker/faults.py); each
mimics a real broker bug and breaks the rule named in its switch's description.

- ``drop_headers``: re-encode every batch without record headers (KIP-82 headers lost on the way out).
- ``swap_producer_batches``: the first two adjacent batches of different idempotent producers change places, each
  restamped so offsets stay dense (two producers' appends raced: offsets assigned in one order, bytes written in
  the other).
- ``compressed_base_is_last``: a compressed batch carries its last offset in the base offset field — the magic
  v0/v1 wrapper-offset rule wrongly applied to v2 batches, so every record's offset is shifted.
- ``next_batch_for_mid_batch``: a fetch offset inside a batch gets the batch after it (the first batch whose base
  offset is >= the fetch offset, instead of the batch containing it).
- ``last_batch_base``: ListOffsets LATEST answers the last batch's base offset instead of the high watermark.
"""
from __future__ import annotations

from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from .log import batch as B


def _batches(data: bytes) -> list[tuple[bytes, B.BatchHeader]]:
    return [(bytes(data[pos:pos + h.size]), h) for pos, h in B.iter_batches(data, strict=False)]


def _rebuild(raw: bytes, h: B.BatchHeader, keep_headers: bool) -> bytes:
    """The same batch re-encoded by kafka.record (same codec, producer fields, offsets, timestamps)."""
    src = DefaultRecordBatch(raw)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=h.compression, is_transactional=h.is_transactional,
                                  producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                                  base_sequence=h.base_sequence, batch_size=1 << 30)
    for r in src:
        b.append(r.offset - h.base_offset, timestamp=r.timestamp, key=r.key, value=r.value,
                 headers=list(r.headers) if keep_headers else [])
    out = bytearray(b.build())
    B.stamp(out, 0, h.base_offset, h.leader_epoch)
    return bytes(out)


def drop_headers(data: bytes) -> bytes:
    return b"".join(_rebuild(raw, h, keep_headers=False) for raw, h in _batches(data))


def swap_producer_batches(data: bytes) -> bytes:
    parts = _batches(data)
    for i in range(len(parts) - 1):
        (a, ha), (c, hc) = parts[i], parts[i + 1]
        if ha.producer_id >= 0 and hc.producer_id >= 0 and ha.producer_id != hc.producer_id:
            first, second = bytearray(c), bytearray(a)
            B.stamp(first, 0, ha.base_offset, hc.leader_epoch)
            B.stamp(second, 0, ha.base_offset + hc.last_offset_delta + 1, ha.leader_epoch)
            parts[i], parts[i + 1] = (bytes(first), hc), (bytes(second), ha)
            break
    return b"".join(raw for raw, _h in parts)


def compressed_base_is_last(data: bytes) -> bytes:
    out = []
    for raw, h in _batches(data):
        if h.compression and h.last_offset_delta > 0:
            buf = bytearray(raw)
            B.stamp(buf, 0, h.base_offset + h.last_offset_delta, h.leader_epoch)
            raw = bytes(buf)
        out.append(raw)
    return b"".join(out)


def next_batch_for_mid_batch(data: bytes, fetch_offset: int, read_from: Callable[[int], bytes]) -> bytes:
    parts = _batches(data)
    if parts and parts[0][1].base_offset < fetch_offset:
        return read_from(parts[0][1].next_offset)
    return data


def last_batch_base(read_last: bytes, end: int) -> int:
    """``read_last`` is a read at ``end - 1``: its first batch holds the last record below the HW."""
    parts = _batches(read_last)
    return parts[0][1].base_offset if parts else end


# The fetch switches above, applied to one partition's read (consumer reads only; the replica manager calls this
# apart from the read rules so the read path reads as Kafka's).
FETCH_SWITCHES = frozenset(("fetch.drop_headers", "fetch.swap_producer_batches", "fetch.compressed_base_is_last",
                            "fetch.mid_batch_next_batch"))


def apply_fetch_switches(faults, records: bytes, fetch_offset: int, read_from: Callable[[int], bytes]) -> bytes:
    """Rewrite one partition's fetched ``records`` as the enabled switches say; ``read_from(offset)`` reads the
    same partition again with the same limits (for ``fetch.mid_batch_next_batch``)."""
    if faults.on("fetch.mid_batch_next_batch"):
        records = next_batch_for_mid_batch(records, fetch_offset, read_from)
    if faults.on("fetch.drop_headers"):
        records = drop_headers(records)
    if faults.on("fetch.swap_producer_batches"):
        records = swap_producer_batches(records)
    if faults.on("fetch.compressed_base_is_last"):
        records = compressed_base_is_last(records)
    return records
