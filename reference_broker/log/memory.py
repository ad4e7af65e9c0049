"""An in-memory log (``--memory``): same contract as the file log, nothing kept across restarts."""
from __future__ import annotations

import bisect
from collections.abc import Iterator

from ..clock import Clock
from . import batch as B
from .base import AppendInfo, EpochEntry, Log, ReadResult, TimestampOffset
from .epochs import LeaderEpochCache
from .producer_state import ProducerStateConfig, ProducerStateManager, SegmentHeaders


def check_replica_batches(mv: memoryview, log_end_offset: int) -> list[tuple[int, B.BatchHeader]]:
    """The follower path's checks before anything is written (Kafka's analyzeAndValidateRecords /
    appendAsFollower): every complete batch passes CRC32C, offsets ascend, and none overlaps the log end.
    A trailing partial batch is dropped (a fetch response may end mid-batch); batches wholly below the log
    end are skipped (already held). Returns the batches to append."""
    out: list[tuple[int, B.BatchHeader]] = []
    next_offset = log_end_offset
    for pos, h in B.iter_batches(mv, strict=False):
        B.validate(mv, pos)
        if h.next_offset <= log_end_offset and not out:
            continue
        if h.base_offset < next_offset:
            raise B.InvalidBatch(f"batch at offset {h.base_offset} overlaps offsets below {next_offset} "
                                 f"(out of order or straddling the log end offset {log_end_offset})")
        out.append((pos, h))
        next_offset = h.next_offset
    return out


class MemoryLog(Log):
    """Producer state: rebuilt on truncation by replaying from the log start (no snapshots in memory)."""

    def __init__(self, *, clock: Clock | None = None, producer_state: ProducerStateConfig | None = None) -> None:
        self._bases: list[int] = []       # base offset of each batch, ascending
        self._nexts: list[int] = []       # last offset + 1 of each batch
        self._batches: list[bytes] = []
        self._positions: list[int] = []   # virtual byte position of each batch (cumulative sizes)
        self._max_ts: list[int] = []
        self._next_pos = 0
        self._start = 0
        self._end = 0
        self._epochs = LeaderEpochCache()
        clock = clock or Clock()
        self.producer_state = ProducerStateManager(None, producer_state or ProducerStateConfig(), clock.wall_ms)

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def _add(self, data: bytes, h: B.BatchHeader) -> None:
        self._bases.append(h.base_offset)
        self._nexts.append(h.next_offset)
        self._batches.append(data)
        self._positions.append(self._next_pos)
        self._max_ts.append(h.max_timestamp)
        self._next_pos += h.size
        self._end = h.next_offset
        self._epochs.assign(h.leader_epoch, h.base_offset)
        self.producer_state.on_append(h)

    def append(self, batch, leader_epoch: int, timestamp_ms: int | None = None) -> AppendInfo:
        buf = bytearray(batch)
        h = B.parse_header(buf)
        if h.size != len(buf):
            raise B.InvalidBatch(f"append takes exactly one batch: header says {h.size} bytes, got {len(buf)}")
        B.stamp(buf, 0, self._end, leader_epoch)
        if timestamp_ms is not None:
            B.set_log_append_time(buf, 0, timestamp_ms)
        h = B.parse_header(buf)
        self._add(bytes(buf), h)
        return AppendInfo(h.base_offset, h.last_offset, h.max_timestamp, h.size)

    def append_replica(self, batches) -> AppendInfo | None:
        info = None
        mv = memoryview(batches)
        for pos, h in check_replica_batches(mv, self._end):
            self._add(bytes(mv[pos:pos + h.size]), h)
            first = info.base_offset if info else h.base_offset
            info = AppendInfo(first, h.last_offset, h.max_timestamp, (info.size if info else 0) + h.size)
        return info

    def _index_of(self, offset: int) -> int:
        """Index of the batch containing ``offset`` (or the first batch after it)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        return i if offset < self._nexts[i] else i + 1

    def _pos_of(self, offset: int) -> int:
        i = self._index_of(offset)
        return self._positions[i] if i < len(self._positions) else self._next_pos

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one: bool = True) -> ReadResult:
        first = offset
        if offset >= max_offset:
            return ReadResult(b"", first)     # [offset, max_offset) is empty, even inside a batch
        i = self._index_of(offset)
        out: list[bytes] = []
        total = 0
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
        self._epochs.truncate_from_start(self._start)
        # drop whole batches entirely below the new start
        drop = bisect.bisect_right(self._nexts, self._start)
        if drop:
            del self._bases[:drop], self._nexts[:drop], self._batches[:drop], self._positions[:drop]
            del self._max_ts[:drop]
        self.producer_state.on_log_start_offset_incremented(self._start)

    def truncate_to(self, offset: int) -> None:
        """Kafka's UnifiedLog.truncateTo: the batch holding ``offset`` and all after it go, the LEO becomes
        ``offset`` and the log start offset falls to it if it was higher. At or past the LEO no batch goes, but the
        epoch cache is still truncated from the LEO: an entry there is an epoch this replica led without writing."""
        if offset >= self._end:
            self._epochs.truncate_from_end(self._end)
            return
        i = self._index_of(offset)
        if i < len(self._positions):
            self._next_pos = self._positions[i]
        del self._bases[i:], self._nexts[i:], self._batches[i:], self._positions[i:], self._max_ts[i:]
        self._end = offset
        self._start = min(self._start, offset)
        self._epochs.truncate_from_end(offset)
        self.producer_state.rebuild(self._start, offset, self._segments)

    def _segments(self, start: int, end: int) -> SegmentHeaders:
        """One pseudo-segment: the headers of the batches holding offsets in [start, end)."""
        def headers() -> Iterator[B.BatchHeader]:
            i = self._index_of(start)
            while i < len(self._batches) and self._bases[i] < end:
                yield B.parse_header(self._batches[i])
                i += 1
        return [(self._start, headers())]

    def truncate_fully_and_start_at(self, offset: int, log_start: int | None = None) -> None:
        self._bases, self._nexts, self._batches, self._positions, self._max_ts = [], [], [], [], []
        self._end = offset
        self._start = offset if log_start is None else log_start
        self._epochs.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        for i, ts in enumerate(self._max_ts):
            if ts >= timestamp_ms:
                found = first_record_at_or_after(self._batches[i], timestamp_ms, self._start)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> TimestampOffset | None:
        if not self._max_ts:
            return None
        i = max(range(len(self._max_ts)), key=lambda k: (self._max_ts[k], -k))
        return TimestampOffset(self._nexts[i] - 1, self._max_ts[i])

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self._epochs.assign(epoch, start_offset)

    def epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries()


def first_record_at_or_after(batch: bytes, timestamp_ms: int, min_offset: int) -> TimestampOffset | None:
    """The first record of ``batch`` with timestamp >= ``timestamp_ms`` and offset >= ``min_offset``
    (Kafka's FileRecords.searchForTimestamp, one batch). kafka.record decodes, so LogAppendTime batches report
    the batch's max timestamp for every record, as Kafka's consumers see them."""
    from kafka.record.default_records import DefaultRecordBatch

    for rec in DefaultRecordBatch(batch):
        if rec.timestamp >= timestamp_ms and rec.offset >= min_offset:
            return TimestampOffset(rec.offset, rec.timestamp)
    return None
