"""The durable partition log: segmented files like Apache Kafka's UnifiedLog / LocalLog / LogSegment.

On disk, one directory per partition:
- ``<base offset, 20 digits>.log`` — record batches v2 exactly as served; a segment's name is the base offset
  of its first batch. A new segment is rolled when the active one would exceed ``log.segment.bytes``.
- ``.index`` — sparse offset index, Kafka's layout: 8-byte entries (relative offset int32, file position int32),
  one per ``log.index.interval.bytes`` of appended data, keyed by the batch's last offset.
- ``.timeindex`` — Kafka's time index: 12-byte entries (max timestamp so far int64, relative offset int32).
- ``leader-epoch-checkpoint``, ``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint`` — Kafka's
  checkpoint text format (version line, count line, entries), replaced atomically (write temp, fsync, rename).
  Kafka keeps the last two per data dir with topic/partition columns; here each partition dir holds its own.
- ``<offset, 20 digits>.snapshot`` — idempotent producer state as of that offset (Kafka's ProducerSnapshot format,
  ``producer_state.py``): taken when a segment is rolled (at the new segment's base), after every rebuild and at
  close; deleted with their segment, and above the new end on truncation.

Nothing of the log data is kept in memory: reads are ``os.pread`` on the segment files and index lookups are
binary searches with ``os.pread`` over the index files (the page cache does the caching, as Kafka leans on it),
so process RSS stays flat however large the log grows. Per segment only a few integers live in RAM.

Durability (Kafka's flush rules): ``log.flush.interval.messages`` (1 = fsync every append) and
``log.flush.interval.ms`` decide when the active segment is fsynced (both checked on append, on the injected
Clock; there is no background flusher); a rolled segment is always fsynced, and ``close`` flushes. The recovery point (offsets below it are on disk) is checkpointed at roll and close. On open,
the last segment and every segment at or after the recovery point are re-read batch by batch with CRC32C; the
first torn, partial or corrupt batch and everything after it are truncated, never served, and their indexes
rebuilt. Other segments get a cheap index sanity check and a rebuild when it fails. Then the producer state is
rebuilt (Kafka's LogLoader): stray snapshots removed, the latest one at or below the log end loaded, the batch
headers after it replayed — so a restart reads a snapshot and the tail, not the whole log.

Threading rule: one event loop, no locks (see ``base``). A ``.lock`` file (flock) keeps a second FileLog —
in this process or another — from opening the same directory.
"""
from __future__ import annotations

import bisect
import errno
import fcntl
import logging
import os
import stat
import struct
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock
from . import batch as B
from .base import AppendInfo, EpochEntry, Log, ReadResult, TimestampOffset
from .epochs import LeaderEpochCache
from .memory import check_replica_batches, first_record_at_or_after
from .producer_state import ProducerStateConfig, ProducerStateManager, SegmentHeaders

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOCK_FILE = ".lock"
_DIGITS = 20
_INT32_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_OFFSET_ENTRY = struct.Struct(">ii")      # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")        # timestamp, relative offset
_SEARCH_CHUNK = 512                       # entries read at once when a binary search has narrowed down


class LogDirError(OSError):
    """The partition directory cannot be used as a log; the message names the directory and the problem."""

    def __init__(self, directory: Path, problem: str) -> None:
        super().__init__(f"log directory {directory}: {problem}")
        self.directory = directory
        self.problem = problem


class RecordBatchTooLarge(ValueError):
    """A batch larger than ``log.segment.bytes`` can never fit a segment (Kafka: RECORD_LIST_TOO_LARGE)."""


class LogClosed(RuntimeError):
    """The log was closed; its files are released."""


@dataclass(frozen=True)
class FileLogConfig:
    """Kafka's log settings. Flush policy: ``flush_interval_messages=1`` fsyncs every append, N every N
    offsets, and the default (Long.MAX_VALUE, as Kafka) leaves it to segment roll and ``close``."""

    segment_bytes: int = 1 << 30                  # log.segment.bytes
    index_interval_bytes: int = 4096              # log.index.interval.bytes
    flush_interval_messages: int = _LONG_MAX      # log.flush.interval.messages
    flush_interval_ms: int = _LONG_MAX            # log.flush.interval.ms (measured on the injected Clock)
    max_open_segments: int = 64                   # segments whose files stay open (fd budget), LRU

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes <= _INT32_MAX:
            raise ValueError(f"log.segment.bytes must be in 1..{_INT32_MAX} (positions are int32), "
                             f"got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"log.index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.flush_interval_messages < 1 or self.flush_interval_ms < 0:
            raise ValueError("log.flush.interval.messages must be >= 1 and log.flush.interval.ms >= 0")
        if self.max_open_segments < 1:
            raise ValueError("max_open_segments must be >= 1")

    @classmethod
    def from_broker_config(cls, cfg: Mapping[str, Any] | Any) -> FileLogConfig:
        """Read Kafka's key names from a BrokerConfig (or any mapping); absent keys keep Kafka's defaults."""
        keys = {"segment_bytes": "log.segment.bytes", "index_interval_bytes": "log.index.interval.bytes",
                "flush_interval_messages": "log.flush.interval.messages",
                "flush_interval_ms": "log.flush.interval.ms"}
        kwargs: dict[str, int] = {}
        for field_name, key in keys.items():
            try:
                value = cfg[key]
            except KeyError:
                continue
            kwargs[field_name] = int(value)
        return cls(**kwargs)


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
    mv = memoryview(data)
    while mv:
        n = os.pwrite(fd, mv, pos)
        mv = mv[n:]
        pos += n


def _segment_name(base: int) -> str:
    return f"{base:0{_DIGITS}d}"


class _Segment:
    """One segment's files and the few numbers about it kept in RAM (never its data)."""

    __slots__ = ("base", "path", "size", "index_entries", "time_entries", "last_time_ts", "max_ts",
                 "max_ts_offset", "bytes_since_index", "fd", "index_fd", "time_fd")

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.path = directory / _segment_name(base)
        self.size = 0                  # valid bytes in .log
        self.index_entries = 0
        self.time_entries = 0
        self.last_time_ts = -1         # timestamp of the last time index entry (-1: none)
        self.max_ts: int | None = None  # largest batch max timestamp in the segment
        self.max_ts_offset = -1        # last offset of the first batch that reached max_ts
        self.bytes_since_index = 0
        self.fd: int | None = None
        self.index_fd: int | None = None
        self.time_fd: int | None = None

    def file(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)

    def open(self, create: bool = False) -> None:
        if self.fd is not None:
            return
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fds = []
        try:
            fds.append(os.open(self.file(LOG_SUFFIX), flags, 0o644))
            fds.append(os.open(self.file(INDEX_SUFFIX), os.O_RDWR | os.O_CREAT, 0o644))
            fds.append(os.open(self.file(TIME_INDEX_SUFFIX), os.O_RDWR | os.O_CREAT, 0o644))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        self.fd, self.index_fd, self.time_fd = fds

    def close(self) -> None:
        for fd in (self.fd, self.index_fd, self.time_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.index_fd = self.time_fd = None

    def fsync(self) -> None:
        for fd in (self.fd, self.index_fd, self.time_fd):
            if fd is not None:
                os.fsync(fd)

    def reset_indexes(self) -> None:
        os.ftruncate(self.index_fd, 0)
        os.ftruncate(self.time_fd, 0)
        self.index_entries = self.time_entries = 0
        self.last_time_ts = -1
        self.max_ts, self.max_ts_offset = None, -1
        self.bytes_since_index = 0

    def header_at(self, pos: int) -> B.BatchHeader:
        return B.parse_header(os.pread(self.fd, B.CONTROL_PEEK, pos))   # a marker's type follows the header

    def headers(self, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, B.BatchHeader]]:
        """(position, header) of each batch from ``pos``, reading only the headers (and a marker's type)."""
        end = self.size if end is None else end
        while pos < end:
            h = self.header_at(pos)
            yield pos, h
            pos += h.size

    def time_append(self, ts: int, offset: int) -> None:
        """Kafka's TimeIndex.maybeAppend: only a larger timestamp than the last entry's is indexed."""
        if ts > self.last_time_ts:
            os.pwrite(self.time_fd, _TIME_ENTRY.pack(ts, offset - self.base), self.time_entries * _TIME_ENTRY.size)
            self.time_entries += 1
            self.last_time_ts = ts

    def index_batch(self, h: B.BatchHeader, pos: int, interval: int) -> None:
        """Kafka's LogSegment.append bookkeeping: max timestamp so far, then an index entry when more than
        ``interval`` bytes went in since the last one (the entry points at this batch)."""
        if self.max_ts is None or h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = h.max_timestamp, h.last_offset
        if self.bytes_since_index > interval:
            os.pwrite(self.index_fd, _OFFSET_ENTRY.pack(h.last_offset - self.base, pos),
                      self.index_entries * _OFFSET_ENTRY.size)
            self.index_entries += 1
            self.time_append(self.max_ts, self.max_ts_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += h.size

    def seal(self) -> None:
        """Kafka's onBecomeInactiveSegment: the time index ends with the segment's max timestamp, so a reopen
        knows it from the last entry without reading the segment."""
        if self.max_ts is not None:
            self.time_append(self.max_ts, self.max_ts_offset)


def _floor_entry(fd: int, n: int, st: struct.Struct, key: int, target: int) -> tuple[int, tuple] | None:
    """(index, entry) of the last of ``n`` entries whose field ``key`` is <= ``target`` (fields ascend), found by
    binary search with pread; None when every entry is above ``target``."""
    if n == 0:
        return None
    lo, hi = 0, n - 1
    while hi - lo > _SEARCH_CHUNK:
        mid = (lo + hi + 1) // 2
        if st.unpack(os.pread(fd, st.size, mid * st.size))[key] <= target:
            lo = mid
        else:
            hi = mid - 1
    best = None
    chunk = os.pread(fd, (hi - lo + 1) * st.size, lo * st.size)
    for i, entry in enumerate(st.iter_unpack(chunk)):
        if entry[key] > target:
            break
        best = (lo + i, entry)
    return best


class FileLog(Log):
    """A partition log in ``dir`` that survives restarts and crashes; see the module docstring."""

    def __init__(self, dir: Path | str, config: FileLogConfig | None = None, *, clock: Clock | None = None,
                 producer_state: ProducerStateConfig | None = None) -> None:
        self.dir = Path(dir)
        self.config = config or FileLogConfig()
        self._clock = clock or Clock()
        self._producer_config = producer_state or ProducerStateConfig()
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._open_lru: OrderedDict[int, _Segment] = OrderedDict()
        self._epochs = LeaderEpochCache()
        self._start = 0
        self._end = 0
        self._recovery_point = 0
        self._dir_dirty = False
        self._closed = False
        self._lock_fd: int | None = None
        self._open_dir()
        try:
            self.producer_state = ProducerStateManager(self.dir, self._producer_config, self._clock.wall_ms)
            self._load()
            self._last_flush_ms = self._now_ms()
        except BaseException:
            self._release()
            raise

    # -- opening and recovery ---------------------------------------------------------------------------------

    def _err(self, problem: str) -> LogDirError:
        return LogDirError(self.dir, problem)

    def _open_dir(self) -> None:
        d = self.dir
        try:
            mode = os.stat(d).st_mode
        except FileNotFoundError:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise self._err(f"cannot create it: {e.strerror}") from None
            mode = stat.S_IFDIR
        except OSError as e:
            raise self._err(f"cannot access it: {e.strerror}") from None
        if not stat.S_ISDIR(mode):
            raise self._err("exists but is not a directory")
        if not os.access(d, os.R_OK | os.W_OK | os.X_OK):
            raise self._err("no read/write/search permission")
        try:
            self._lock_fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise self._err(f"cannot open {LOCK_FILE}: {e.strerror}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._lock_fd)
            self._lock_fd = None
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise self._err("already open in another FileLog (locked)") from None
            raise self._err(f"cannot lock {LOCK_FILE}: {e.strerror}") from None

    def _scan_dir(self) -> list[int]:
        """Base offsets of the segments present; stray temp/deleted files go, foreign names are an error."""
        bases: set[int] = set()
        index_only: list[Path] = []
        try:
            names = os.listdir(self.dir)
        except OSError as e:
            raise self._err(f"cannot list it: {e.strerror}") from None
        for name in names:
            p = self.dir / name
            stem, _, suffix = name.partition(".")
            if name.endswith((".tmp", ".deleted", ".cleaned", ".swap")):
                try:
                    p.unlink(missing_ok=True)   # an interrupted checkpoint write or delete (Kafka's suffixes)
                except OSError as e:
                    raise self._err(f"cannot remove stray {name}: {e.strerror}") from None
                continue
            if suffix not in ("log", "index", "timeindex"):
                continue                        # checkpoints, .lock, or files that are not ours
            if len(stem) != _DIGITS or not stem.isdigit():
                raise self._err(f"{name} is not a log segment file (expected a {_DIGITS}-digit base offset)")
            if not p.is_file():
                raise self._err(f"{name} is not a regular file")
            if suffix == "log":
                bases.add(int(stem))
            else:
                index_only.append(p)
        for p in index_only:                    # an index without its .log is an orphan (Kafka deletes them)
            if int(p.name.partition(".")[0]) not in bases:
                p.unlink(missing_ok=True)
        return sorted(bases)

    def _read_checkpoint(self, name: str, width: int) -> list[tuple[int, ...]] | None:
        """Kafka's checkpoint format: version 0, entry count, then ``width`` integers per line."""
        path = self.dir / name
        try:
            text = path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise self._err(f"cannot read {name}: {e}") from None
        lines = text.splitlines()
        try:
            if len(lines) < 2 or int(lines[0]) != 0:
                raise ValueError("missing header or unknown version")
            count = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2:] if line.strip()]
            if len(entries) != count or any(len(e) != width for e in entries):
                raise ValueError(f"expected {count} entries of {width} numbers")
        except ValueError as e:
            raise self._err(f"{name} is malformed: {e}") from None
        return entries

    def _write_checkpoint(self, name: str, entries: list[tuple[int, ...]]) -> None:
        body = f"0\n{len(entries)}\n" + "".join(" ".join(str(x) for x in e) + "\n" for e in entries)
        tmp = self.dir / (name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _pwrite_all(fd, body.encode("ascii"), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / name)
        self._fsync_dir()

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dir_dirty = False

    def _check_first_batch(self, seg: _Segment) -> None:
        """A .log whose first bytes are not a v2 batch header of this segment is someone else's file: refuse
        it rather than truncate it away. All-zero or short headers are a torn write and left to recovery."""
        head = os.pread(seg.fd, B.HEADER_SIZE, 0)
        if len(head) < B.HEADER_SIZE or not any(head):
            return
        h = B.parse_header(head)
        if h.magic != 2 or h.size < B.HEADER_SIZE or h.base_offset < seg.base:
            raise self._err(f"{seg.file(LOG_SUFFIX).name} is not a Kafka log segment (first batch: magic "
                            f"{h.magic}, base offset {h.base_offset}, length {h.size - B.LOG_OVERHEAD})")

    def _load(self) -> None:
        bases = self._scan_dir()
        start_ckpt = self._read_checkpoint(LOG_START_CHECKPOINT, 1)
        rp_ckpt = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT, 1)
        epoch_ckpt = self._read_checkpoint(LEADER_EPOCH_CHECKPOINT, 2)
        log_start = start_ckpt[0][0] if start_ckpt else None
        recovery_point = rp_ckpt[0][0] if rp_ckpt else 0

        for base in bases:
            seg = _Segment(self.dir, base)
            self._add_segment(seg)
            try:
                seg.size = os.fstat(seg.fd).st_size
            except OSError as e:
                raise self._err(f"cannot stat {seg.file(LOG_SUFFIX).name}: {e.strerror}") from None
            self._check_first_batch(seg)

        transitions: list[tuple[int, int, int]] = []     # (epoch, base, last offset) seen while recovering
        recovered: list[_Segment] = []
        if self._segments:
            first_unflushed = max(0, min(bisect.bisect_right(self._bases, recovery_point) - 1,
                                         len(self._segments) - 1))
            for seg in self._segments[:first_unflushed]:
                if not self._indexes_sane(seg):
                    log.warning("%s: rebuilding indexes of segment %d", self.dir, seg.base)
                    self._recover_segment(seg, [])
                    recovered.append(seg)
            for i in range(first_unflushed, len(self._segments)):
                seg = self._segments[i]
                recovered.append(seg)
                if self._recover_segment(seg, transitions) and i + 1 < len(self._segments):
                    for later in self._segments[i + 1:]:
                        log.warning("%s: deleting segment %d after a corrupt tail", self.dir, later.base)
                    self._delete_segments(self._segments[i + 1:])
                    break
            last = self._segments[-1]
            self._end = self._next_offset_of(last)
        if log_start is not None and self._segments and self._end < log_start:
            # The data the log start checkpoint speaks of is gone (Kafka's LogLoader: start over there).
            self._delete_segments(list(self._segments))
            self.producer_state.truncate_fully_and_start_at(log_start)
            epoch_ckpt, transitions = [], []
        if not self._segments:
            self._end = log_start or 0
            self._new_active(self._end)
        self._start = max(log_start or 0, self._segments[0].base)
        # Segments wholly below the log start (a crash between checkpoint and unlink) go now.
        k = 0
        while k + 1 < len(self._segments) and self._segments[k + 1].base <= self._start:
            k += 1
        self._delete_segments(self._segments[:k])

        if epoch_ckpt is None:
            # No checkpoint: rebuild the cache from every batch header (Kafka rebuilds from the recovered ones).
            epoch_ckpt = []
            self._epochs = LeaderEpochCache()
            transitions = [(h.leader_epoch, h.base_offset, h.last_offset)
                           for seg in self._segments for _pos, h in self._use(seg).headers()]
        else:
            self._epochs = LeaderEpochCache(EpochEntry(*e) for e in epoch_ckpt)
        # Batches wholly below the log start are deleted records: they name no epoch (truncateFromStart).
        for epoch, base, last_offset in transitions:
            if last_offset >= self._start:
                self._epochs.assign(epoch, base)
        # Kafka's LogLoader truncates the cache from the LEO (truncateFromEnd(nextOffset)), then from the log
        # start: entries the disk lost go, and so does an entry exactly at the LEO (an epoch this replica led
        # without writing, or the one truncateFromStart put there when DeleteRecords emptied the log).
        self._epochs.truncate_from_end(self._end)
        self._epochs.truncate_from_start(self._start)
        if [tuple(e) for e in self._epochs.entries()] != [tuple(e) for e in epoch_ckpt]:
            self._persist_epochs()
        if start_ckpt is None or self._start != log_start:
            self._write_checkpoint(LOG_START_CHECKPOINT, [(self._start,)])
        # Recovered data is now validated; make it durable so the recovery point can move to the end.
        for seg in recovered:
            if seg in self._segments:
                self._use(seg)
                if seg is not self._segments[-1]:
                    seg.seal()
                seg.fsync()
        self._recovery_point = self._end
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, [(self._recovery_point,)])
        self._load_producer_state()

    def _load_producer_state(self) -> None:
        """LogLoader's last step: remove stray snapshots, then rebuild from the latest snapshot and the tail."""
        ps = self.producer_state
        ps.remove_stray_snapshots(self._bases)
        if not self._producer_config.load_on_open:      # produce.producer_state_not_loaded fault switch
            ps.truncate_and_reload(self._start, self._start)
            ps.update_map_end_offset(self._end)
            return
        ps.rebuild(self._start, self._end, self._segment_headers, self._bases[-2:])

    def _segment_headers(self, start: int, end: int) -> SegmentHeaders:
        """For each segment holding offsets in [start, end): (its base, the headers of those batches)."""
        if start >= end:
            return []
        i, pos, _ = self._locate(start)

        def headers(seg: _Segment, pos: int):
            for _p, h in self._use(seg).headers(pos):
                if h.base_offset >= end:
                    return
                yield h
        out = [(self._segments[i].base, headers(self._segments[i], pos))]
        out += [(seg.base, headers(seg, 0)) for seg in self._segments[i + 1:] if seg.base < end]
        return out

    def _next_offset_of(self, seg: _Segment) -> int:
        """Offset after the segment's last batch (its base when empty)."""
        self._use(seg)
        if seg.size == 0:
            return seg.base
        if seg.index_entries:
            pos = _OFFSET_ENTRY.unpack(os.pread(seg.index_fd, _OFFSET_ENTRY.size,
                                                (seg.index_entries - 1) * _OFFSET_ENTRY.size))[1]
        else:
            pos = 0
        nxt = seg.base
        for _pos, h in seg.headers(pos):
            nxt = h.next_offset
        return nxt

    def _indexes_sane(self, seg: _Segment) -> bool:
        """Kafka's sanityCheck, a little stricter: whole entries, ascending, the last offset entry pointing at a
        batch whose last offset it names, and a time index present for a non-empty segment. Loads the counts
        and the segment's max timestamp (the last time index entry, written when the segment was sealed)."""
        self._use(seg)
        isize, tsize = os.fstat(seg.index_fd).st_size, os.fstat(seg.time_fd).st_size
        if isize % _OFFSET_ENTRY.size or tsize % _TIME_ENTRY.size:
            return False
        n, m = isize // _OFFSET_ENTRY.size, tsize // _TIME_ENTRY.size
        if seg.size > 0 and m == 0:
            return False
        if n:
            first = _OFFSET_ENTRY.unpack(os.pread(seg.index_fd, _OFFSET_ENTRY.size, 0))
            last = _OFFSET_ENTRY.unpack(os.pread(seg.index_fd, _OFFSET_ENTRY.size, isize - _OFFSET_ENTRY.size))
            if not (0 <= first[0] <= last[0] and 0 <= first[1] <= last[1] < seg.size):
                return False
            try:
                h = seg.header_at(last[1])
            except B.InvalidBatch:
                return False
            if h.magic != 2 or h.last_offset != seg.base + last[0] or last[1] + h.size > seg.size:
                return False
        if m:
            t_first = _TIME_ENTRY.unpack(os.pread(seg.time_fd, _TIME_ENTRY.size, 0))
            t_last = _TIME_ENTRY.unpack(os.pread(seg.time_fd, _TIME_ENTRY.size, tsize - _TIME_ENTRY.size))
            if not (t_first[0] <= t_last[0] and 0 <= t_first[1] <= t_last[1] <= _INT32_MAX):
                return False
            seg.last_time_ts = seg.max_ts = t_last[0]
            seg.max_ts_offset = seg.base + t_last[1]
        seg.index_entries, seg.time_entries = n, m
        return True

    def _recover_segment(self, seg: _Segment, transitions: list[tuple[int, int, int]]) -> bool:
        """Kafka's LogSegment.recover: re-read every batch, check header sanity, offsets and CRC32C, rebuild
        both indexes; truncate at the first bad batch. True when bytes were truncated."""
        self._use(seg)
        seg.reset_indexes()
        pos, size, expected = 0, seg.size, seg.base
        problem = None
        while pos < size:
            head = os.pread(seg.fd, B.HEADER_SIZE, pos)
            if len(head) < B.HEADER_SIZE:
                problem = f"partial batch header ({len(head)} bytes)"
                break
            h = B.parse_header(head)
            if h.magic != 2 or h.size < B.HEADER_SIZE or pos + h.size > size:
                problem = f"batch of {h.size} bytes (magic {h.magic}) does not fit in {size - pos} bytes"
                break
            if h.base_offset < expected or h.last_offset_delta < 0 or h.last_offset - seg.base > _INT32_MAX:
                problem = f"batch offsets {h.base_offset}..{h.last_offset} out of order (expected >= {expected})"
                break
            try:
                B.validate(os.pread(seg.fd, h.size, pos))
            except B.InvalidBatch as e:
                problem = str(e)
                break
            seg.index_batch(h, pos, self.config.index_interval_bytes)
            transitions.append((h.leader_epoch, h.base_offset, h.last_offset))
            expected = h.next_offset
            pos += h.size
        if problem is None:
            return False
        log.warning("%s: segment %d: %s at position %d; truncating %d bytes", self.dir, seg.base, problem, pos,
                    size - pos)
        os.ftruncate(seg.fd, pos)
        seg.size = pos
        return True

    # -- segment bookkeeping ----------------------------------------------------------------------------------

    def _add_segment(self, seg: _Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base)
        self._use(seg)

    def _use(self, seg: _Segment) -> _Segment:
        """Open the segment's files if needed; keep at most ``max_open_segments`` open (the active one always)."""
        if seg.fd is None:
            try:
                seg.open()
            except OSError as e:
                raise self._err(f"cannot open segment {seg.base}: {e.strerror}") from None
        self._open_lru[seg.base] = seg
        self._open_lru.move_to_end(seg.base)
        active = self._segments[-1] if self._segments else None
        while len(self._open_lru) > self.config.max_open_segments:
            victim = next((b for b, s in self._open_lru.items() if s is not seg and s is not active), None)
            if victim is None:
                break
            self._open_lru.pop(victim).close()
        return seg

    def _delete_segments(self, segs: list[_Segment]) -> None:
        for seg in segs:
            self._open_lru.pop(seg.base, None)
            seg.close()
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                seg.file(suffix).unlink(missing_ok=True)
            self.producer_state.delete_snapshot(seg.base)     # UnifiedLog.deleteProducerSnapshots
            i = self._segments.index(seg)
            del self._segments[i], self._bases[i]
        if segs:
            self._fsync_dir()

    def _roll(self, base: int, snapshot: bool = True) -> None:
        """Seal the active segment (final time index entry, fsync) and start a new one at ``base``; with
        ``snapshot``, write the producer state as of ``base`` (UnifiedLog.roll), so a reload can start there."""
        old = self._segments[-1]
        self._use(old)
        old.seal()
        old.fsync()
        seg = _Segment(self.dir, base)
        try:
            seg.open(create=True)
        except OSError as e:
            raise self._err(f"cannot create segment {base}: {e.strerror}") from None
        self._add_segment(seg)
        self._fsync_dir()
        self._recovery_point = max(self._recovery_point, self._end)
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, [(self._recovery_point,)])
        if snapshot:
            self.producer_state.update_map_end_offset(base)
            self.producer_state.take_snapshot()

    def _new_active(self, base: int) -> _Segment:
        """A new empty active segment at ``base`` (after the previous active one was deleted)."""
        seg = _Segment(self.dir, base)
        try:
            seg.open(create=True)
        except OSError as e:
            raise self._err(f"cannot create segment {base}: {e.strerror}") from None
        self._add_segment(seg)
        self._fsync_dir()
        return seg

    def _persist_epochs(self) -> None:
        self._write_checkpoint(LEADER_EPOCH_CHECKPOINT, [(e.epoch, e.start_offset) for e in self._epochs.entries()])

    def _now_ms(self) -> float:
        return self._clock.monotonic() * 1000.0

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"log {self.dir} is closed")

    # -- Log contract -----------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def _append_one(self, buf: bytes | bytearray | memoryview, h: B.BatchHeader) -> None:
        """Write one batch at the end of the active segment, rolling first when it would not fit."""
        if h.size > self.config.segment_bytes:
            raise RecordBatchTooLarge(f"batch of {h.size} bytes exceeds log.segment.bytes "
                                      f"{self.config.segment_bytes}")
        seg = self._use(self._segments[-1])
        if seg.size > 0 and (seg.size + h.size > self.config.segment_bytes
                             or h.last_offset - seg.base > _INT32_MAX):
            self._roll(h.base_offset)
            seg = self._segments[-1]
        elif h.last_offset - seg.base > _INT32_MAX:        # empty segment far behind the batch's offsets
            self._delete_segments([seg])
            seg = self._new_active(h.base_offset)
        pos = seg.size
        try:
            _pwrite_all(seg.fd, buf, pos)
        except OSError:
            os.ftruncate(seg.fd, pos)        # never leave a partial batch behind a live log
            raise
        seg.size = pos + h.size
        seg.index_batch(h, pos, self.config.index_interval_bytes)
        self._end = h.next_offset
        self.producer_state.on_append(h)
        if self._epochs.assign(h.leader_epoch, h.base_offset):
            self._persist_epochs()

    def maybe_flush(self) -> None:
        """Flush if ``log.flush.interval.messages`` or ``.ms`` is due. Appends call it; a broker timer may too,
        so an idle partition's ``flush.ms`` still fires (Kafka's log flusher)."""
        self._check_open()
        if (self._end - self._recovery_point >= self.config.flush_interval_messages
                or self._now_ms() - self._last_flush_ms >= self.config.flush_interval_ms):
            self.flush()

    def append(self, batch: bytes | bytearray | memoryview, leader_epoch: int,
               timestamp_ms: int | None = None) -> AppendInfo:
        self._check_open()
        buf = bytearray(batch)
        h = B.parse_header(buf)
        if h.size != len(buf):
            raise B.InvalidBatch(f"append takes exactly one batch: header says {h.size} bytes, got {len(buf)}")
        B.stamp(buf, 0, self._end, leader_epoch)
        if timestamp_ms is not None:
            B.set_log_append_time(buf, 0, timestamp_ms)
        h = B.parse_header(buf)
        self._append_one(buf, h)
        self.maybe_flush()
        return AppendInfo(h.base_offset, h.last_offset, h.max_timestamp, h.size)

    def append_replica(self, batches: bytes | bytearray | memoryview) -> AppendInfo | None:
        self._check_open()
        mv = memoryview(batches)
        todo = check_replica_batches(mv, self._end)
        for _pos, h in todo:
            if h.size > self.config.segment_bytes:
                raise RecordBatchTooLarge(f"batch at offset {h.base_offset} of {h.size} bytes exceeds "
                                          f"log.segment.bytes {self.config.segment_bytes}")
        for pos, h in todo:
            self._append_one(mv[pos:pos + h.size], h)
        if not todo:
            return None
        self.maybe_flush()
        return AppendInfo(todo[0][1].base_offset, todo[-1][1].last_offset, todo[-1][1].max_timestamp,
                          sum(h.size for _, h in todo))

    def _locate(self, offset: int) -> tuple[int, int, B.BatchHeader | None]:
        """(segment index, position, header) of the batch holding ``offset`` or else the first batch after it;
        header None when there is none (position is then the end of the last segment). Index lookup, then a
        header walk of at most ``log.index.interval.bytes`` or so."""
        last = len(self._segments) - 1
        if offset >= self._end:
            return last, self._segments[last].size, None
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while i <= last:
            seg = self._use(self._segments[i])
            pos = 0
            if offset > seg.base:
                found = _floor_entry(seg.index_fd, seg.index_entries, _OFFSET_ENTRY, 0, offset - seg.base)
                if found is not None:
                    pos = found[1][1]
            for p, h in seg.headers(pos):
                if h.last_offset >= offset:
                    return i, p, h
            i += 1
        return last, self._segments[last].size, None

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one: bool = True) -> ReadResult:
        self._check_open()
        empty = ReadResult(b"", offset)
        if offset >= self._end or offset >= max_offset:
            return empty
        i, pos, h = self._locate(offset)
        if h is None or h.base_offset >= max_offset:
            return empty
        seg = self._segments[i]
        if h.size > max_bytes:
            if not min_one:
                return empty
            return ReadResult(os.pread(seg.fd, h.size, pos), h.base_offset)   # KIP-74: first batch whole
        # Where reading must stop: the batch at max_offset (e.g. the HW), else the end of the log.
        stop_i, stop_pos = len(self._segments) - 1, self._segments[-1].size
        if max_offset < self._end:
            stop_i, stop_pos, stop_h = self._locate(max_offset)
            if stop_h is not None and stop_h.base_offset < max_offset:
                stop_pos += stop_h.size       # a batch straddling max_offset holds offsets below it: served
        out: list[bytes] = []
        budget = max_bytes
        while budget > 0 and i <= stop_i:
            seg = self._use(self._segments[i])
            end = stop_pos if i == stop_i else seg.size
            n = min(budget, end - pos)
            if n > 0:
                chunk = os.pread(seg.fd, n, pos)
                used = 0
                for p, bh in B.iter_batches(chunk, strict=False):
                    used = p + bh.size
                out.append(chunk if used == len(chunk) else chunk[:used])
                budget -= used
                if used < end - pos:          # the budget ran out inside this segment
                    break
            i, pos = i + 1, 0
        return ReadResult(b"".join(out), h.base_offset)

    def bytes_between(self, start: int, end: int) -> int:
        self._check_open()
        if end <= start:
            return 0
        i, p, _ = self._locate(start)
        j, q, _ = self._locate(end)
        if i == j:
            return q - p
        return (self._segments[i].size - p) + sum(s.size for s in self._segments[i + 1:j]) + q

    def delete_records_before(self, offset: int) -> None:
        """Move the log start (checkpointed before any file goes, so a crash cannot resurrect records) and delete
        segments whose successor starts at or below it (Kafka's deleteLogStartOffsetBreachedSegments)."""
        self._check_open()
        if offset <= self._start:
            return
        self._start = min(offset, self._end)
        self._write_checkpoint(LOG_START_CHECKPOINT, [(self._start,)])
        if self._epochs.truncate_from_start(self._start):
            self._persist_epochs()
        k = 0
        while k + 1 < len(self._segments) and self._segments[k + 1].base <= self._start:
            k += 1
        self._delete_segments(self._segments[:k])
        self.producer_state.on_log_start_offset_incremented(self._start)

    def truncate_to(self, offset: int) -> None:
        """Kafka's UnifiedLog.truncateTo: the batch holding ``offset`` and everything after it go; the LEO becomes
        ``offset``; the log start falls to ``offset`` if above. Below the first segment: start afresh there. At or
        past the LEO no batch goes, but the epoch cache is still truncated from the LEO (Kafka's comment: a replica
        that led an epoch and lost it before appending keeps a conflicting entry at its log end)."""
        self._check_open()
        if offset >= self._end:
            if self._epochs.truncate_from_end(self._end):
                self._persist_epochs()
            return
        if offset < self._segments[0].base:
            self._delete_segments(list(self._segments))
            self._new_active(offset)
            self._end = offset
            self.producer_state.truncate_fully_and_start_at(offset)
        else:
            self._delete_segments([s for s in self._segments if s.base > offset])
            seg = self._use(self._segments[-1])
            _, pos, h = self._locate(offset)
            if h is None:
                pos = seg.size
            self._truncate_segment(seg, pos, offset)
            self._end = offset
            # On reopen the LEO is read back as the last batch's end (or an empty segment's base). When the
            # truncation point is past that (a gap, or inside a dropped batch), an empty segment based at the
            # new LEO records it; Kafka's truncateFullyAndStartAt does the same for a log cut below its start.
            if self._next_offset_of(seg) != offset:
                self._roll(offset, snapshot=False)    # the state is rebuilt below; a snapshot now would be stale
        if offset < self._start:
            self._start = offset
            self._write_checkpoint(LOG_START_CHECKPOINT, [(self._start,)])
        if self._epochs.truncate_from_end(offset):
            self._persist_epochs()
        self._recovery_point = min(self._recovery_point, offset)
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, [(self._recovery_point,)])
        # UnifiedLog.truncateTo: the producer state as of the new end — snapshots above it go, the latest one left
        # is reloaded and the batches after it replayed; producers wholly below the end keep their state.
        self.producer_state.rebuild(self._start, offset, self._segment_headers)

    def truncate_fully_and_start_at(self, offset: int, log_start: int | None = None) -> None:
        """Kafka's truncateFullyAndStartAt. The log start checkpoint is written first: a crash before the segments
        are gone (or, with ``log_start`` above ``offset``, before the append that covers it) leaves a log ending
        below its checkpointed start, which loading turns into an empty log at that start."""
        self._check_open()
        self._start = offset if log_start is None else log_start
        self._write_checkpoint(LOG_START_CHECKPOINT, [(self._start,)])
        self._delete_segments(list(self._segments))
        self._new_active(offset)
        self._end = offset
        if self._epochs.clear():
            self._persist_epochs()
        self._recovery_point = offset
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, [(self._recovery_point,)])
        self.producer_state.truncate_fully_and_start_at(offset)

    def _truncate_segment(self, seg: _Segment, pos: int, offset: int) -> None:
        """Kafka's LogSegment.truncateTo: cut the .log at ``pos``, drop index entries at/after ``offset`` and
        recompute the max timestamp from the time index's last entry and the batches after it."""
        rel = offset - seg.base
        found = _floor_entry(seg.index_fd, seg.index_entries, _OFFSET_ENTRY, 0, rel - 1)
        seg.index_entries = 0 if found is None else found[0] + 1
        found = _floor_entry(seg.time_fd, seg.time_entries, _TIME_ENTRY, 1, rel - 1)
        seg.time_entries = 0 if found is None else found[0] + 1
        os.ftruncate(seg.index_fd, seg.index_entries * _OFFSET_ENTRY.size)
        os.ftruncate(seg.time_fd, seg.time_entries * _TIME_ENTRY.size)
        os.ftruncate(seg.fd, pos)
        seg.size = pos
        seg.bytes_since_index = 0
        seg.max_ts, seg.max_ts_offset, seg.last_time_ts = None, -1, -1
        scan_from = 0
        if found is not None:
            ts, trel = found[1]
            seg.max_ts, seg.max_ts_offset, seg.last_time_ts = ts, seg.base + trel, ts
            idx = _floor_entry(seg.index_fd, seg.index_entries, _OFFSET_ENTRY, 0, trel)
            scan_from = 0 if idx is None else idx[1][1]
        for _p, h in seg.headers(scan_from):
            if seg.max_ts is None or h.max_timestamp > seg.max_ts:
                seg.max_ts, seg.max_ts_offset = h.max_timestamp, h.last_offset
        seg.fsync()

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """Kafka's fetchOffsetByTimestamp: skip segments whose max timestamp is below the target, start in the
        first other one at the time index's floor entry, walk headers, decode only the batch that matches.
        Unlike Kafka it goes on to later segments when the first one's match lies below the log start."""
        self._check_open()
        first = max(bisect.bisect_right(self._bases, self._start) - 1, 0)
        for seg in self._segments[first:]:
            if seg.max_ts is None or seg.max_ts < timestamp_ms:
                continue
            self._use(seg)
            from_offset = seg.base
            found = _floor_entry(seg.time_fd, seg.time_entries, _TIME_ENTRY, 0, timestamp_ms)
            if found is not None:
                from_offset = seg.base + found[1][1]
            from_offset = max(from_offset, self._start)
            pos = 0
            idx = _floor_entry(seg.index_fd, seg.index_entries, _OFFSET_ENTRY, 0, from_offset - seg.base)
            if idx is not None:
                pos = idx[1][1]
            for p, h in seg.headers(pos):
                if h.max_timestamp >= timestamp_ms and h.last_offset >= self._start:
                    hit = first_record_at_or_after(os.pread(seg.fd, h.size, p), timestamp_ms, self._start)
                    if hit is not None:
                        return hit
        return None

    def max_timestamp(self) -> TimestampOffset | None:
        """Largest batch max timestamp among batches not wholly below the log start, earliest on ties. Sealed
        segments answer from RAM; only the first segment, when the log start cuts it, is re-walked."""
        self._check_open()
        best: tuple[int, int] | None = None
        for k, seg in enumerate(self._segments):
            if seg.max_ts is None:
                continue
            if k == 0 and self._start > seg.base:
                i, pos, h = self._locate(self._start)
                if h is None or i != 0:
                    continue                  # every batch of this segment is below the log start
                self._use(seg)
                cand = None
                for _p, bh in seg.headers(pos):
                    if cand is None or bh.max_timestamp > cand[0]:
                        cand = (bh.max_timestamp, bh.last_offset)
            else:
                cand = (seg.max_ts, seg.max_ts_offset)
            if cand is not None and (best is None or cand[0] > best[0]):
                best = cand
        return None if best is None else TimestampOffset(best[1], best[0])

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self._check_open()
        if self._epochs.assign(epoch, start_offset):
            self._persist_epochs()

    def epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries()

    @property
    def recovery_point(self) -> int:
        """Offsets below this are fsynced (Kafka's recoveryPoint); recovery re-checks everything from it."""
        return self._recovery_point

    def flush(self) -> None:
        """fsync the active segment and its indexes (rolled segments were synced at roll); the recovery point
        moves to the LEO (checkpointed at the next roll or close)."""
        self._check_open()
        self._use(self._segments[-1]).fsync()
        if self._dir_dirty:
            self._fsync_dir()
        self._recovery_point = self._end
        self._last_flush_ms = self._now_ms()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
            self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, [(self._recovery_point,)])
            self.producer_state.take_snapshot()      # a restart then loads it instead of replaying the log
        finally:
            self._closed = True
            self._release()

    def _release(self) -> None:
        for seg in self._segments:
            seg.close()
        self._open_lru.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def segment_bases(self) -> list[int]:
        """Base offsets of the segments on disk, ascending (observability and tests)."""
        return list(self._bases)
