"""Real record batches v2 for the log tests, built by kafka.record (no hand-written codec)."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder


def make_batch(n_records: int = 1, timestamp: int = 1_000, value_size: int = 16, *, tag: int = 0,
               timestamps: list[int] | None = None, compression: int = 0, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A producer-side batch (base offset 0, epoch 0) of ``n_records`` records; values carry ``tag`` so tests
    can tell batches apart after a round trip. ``producer_id`` >= 0 makes it an idempotent producer's batch."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i in range(n_records):
        ts = timestamps[i] if timestamps is not None else timestamp + i
        value = f"{tag}:{i}:".encode().ljust(value_size, b"x")
        b.append(i, timestamp=ts, key=str(i).encode(), value=value, headers=[])
    return bytes(b.build())


def decode(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, value) of every record in ``data`` (whole batches), through kafka.record."""
    out = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        batch = DefaultRecordBatch(data[pos:pos + size])
        assert batch.validate_crc(), f"CRC of the batch at byte {pos} does not match"
        for rec in batch:
            out.append((rec.offset, rec.timestamp, rec.value))
        pos += size
    return out
