"""Idempotent producer state of one partition log, rebuilt from the log and snapshots (Kafka's ProducerStateManager,
ProducerStateEntry, BatchMetadata, ProducerAppendInfo; UnifiedLog.rebuildProducerState).

Why it lives with the log: the state is a function of the log's batches (producer id, epoch, sequence range,
offsets), so whatever changes the log — an append as leader or follower, a truncation, a restart — must change the
state the same way, or a retry after a failover or restart is appended twice (KIP-98's promise broken).

- Per producer id: the epoch and the last ``NUM_BATCHES_TO_RETAIN`` (5) batches' metadata (last sequence, last
  offset, offset delta, max timestamp), plus the coordinator epoch and the first offset of its ongoing transaction
  (KIP-98): the first transactional batch sets it, a transaction marker (control batch, COMMIT or ABORT) clears it
  and completes the transaction (ProducerAppendInfo.appendEndTxnMarker). Only a transaction that wrote here
  completes: a marker for a producer with no open transaction here (a partition that was added but got no data, or a
  retried marker) changes the epoch only. Completed transactions whose marker the HW
  has not passed yet stay "unreplicated" (they still hold the LSO back), and aborted ones go to the aborted
  transaction index (Kafka's per-segment .txnindex; here one ``transactions.txnindex`` file per log, Kafka's
  AbortedTxn entry format) that read_committed fetches read (UnifiedLog.collectAbortedTransactions).
- ``first_unstable_offset(hw)``: the first offset of the earliest ongoing or unreplicated transaction
  (ProducerStateManager.firstUnstableOffset); the LSO is min(that, HW).
- Client appends are validated (``check_client_batch``): a duplicate of a retained batch returns that batch's
  metadata (the caller answers its original offsets); an older epoch is INVALID_PRODUCER_EPOCH; a new epoch must
  start at sequence 0; otherwise the sequence must follow the last one (wrapping at 2^31-1). A producer with no state
  (never seen, or expired) may start at any sequence, as in Kafka — except a transactional batch the leader has just
  verified for transaction version 2 (``start_verification``, Kafka's VerificationStateEntry with supportsEpochBump),
  which must start at 0 when the producer has no batch here (OUT_OF_ORDER_SEQUENCE_NUMBER), and one verified
  with a lower sequence (TV1: the lowest sequence the verification saw). A non-transactional batch from a producer
  whose transaction is open here is INVALID_TXN_STATE (ProducerAppendInfo.appendDataBatch): it would otherwise sit
  inside the transaction and the LSO could never pass it as Kafka's consumers expect.
- Markers a coordinator asks to write (``check_marker``, ProducerAppendInfo.checkProducerEpoch with the marker's
  transaction version, KIP-1228/KAFKA-19999): transaction version 0/1, an epoch below the producer's is
  INVALID_PRODUCER_EPOCH; transaction version 2 (the coordinator bumped the epoch for the marker), the epoch must be
  above the producer's, or equal with no transaction open here (an idempotent retry of the marker just written), so a
  delayed or duplicated marker never completes the producer's next transaction. Then checkCoordinatorEpoch: a
  coordinator epoch below the one of the producer's last marker here is TRANSACTION_COORDINATOR_FENCED (each marker
  records its coordinator epoch in the producer's entry, and snapshots keep it).
- Every appended batch, leader or follower, updates the state without validation (``on_append``, Kafka's
  REPLICATION origin), and the map end offset follows the log end.
- Snapshots: Kafka's file format (``<offset, 20 digits>.snapshot``: version 1, CRC32C, one entry per producer with
  only its last batch's metadata, as Kafka writes them). Taken at segment roll (at the new segment's base), at the
  end of every rebuild and on clean close. A corrupt snapshot is deleted and the next older one tried.
- ``rebuild`` (truncation, load): drop snapshots above the new end, reload the latest remaining one and replay the
  batches from there to the end; without a snapshot, from the log start. Kafka skips the replay after a clean
  shutdown without snapshots (an upgrade shortcut); here the log is always replayed then.
- Producers idle for ``producer.id.expiration.ms`` (by their batches' max timestamp, as Kafka) are dropped by a
  periodic check and when a snapshot is loaded; replayed batches are not filtered, as in Kafka.

Threading rule: used only from the owning log, on the broker's event loop.
"""
from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
from kafka import errors as E

from . import batch as B

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1                      # the last producer epoch (Short.MAX_VALUE)
TV2 = 2                                    # transaction version 2 (KIP-890 part 2): markers carry a bumped epoch
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")              # version, crc, entry count (ProducerSnapshot v1, not flexible)
_ENTRY = struct.Struct(">qhiqiqiq")        # id, epoch, last seq, last offset, offset delta, timestamp, coord epoch,
                                           # current txn first offset
_CRC_FROM = 6                              # the CRC covers everything after version and crc
TXN_INDEX = "transactions.txnindex"
_ABORTED = struct.Struct(">hqqqq")         # AbortedTxn: version 0, producer id, first offset, last offset, LSO


def increment_sequence(seq: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: sequences wrap from 2^31-1 to 0."""
    return increment - (INT32_MAX - seq) - 1 if seq > INT32_MAX - increment else seq + increment


def decrement_sequence(seq: int, decrement: int) -> int:
    return seq - decrement + INT32_MAX + 1 if seq < decrement else seq - decrement


def last_sequence(h: B.BatchHeader) -> int:
    return NO_SEQUENCE if h.base_sequence == NO_SEQUENCE else increment_sequence(h.base_sequence, h.last_offset_delta)


class BatchMetadata(NamedTuple):
    """One appended batch of a producer (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """Kafka's ProducerStateEntry: epoch and the last five batches, oldest first; transaction fields for later."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None     # the ongoing transaction's first offset (transactions: later)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int, window: int) -> BatchMetadata | None:
        """The retained batch with exactly this sequence range in this epoch (findDuplicateBatch); ``window``
        below 5 only under the produce.duplicate_window_one fault switch."""
        if epoch != self.epoch:
            return None
        recent = list(self.batches)[-window:] if window > 0 else []
        return next((b for b in recent if b.first_seq == first_seq and b.last_seq == last_seq), None)

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        if epoch != self.epoch:              # maybeUpdateProducerEpoch: a new epoch forgets the old batches
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp


@dataclass(frozen=True)
class ProducerStateConfig:
    """Kafka's ProducerStateManagerConfig, plus the test-only switch that skips loading on open."""

    producer_id_expiration_ms: int = 86_400_000      # producer.id.expiration.ms
    load_on_open: bool = True                        # False only under produce.producer_state_not_loaded

    @classmethod
    def from_broker_config(cls, cfg: Mapping[str, Any] | Any, **kw: Any) -> ProducerStateConfig:
        try:
            return cls(producer_id_expiration_ms=int(cfg["producer.id.expiration.ms"]), **kw)
        except KeyError:
            return cls(**kw)


class ProducerStateError(Exception):
    """A client batch the producer state refuses; ``errno`` is the Kafka error code to answer."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno


class CorruptSnapshot(ValueError):
    """A snapshot file that does not parse or whose CRC32C does not match."""


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's ProducerSnapshot v1: only each producer's last batch is kept (ProducerStateManager.writeSnapshot)."""
    body = bytearray()
    n = 0
    for e in entries:
        last = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq if last else NO_SEQUENCE,
                            last.last_offset if last else -1, last.offset_delta if last else 0, e.last_timestamp,
                            e.coordinator_epoch, -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
        n += 1
    rest = struct.pack(">i", n) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(rest)) + rest


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes, shorter than the header")
    version, crc, count = _HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if crc32c.crc32c(data[_CRC_FROM:]) != crc:
        raise CorruptSnapshot("CRC32C mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshot(f"{count} entries do not fill {len(data)} bytes")
    out = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn in _ENTRY.iter_unpack(data[_HEAD.size:]):
        e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord, last_timestamp=ts,
                               current_txn_first_offset=None if txn < 0 else txn)
        if last_offset >= 0:
            e.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        out.append(e)
    return out


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class AbortedTxn(NamedTuple):
    """One aborted transaction of this log (Kafka's AbortedTxn): its first offset and its ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int          # the marker's offset
    aborted: bool


# (segment base offset, the headers of that segment's batches in the replayed range), ascending
SegmentHeaders = Iterable[tuple[int, Iterator[B.BatchHeader]]]


class ProducerStateManager:
    """The producers of one partition log; snapshots in ``directory`` (None: memory log, no snapshots)."""

    def __init__(self, directory: Path | None, config: ProducerStateConfig, wall_ms: Callable[[], int]) -> None:
        self.dir = directory
        self.config = config
        self._wall_ms = wall_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0          # the state reflects the log below this offset (lastMapOffset)
        self.last_snap_offset = 0
        self.last_rebuild_replayed = 0   # batches the last rebuild replayed (observability: restarts read the tail)
        self._snapshots: dict[int, Path] = self._scan()
        self.ongoing: dict[int, int] = {}             # producer id -> first offset of its ongoing transaction
        self.unreplicated: list[CompletedTxn] = []    # completed, marker not yet below the HW (marker order)
        self.aborted: list[AbortedTxn] = self._read_txn_index()   # ascending by marker offset
        self.skip_markers = False        # True only while a follower appends under txn.markers_leader_only
        # producer id -> (lowest sequence verified, transaction version 2) while the leader verifies a transactional
        # batch with the coordinator and until it is appended (Kafka's VerificationStateEntry)
        self.verifying: dict[int, tuple[int, bool]] = {}
        self.fault_index_every_abort = False     # txn.abort_index_every_marker fault switch
        self.fault_plain_in_open_txn = False     # txn.plain_batch_in_open_txn fault switch
        self.fault_tv2_any_first_seq = False     # txn.tv2_any_first_sequence fault switch
        self.fault_coordinator_epoch_unchecked = False   # txn.coordinator_epoch_unchecked fault switch

    # -- the aborted transaction index ---------------------------------------------------------------------------

    def _read_txn_index(self) -> list[AbortedTxn]:
        if self.dir is None:
            return []
        try:
            data = (self.dir / TXN_INDEX).read_bytes()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % _ABORTED.size       # a torn last entry is dropped (rewritten by replay)
        return [AbortedTxn(*e[1:]) for e in _ABORTED.iter_unpack(data[:whole])]

    def _write_txn_index(self, entries: list[AbortedTxn], append: bool) -> None:
        if self.dir is None:
            return
        data = b"".join(_ABORTED.pack(0, *e) for e in entries)
        path = self.dir / TXN_INDEX
        if append:
            with open(path, "ab") as f:
                f.write(data)
            return
        tmp = path.with_name(TXN_INDEX + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def _truncate_txn_index(self, offset: int) -> None:
        """Forget aborted transactions whose marker is at or after ``offset`` (a replay re-adds them)."""
        kept = [a for a in self.aborted if a.last_offset < offset]
        if len(kept) != len(self.aborted):
            self.aborted = kept
            self._write_txn_index(kept, append=False)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap [start, upper) (UnifiedLog.collectAbortedTransactions): what a
        read_committed consumer needs to drop the aborted records of the batches it fetched."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < upper]

    def first_unstable_offset(self, hw: int) -> int | None:
        """The first offset of the earliest transaction still open, or completed with its marker not yet below
        ``hw`` (firstUnstableOffset after onHighWatermarkUpdated); None when there is none."""
        if self.unreplicated and self.unreplicated[0].last_offset < hw:
            self.unreplicated = [c for c in self.unreplicated if c.last_offset >= hw]
        firsts = list(self.ongoing.values()) + [c.first_offset for c in self.unreplicated]
        return min(firsts) if firsts else None

    def _set_producers(self, producers: dict[int, ProducerStateEntry]) -> None:
        self.producers = producers
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                        if e.current_txn_first_offset is not None}
        self.unreplicated = []

    # -- snapshots on disk --------------------------------------------------------------------------------------

    def _scan(self) -> dict[int, Path]:
        if self.dir is None:
            return {}
        out = {}
        for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = p.name[:-len(SNAPSHOT_SUFFIX)]
            if stem.isdigit() and p.is_file():
                out[int(stem)] = p
        return dict(sorted(out.items()))

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def delete_snapshot(self, offset: int) -> None:
        p = self._snapshots.pop(offset, None)
        if p is not None:
            p.unlink(missing_ok=True)

    def remove_stray_snapshots(self, segment_bases: Iterable[int]) -> None:
        """On load: keep snapshots at segment bases, and the largest other one only if it is above every segment
        base (the one written at clean shutdown) (ProducerStateManager.removeStraySnapshots)."""
        bases = set(segment_bases)
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] >= max(bases)) else None
        for o in strays:
            if o != keep:
                self.delete_snapshot(o)

    def take_snapshot(self) -> None:
        """Write the state at the map end offset unless a snapshot is already there (takeSnapshot)."""
        if self.dir is None or self.map_end_offset <= self.last_snap_offset:
            return
        path = self.dir / snapshot_name(self.map_end_offset)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = encode_snapshot(self.producers.values())
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._snapshots[self.map_end_offset] = path
        self.last_snap_offset = self.map_end_offset
        log.debug("%s: producer snapshot at %d with %d producers", self.dir, self.map_end_offset, len(self.producers))

    def _load_from_snapshot(self, log_start: int) -> None:
        """Load the latest snapshot, deleting corrupt ones on the way; none: start empty at the log start."""
        now = self._wall_ms()
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = decode_snapshot(self._snapshots[offset].read_bytes())
            except (OSError, CorruptSnapshot) as e:
                log.warning("%s: producer snapshot %d unusable (%s); deleting it", self.dir, offset, e)
                self.delete_snapshot(offset)
                continue
            self._set_producers({e.producer_id: e for e in entries if not self._expired(e, now)})
            self.last_snap_offset = self.map_end_offset = offset
            log.info("%s: producer state loaded from snapshot at %d (%d producers)", self.dir, offset,
                     len(self.producers))
            return
        self.last_snap_offset = self.map_end_offset = log_start

    # -- state ----------------------------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check_client_batch(self, h: B.BatchHeader, window: int = NUM_BATCHES_TO_RETAIN) -> BatchMetadata | None:
        """A client's batch before it is appended: the retained batch it duplicates, or None to append it; raises
        ProducerStateError (UnifiedLog.analyzeAndValidateProducerState, ProducerAppendInfo.checkProducerEpoch /
        checkSequence with origin CLIENT)."""
        entry = self.producers.get(h.producer_id)
        first_seq, last_seq = h.base_sequence, last_sequence(h)
        if entry is None:
            self._check_verified_sequence(h, None)
            return None                      # unknown producer: any sequence (currentEntry epoch NO_PRODUCER_EPOCH)
        dup = entry.find_duplicate(h.producer_epoch, first_seq, last_seq, window)
        if dup is not None:
            return dup
        self._check_sequence(h, entry, first_seq)
        if (entry.current_txn_first_offset is not None and not h.is_transactional
                and not self.fault_plain_in_open_txn):
            raise ProducerStateError(E.InvalidTxnStateError.errno,
                                     f"expected a transactional write from producer {h.producer_id}: its "
                                     f"transaction is open here since offset {entry.current_txn_first_offset}")
        return None

    def _check_verified_sequence(self, h: B.BatchHeader, entry: ProducerStateEntry | None) -> None:
        """ProducerAppendInfo.checkSequence's verification cases: a batch verified for transaction version 2 must
        start at sequence 0 where the producer has no batch; one verified earlier at a lower sequence must not
        start above it."""
        verified = self.verifying.get(h.producer_id)
        if verified is None or not h.is_transactional:
            return
        lowest, tv2 = verified
        if (tv2 and h.base_sequence != 0 and (entry is None or not entry.batches)
                and not self.fault_tv2_any_first_seq):
            raise ProducerStateError(E.OutOfOrderSequenceNumberError.errno,
                                     f"transaction version 2 producer {h.producer_id} has no batch here: its first "
                                     f"sequence must be 0, got {h.base_sequence}")
        if h.base_sequence > lowest:
            raise ProducerStateError(E.OutOfOrderSequenceNumberError.errno,
                                     f"out of order sequence for producer {h.producer_id}: {h.base_sequence} "
                                     f"(incoming), {lowest} (earliest seen sequence)")

    def start_verification(self, producer_id: int, base_sequence: int, tv2: bool) -> None:
        """The leader asks the coordinator about this producer's first transactional batch here
        (ProducerStateManager.maybeCreateVerificationStateEntry): remember the lowest sequence asked about."""
        lowest, _ = self.verifying.get(producer_id, (base_sequence, tv2))
        self.verifying[producer_id] = (min(lowest, base_sequence), tv2)

    def _check_sequence(self, h: B.BatchHeader, entry: ProducerStateEntry, first_seq: int) -> None:
        """checkProducerEpoch, then checkSequence (its verification cases first), as ProducerAppendInfo orders
        them."""
        if h.producer_epoch < entry.epoch:
            raise ProducerStateError(E.InvalidProducerEpochError.errno,
                                     f"epoch {h.producer_epoch} of producer {h.producer_id} is older than the "
                                     f"last seen epoch {entry.epoch}")
        self._check_verified_sequence(h, entry)
        if h.producer_epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(E.OutOfOrderSequenceNumberError.errno,
                                         f"a new epoch {h.producer_epoch} of producer {h.producer_id} must start at "
                                         f"sequence 0, got {first_seq}")
        elif not (first_seq == entry.last_seq + 1 or (first_seq == 0 and entry.last_seq == INT32_MAX)):
            raise ProducerStateError(E.OutOfOrderSequenceNumberError.errno,
                                     f"out of order sequence for producer {h.producer_id}: {first_seq} (incoming), "
                                     f"{entry.last_seq} (current end)")

    def on_append(self, h: B.BatchHeader) -> None:
        """A batch was appended (leader, follower or replay): record it, unvalidated (REPLICATION origin)."""
        if h.producer_id >= 0 and not h.is_control:
            entry = self.producers.get(h.producer_id)
            if entry is None:
                entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
            entry.add_batch(h.producer_epoch, last_sequence(h), h.last_offset, h.last_offset_delta, h.max_timestamp)
            if h.is_transactional and entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = h.base_offset
                self.ongoing[h.producer_id] = h.base_offset
            if h.is_transactional:
                self.verifying.pop(h.producer_id, None)     # the transaction started: verification done
        elif h.producer_id >= 0 and not self.skip_markers:
            self._end_txn(h)
        self.map_end_offset = h.next_offset

    def _end_txn(self, h: B.BatchHeader) -> None:
        """A transaction marker (ProducerAppendInfo.appendEndTxnMarker): the producer takes the marker's epoch; its
        ongoing transaction here, if any, completes, and an aborted one goes to the aborted index with the LSO it
        leaves (the earliest other ongoing transaction, else the offset after the marker). A marker with no
        transaction open here completes nothing (Kafka emits no CompletedTxn for it): it is neither in the index nor
        holding the LSO."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
        if h.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = h.producer_epoch
        entry.last_timestamp = h.max_timestamp
        if h.coordinator_epoch >= 0:         # ProducerStateEntry.update: the marker's coordinator epoch
            entry.coordinator_epoch = h.coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        self.ongoing.pop(h.producer_id, None)
        self.verifying.pop(h.producer_id, None)
        aborted = h.control_type == B.ABORT
        if first is None:
            if not (aborted and self.fault_index_every_abort):
                return
            first = h.base_offset              # the old behaviour, under the fault switch only
        self.unreplicated.append(CompletedTxn(h.producer_id, first, h.base_offset, aborted))
        if aborted:
            lso = min(self.ongoing.values(), default=h.base_offset + 1)
            a = AbortedTxn(h.producer_id, first, h.base_offset, lso)
            self.aborted.append(a)
            self._write_txn_index([a], append=True)

    def check_marker(self, producer_id: int, producer_epoch: int, transaction_version: int = 0,
                     coordinator_epoch: int | None = None) -> int:
        """A marker the coordinator asks to write (or a coordinator's transactional offset commit, version 0, no
        coordinator epoch): the error to answer, or 0 (ProducerAppendInfo.checkProducerEpoch, then
        checkCoordinatorEpoch, origin COORDINATOR). Transaction version 0/1: an epoch below the producer's is
        INVALID_PRODUCER_EPOCH. Version 2 (KIP-1228): the marker's epoch must be above the producer's; an equal one
        only when no transaction is open here (a retry of the marker just written) or at the last epoch, else a
        delayed marker of the previous transaction would complete the current one. A coordinator epoch below the
        one of the producer's last marker here is TRANSACTION_COORDINATOR_FENCED (a zombie coordinator)."""
        entry = self.producers.get(producer_id)
        current = NO_PRODUCER_EPOCH if entry is None else entry.epoch
        if transaction_version < TV2:
            bad_epoch = producer_epoch < current
        else:
            bad_epoch = producer_epoch < current or (
                producer_epoch == current and entry is not None and entry.current_txn_first_offset is not None
                and producer_epoch != INT16_MAX)
        if bad_epoch:
            return E.InvalidProducerEpochError.errno
        if (coordinator_epoch is not None and entry is not None and entry.coordinator_epoch > coordinator_epoch
                and not self.fault_coordinator_epoch_unchecked):
            return E.TransactionCoordinatorFencedError.errno
        return 0

    def ongoing_first_offset(self, producer_id: int) -> int | None:
        """Where the producer's ongoing transaction started in this log (None: none open here)."""
        return self.ongoing.get(producer_id)

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def _expired(self, e: ProducerStateEntry, now_ms: int) -> bool:
        return (e.current_txn_first_offset is None
                and now_ms - e.last_timestamp >= self.config.producer_id_expiration_ms)

    def remove_expired(self, now_ms: int | None = None) -> list[int]:
        """Drop producers idle for producer.id.expiration.ms (removeExpiredProducers); returns their ids."""
        now = self._wall_ms() if now_ms is None else now_ms
        gone = [pid for pid, e in self.producers.items() if self._expired(e, now)]
        for pid in gone:
            del self.producers[pid]
        return gone

    # -- truncation and loading -------------------------------------------------------------------------------

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, snapshots included; the state starts at ``offset`` (truncateFullyAndStartAt)."""
        self._set_producers({})
        for o in list(self._snapshots):
            self.delete_snapshot(o)
        self._truncate_txn_index(-1)
        self.last_snap_offset = 0
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start: int) -> None:
        """DeleteRecords or segment deletion moved the log start: producers stay (as in Kafka), offsets move."""
        self.map_end_offset = max(self.map_end_offset, log_start)
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = latest if latest is not None else log_start

    def truncate_and_reload(self, log_start: int, log_end: int) -> None:
        """Drop snapshots outside (log_start, log_end]; unless the state already ends at ``log_end``, reload the
        latest remaining snapshot (truncateAndReload)."""
        for o in list(self._snapshots):
            if o > log_end or o <= log_start:
                self.delete_snapshot(o)
        if log_end != self.map_end_offset:
            self._set_producers({})
            self._load_from_snapshot(log_start)
        else:
            self.on_log_start_offset_incremented(log_start)
        self._truncate_txn_index(self.map_end_offset)     # aborted transactions after it come back by replay

    def rebuild(self, log_start: int, last_offset: int, segments: Callable[[int, int], SegmentHeaders],
                snapshot_bases: Iterable[int] = ()) -> int:
        """UnifiedLog.rebuildProducerState: the state of the log below ``last_offset``, from the latest snapshot at
        or below it and the batches after it. ``segments(start, end)`` gives each segment's headers in [start,
        end); a snapshot is taken at each of ``snapshot_bases`` passed (Kafka: the last two segment bases) and at
        ``last_offset``. Returns the number of batches replayed."""
        wanted = set(snapshot_bases)
        empty_before = self.is_empty() and self.map_end_offset >= last_offset
        self.truncate_and_reload(log_start, last_offset)
        replayed = 0
        if last_offset > self.map_end_offset and not empty_before:
            for base, headers in segments(max(self.map_end_offset, log_start), last_offset):
                self.update_map_end_offset(max(base, self.map_end_offset, log_start))
                if base in wanted:
                    self.take_snapshot()
                for h in headers:
                    self.on_append(h)
                    replayed += 1
        self.update_map_end_offset(last_offset)
        self.take_snapshot()
        self.last_rebuild_replayed = replayed
        if replayed:
            log.info("%s: producer state rebuilt to %d: %d batches replayed", self.dir or "memory log", last_offset,
                     replayed)
        return replayed
