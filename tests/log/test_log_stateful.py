"""Hypothesis state machine: FileLog (tiny segments, small index interval, fd budget 2) must answer exactly as
MemoryLog through random appends, follower appends, reads, deletes, truncations, restarts, crashes and torn tails
— and keep the same idempotent producer state (each producer's epoch and last batch; a snapshot keeps only the
last batch, as Kafka's do, so after a reload the file log may remember fewer of the older ones)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from log_batches import make_batch

from reference_broker.log import batch as B
from reference_broker.log.file import RECOVERY_POINT_CHECKPOINT, FileLog, FileLogConfig
from reference_broker.log.memory import MemoryLog
from reference_broker.log.producer_state import ProducerStateConfig

CFG = FileLogConfig(segment_bytes=600, index_interval_bytes=150, max_open_segments=2)
PRODUCERS = ProducerStateConfig(producer_id_expiration_ms=1 << 62)   # batch timestamps are tiny: never expire
timestamps = st.lists(st.integers(0, 5_000), min_size=1, max_size=5)


class FileLogMatchesMemoryLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # tmpfs when there is one: fsync is real code here but not what this test measures, and it is slow
        self.tmp = Path(tempfile.mkdtemp(prefix="filelog-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        self.dir = self.tmp / "t-0"
        self.file = FileLog(self.dir, CFG, producer_state=PRODUCERS)
        self.model = MemoryLog(producer_state=PRODUCERS)
        self.epoch = 0
        self.tag = 0
        self.sequences: dict[int, tuple[int, int]] = {}     # producer id -> (producer epoch, next sequence)

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _batch(self, ts: list[int]) -> bytes:
        self.tag += 1
        return make_batch(len(ts), timestamps=ts, tag=self.tag)

    # -- writes -------------------------------------------------------------------------------------------------

    @rule(ts=timestamps, bump=st.booleans(), append_time=st.none() | st.integers(0, 6_000))
    def append(self, ts: list[int], bump: bool, append_time: int | None) -> None:
        self.epoch += bump
        b = self._batch(ts)
        assert self.file.append(b, self.epoch, append_time) == self.model.append(b, self.epoch, append_time)

    @rule(pid=st.integers(0, 2), n=st.integers(1, 3), new_epoch=st.booleans(), replica=st.booleans())
    def append_idempotent(self, pid: int, n: int, new_epoch: bool, replica: bool) -> None:
        pepoch, seq = self.sequences.get(pid, (0, 0))
        if new_epoch:
            pepoch, seq = pepoch + 1, 0
        self.tag += 1
        b = bytearray(make_batch(n, tag=self.tag, producer_id=pid, producer_epoch=pepoch, base_sequence=seq))
        self.sequences[pid] = (pepoch, seq + n)
        if replica:
            B.stamp(b, 0, self.model.log_end_offset, self.epoch)
            assert self.file.append_replica(bytes(b)) == self.model.append_replica(bytes(b))
        else:
            assert self.file.append(bytes(b), self.epoch) == self.model.append(bytes(b), self.epoch)

    @rule()
    def crash_and_restart(self) -> None:
        """kill -9: no close, so no snapshot at the end; the reopen replays from the last roll snapshot."""
        self.file._release()
        self.file = FileLog(self.dir, CFG, producer_state=PRODUCERS)
        self._reopened()

    @rule(specs=st.lists(st.tuples(st.integers(0, 3), timestamps, st.booleans()), min_size=1, max_size=3))
    def append_replica(self, specs: list[tuple[int, list[int], bool]]) -> None:
        data = bytearray()
        nxt = self.model.log_end_offset
        for gap, ts, bump in specs:
            self.epoch += bump
            b = bytearray(self._batch(ts))
            B.stamp(b, 0, nxt + gap, self.epoch)
            nxt += gap + len(ts)
            data += b
        assert self.file.append_replica(bytes(data)) == self.model.append_replica(bytes(data))

    @rule(data=st.data())
    def delete_records_before(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(0, self.model.log_end_offset + 2))
        self.file.delete_records_before(off)
        self.model.delete_records_before(off)

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(0, self.model.log_end_offset))
        self.file.truncate_to(off)
        self.model.truncate_to(off)

    def _reopened(self) -> None:
        """What a restart does to the model: Kafka's LogLoader truncates the epoch cache from the LEO."""
        self.model.truncate_to(self.model.log_end_offset)

    @rule(gap=st.integers(0, 30))
    def truncate_fully_and_start_at(self, gap: int) -> None:
        off = self.model.log_end_offset + gap
        self.file.truncate_fully_and_start_at(off)
        self.model.truncate_fully_and_start_at(off)

    @rule()
    def restart(self) -> None:
        self.file.close()
        self.file = FileLog(self.dir, CFG, producer_state=PRODUCERS)
        self._reopened()

    @rule(data=st.data(), damage=st.sampled_from(["delete", "truncate", "garbage", "forget-recovery-point"]))
    def damage_indexes_and_restart(self, data: st.DataObject, damage: str) -> None:
        """Indexes are derived data and the recovery point only says how much to re-check: losing either
        changes nothing a client sees."""
        self.file.close()
        if damage == "forget-recovery-point":
            (self.dir / RECOVERY_POINT_CHECKPOINT).unlink()
        else:
            base = data.draw(st.sampled_from(self.file.segment_bases()), label="segment")
            for suffix in (".index", ".timeindex"):
                p = self.dir / f"{base:020d}{suffix}"
                if damage == "delete":
                    p.unlink()
                elif damage == "truncate":
                    os.truncate(p, max(0, p.stat().st_size - 3))
                else:
                    p.write_bytes(b"\xee" * (p.stat().st_size or 12))
        self.file = FileLog(self.dir, CFG, producer_state=PRODUCERS)
        self._reopened()

    @precondition(lambda self: self.model.log_end_offset > self.model.log_start_offset)
    @rule(data=st.data())
    def tear_last_batch_and_restart(self, data: st.DataObject) -> None:
        """A crash tore or corrupted the last write: it must vanish on reopen, and nothing else."""
        last = self.dir / f"{self.file.segment_bases()[-1]:020d}.log"
        raw = bytearray(last.read_bytes())
        batches = list(B.iter_batches(raw))
        if not batches:
            return
        pos, h = batches[-1]
        # the LEO falls to the end of the batch before, or to the segment's base when it was the segment's first
        expected_end = batches[-2][1].next_offset if len(batches) > 1 else int(last.name[:20])
        if expected_end < self.model.log_start_offset:
            return
        self.file.close()
        if data.draw(st.booleans(), label="flip a byte (else cut the file)"):
            at = data.draw(st.integers(pos + B.CRC, pos + h.size - 1), label="byte")
            raw[at] ^= 0x10
            last.write_bytes(raw)
        else:
            last.write_bytes(raw[:data.draw(st.integers(pos, pos + h.size - 1), label="cut at")])
        self.file = FileLog(self.dir, CFG, producer_state=PRODUCERS)
        self.model.truncate_to(expected_end)

    # -- reads --------------------------------------------------------------------------------------------------

    @precondition(lambda self: self.model.log_end_offset > self.model.log_start_offset)
    @rule(data=st.data(), max_bytes=st.integers(1, 2_500), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        lo, hi = self.model.log_start_offset, self.model.log_end_offset
        off = data.draw(st.integers(lo, hi))
        max_offset = data.draw(st.integers(off, hi + 1))
        assert self.file.read(off, max_bytes, max_offset, min_one) == \
            self.model.read(off, max_bytes, max_offset, min_one)

    @rule(data=st.data())
    def bytes_between(self, data: st.DataObject) -> None:
        lo, hi = self.model.log_start_offset, self.model.log_end_offset
        a = data.draw(st.integers(lo, hi))
        b = data.draw(st.integers(lo, hi + 1))
        assert self.file.bytes_between(a, b) == self.model.bytes_between(a, b)

    @rule(ts=st.integers(-1, 6_100))
    def offset_for_timestamp(self, ts: int) -> None:
        assert self.file.offset_for_timestamp(ts) == self.model.offset_for_timestamp(ts)

    @invariant()
    def same_state(self) -> None:
        f, m = self.file, self.model
        assert (f.log_start_offset, f.log_end_offset) == (m.log_start_offset, m.log_end_offset)
        assert f.epoch_entries() == m.epoch_entries()
        assert f.max_timestamp() == m.max_timestamp()
        whole = (m.log_start_offset, 1 << 30, m.log_end_offset)
        assert f.read(*whole) == m.read(*whole)

    @invariant()
    def same_producers(self) -> None:
        """Producers with a batch at or after the log start: same epoch and last batch, and every batch the file
        log remembers there the model remembers too (in order). Below the log start either may have forgotten."""
        start = self.model.log_start_offset

        def live(lg) -> dict[int, tuple[int, list]]:
            return {pid: (e.epoch, [b for b in e.batches if b.last_offset >= start])
                    for pid, e in lg.producer_state.producers.items()
                    if e.batches and e.batches[-1].last_offset >= start}
        f, m = live(self.file), live(self.model)
        assert {p: (e, b[-1]) for p, (e, b) in f.items()} == {p: (e, b[-1]) for p, (e, b) in m.items()}
        for p, (_e, bs) in f.items():
            assert bs == m[p][1][len(m[p][1]) - len(bs):], (p, bs, m[p][1])
        assert self.file.producer_state.map_end_offset == self.model.producer_state.map_end_offset == \
            self.model.log_end_offset


FileLogMatchesMemoryLog.TestCase.settings = settings(
    max_examples=int(os.environ.get("LOG_STATEFUL_EXAMPLES", "100")), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestFileLogMatchesMemoryLog = FileLogMatchesMemoryLog.TestCase
