"""Record batch v2 header access: the few fields the log needs, read in place.

Decoding records is kafka.record's job (``DefaultRecordBatch``); the log only needs the header to assign offsets,
stamp the leader epoch and index timestamps, so it reads those fields without touching the records. The CRC covers
bytes from ``attributes`` onward, so rewriting base offset and partition leader epoch keeps a batch valid.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

# Offsets within a v2 batch header (Kafka's DefaultRecordBatch).
BASE_OFFSET = 0
LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base offset + length precede the part that `length` counts
TIMESTAMP_TYPE_MASK = 0x08  # attributes bit 3: 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10   # attributes bit 4: the batch belongs to a transaction (KIP-98)
CONTROL_MASK = 0x20         # attributes bit 5: a control batch (transaction markers)
ABORT, COMMIT = 0, 1        # ControlRecordType of a transaction marker's key


class BatchHeader(NamedTuple):
    base_offset: int
    size: int                 # whole batch in bytes, LOG_OVERHEAD included
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    control_type: int = -1    # a control batch's ControlRecordType (ABORT/COMMIT) when its first record was read
    coordinator_epoch: int = -1   # a marker's coordinator epoch (EndTransactionMarker value) when it was read

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


_HEADER = struct.Struct(">qiiBIhiqqqhii")
assert _HEADER.size == HEADER_SIZE


class InvalidBatch(ValueError):
    """The bytes are not a well-formed v2 record batch (Kafka: CORRUPT_MESSAGE / INVALID_RECORD)."""


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header at ``pos``; for a control batch also its marker type when ``buf`` holds its first record (the
    log's producer state needs to know COMMIT from ABORT, and the type is in the record's key, not the header)."""
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatch(f"truncated batch header: {len(buf) - pos} bytes, need {HEADER_SIZE}")
    h = _HEADER.unpack_from(buf, pos)
    ctype, coord = control_marker(buf, pos) if h[5] & CONTROL_MASK else (-1, -1)
    return BatchHeader(h[0], h[1] + LOG_OVERHEAD, *h[2:], ctype, coord)


# How many bytes past the header hold a control batch's first record key and value: length, attributes, timestamp
# delta, offset delta, key length (varints of at most 5, 1, 10, 5, 5 bytes), the key's version and type (2 + 2),
# the value length (at most 5) and the value's version and coordinator epoch (2 + 4).
CONTROL_PEEK = HEADER_SIZE + 5 + 1 + 10 + 5 + 5 + 4 + 5 + 6


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` → (value, next position)."""
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise IndexError(pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def control_type(buf, pos: int = 0) -> int:
    """ControlRecordType of the control batch at ``pos`` (key: version int16, type int16); -1 when ``buf`` does not
    hold that far or the batch is compressed (Kafka never compresses control batches)."""
    return control_marker(buf, pos)[0]


def control_marker(buf, pos: int = 0) -> tuple[int, int]:
    """(ControlRecordType, coordinator epoch) of the control batch at ``pos`` (key: version int16, type int16;
    value of a COMMIT/ABORT marker: version int16, coordinator epoch int32); -1 for what ``buf`` does not hold."""
    ctype = coord = -1
    try:
        if struct.unpack_from(">h", buf, pos + ATTRIBUTES)[0] & 0x07:
            return -1, -1
        p = pos + HEADER_SIZE
        _, p = _varint(buf, p)        # record length
        p += 1                        # record attributes
        _, p = _varint(buf, p)        # timestamp delta
        _, p = _varint(buf, p)        # offset delta
        klen, p = _varint(buf, p)
        if klen < 4:
            return -1, -1
        ctype = struct.unpack_from(">h", buf, p + 2)[0]
        vlen, p = _varint(buf, p + klen)
        if vlen >= 6:
            coord = struct.unpack_from(">i", buf, p + 2)[0]
    except (IndexError, struct.error):
        pass
    return ctype, coord


def build_control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                        timestamp_ms: int) -> bytes:
    """A transaction marker as Kafka's MemoryRecords.withEndTransactionMarker writes it: one control record (key:
    version 0 + COMMIT/ABORT, value: version 0 + coordinator epoch) in a transactional control batch, base sequence
    -1. kafka.record builds the batch; the control bit is set here (its builder leaves that to brokers)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=timestamp_ms, key=struct.pack(">hh", 0, COMMIT if commit else ABORT),
             value=struct.pack(">hi", 0, coordinator_epoch), headers=[])
    buf = bytearray(b.build())
    attributes = struct.unpack_from(">h", buf, ATTRIBUTES)[0] | CONTROL_MASK
    struct.pack_into(">h", buf, ATTRIBUTES, attributes)
    struct.pack_into(">I", buf, CRC, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def iter_batches(buf: bytes | bytearray | memoryview, *, strict: bool = True):
    """Yield (position, header) for each complete batch in ``buf``.

    With ``strict`` a trailing partial batch raises; without, iteration stops before it (recovery, partial reads).
    """
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            if strict:
                raise InvalidBatch(f"{end - pos} trailing bytes at position {pos} are not a batch")
            return
        h = parse_header(buf, pos)
        if h.size < HEADER_SIZE:
            raise InvalidBatch(f"batch at position {pos} has impossible length {h.size - LOG_OVERHEAD}")
        if pos + h.size > end:
            if strict:
                raise InvalidBatch(f"batch at position {pos} claims {h.size} bytes, only {end - pos} present")
            return
        yield pos, h
        pos += h.size


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c.crc32c(bytes(memoryview(buf)[pos + ATTRIBUTES:pos + size]))


def validate(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Check magic and CRC32C of the batch at ``pos``; raise InvalidBatch naming what is wrong."""
    h = parse_header(buf, pos)
    if h.magic != 2:
        raise InvalidBatch(f"unsupported magic {h.magic} (only record batch v2 is served)")
    if pos + h.size > len(buf):
        raise InvalidBatch(f"batch claims {h.size} bytes, only {len(buf) - pos} present")
    actual = compute_crc(buf, pos, h.size)
    if actual != h.crc:
        raise InvalidBatch(f"CRC32C mismatch: header says {h.crc:#010x}, records hash to {actual:#010x}")
    if h.last_offset_delta < 0 or (h.records_count >= 0 and h.last_offset_delta < h.records_count - 1):
        raise InvalidBatch(f"lastOffsetDelta {h.last_offset_delta} inconsistent with {h.records_count} records")
    return h


def stamp(buf: bytearray, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Assign the base offset and partition leader epoch in place (outside the CRC's range)."""
    struct.pack_into(">q", buf, pos + BASE_OFFSET, base_offset)
    struct.pack_into(">i", buf, pos + PARTITION_LEADER_EPOCH, leader_epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp_ms: int) -> None:
    """Stamp LogAppendTime as Kafka's DefaultRecordBatch.setMaxTimestamp does: the timestamp-type attribute bit
    and the max timestamp change, so the CRC is recomputed. Readers then take every record's timestamp from the
    batch's max timestamp, which is what makes the broker's clock authoritative."""
    attributes = struct.unpack_from(">h", buf, pos + ATTRIBUTES)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES, attributes)
    struct.pack_into(">q", buf, pos + MAX_TIMESTAMP, timestamp_ms)
    size = parse_header(buf, pos).size
    struct.pack_into(">I", buf, pos + CRC, compute_crc(buf, pos, size))
