"""An in-memory log (``--memory``): same contract as the file log, nothing kept across restarts."""
from __future__ import annotations

import bisect
import struct

from . import batch as B
from .base import AppendInfo, EpochEntry, Log, ReadResult, TimestampOffset


class MemoryLog(Log):
    def __init__(self) -> None:
        self._bases: list[int] = []       # base offset of each batch, ascending
        self._batches: list[bytes] = []
        self._positions: list[int] = []   # virtual byte position of each batch (cumulative sizes)
        self._max_ts: list[int] = []
        self._next_pos = 0
        self._start = 0
        self._end = 0
        self._epochs: list[EpochEntry] = []

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def _add(self, data: bytes, h: B.BatchHeader) -> None:
        self._bases.append(h.base_offset)
        self._batches.append(data)
        self._positions.append(self._next_pos)
        self._max_ts.append(h.max_timestamp)
        self._next_pos += h.size
        self._end = h.next_offset
        if not self._epochs or h.leader_epoch > self._epochs[-1].epoch:
            self._epochs.append(EpochEntry(h.leader_epoch, h.base_offset))

    def append(self, batch, leader_epoch: int, timestamp_ms: int | None = None) -> AppendInfo:
        buf = bytearray(batch)
        h = B.parse_header(buf)
        B.stamp(buf, 0, self._end, leader_epoch)
        if timestamp_ms is not None:
            struct.pack_into(">q", buf, B.MAX_TIMESTAMP, timestamp_ms)
            struct.pack_into(">I", buf, B.CRC, B.compute_crc(buf, 0, h.size))
        h = B.parse_header(buf)
        self._add(bytes(buf), h)
        return AppendInfo(h.base_offset, h.last_offset, h.max_timestamp, h.size)

    def append_replica(self, batches) -> AppendInfo | None:
        info = None
        mv = memoryview(batches)
        for pos, h in B.iter_batches(mv, strict=False):
            if h.next_offset <= self._end:
                continue
            self._add(bytes(mv[pos:pos + h.size]), h)
            first = info.base_offset if info else h.base_offset
            info = AppendInfo(first, h.last_offset, h.max_timestamp, (info.size if info else 0) + h.size)
        return info

    def _index_of(self, offset: int) -> int:
        """Index of the batch containing ``offset`` (or the first batch after it)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        h_next = self._bases[i] + B.parse_header(self._batches[i]).last_offset_delta + 1
        return i if offset < h_next else i + 1

    def _pos_of(self, offset: int) -> int:
        i = self._index_of(offset)
        return self._positions[i] if i < len(self._positions) else self._next_pos

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one: bool = True) -> ReadResult:
        i = self._index_of(offset)
        out: list[bytes] = []
        total = 0
        first = offset
        while i < len(self._batches) and self._bases[i] < max_offset:
            b = self._batches[i]
            if total + len(b) > max_bytes and not (min_one and not out):
                break
            if not out:
                first = self._bases[i]
            out.append(b)
            total += len(b)
            i += 1
        return ReadResult(b"".join(out), first)

    def bytes_between(self, start: int, end: int) -> int:
        if end <= start:
            return 0
        return self._pos_of(end) - self._pos_of(start)

    def delete_records_before(self, offset: int) -> None:
        if offset <= self._start:
            return
        self._start = min(offset, self._end)
        # drop whole batches entirely below the new start
        drop = 0
        while drop < len(self._bases):
            h = B.parse_header(self._batches[drop])
            if h.next_offset <= self._start:
                drop += 1
            else:
                break
        if drop:
            del self._bases[:drop], self._batches[:drop], self._positions[:drop], self._max_ts[:drop]

    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            return
        i = bisect.bisect_left(self._bases, offset)
        del self._bases[i:], self._batches[i:], self._positions[i:], self._max_ts[i:]
        self._next_pos = self._positions[-1] + len(self._batches[-1]) if self._batches else self._next_pos
        self._end = max(offset, self._start)
        self._epochs = [e for e in self._epochs if e.start_offset < self._end]

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        for i, ts in enumerate(self._max_ts):
            if ts >= timestamp_ms:
                from kafka.record.default_records import DefaultRecordBatch
                for rec in DefaultRecordBatch(self._batches[i]):
                    if rec.timestamp >= timestamp_ms and rec.offset >= self._start:
                        return TimestampOffset(rec.offset, rec.timestamp)
        return None

    def max_timestamp(self) -> TimestampOffset | None:
        if not self._max_ts:
            return None
        i = max(range(len(self._max_ts)), key=lambda k: (self._max_ts[k], -k))
        h = B.parse_header(self._batches[i])
        return TimestampOffset(h.last_offset, h.max_timestamp)

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._epochs)
