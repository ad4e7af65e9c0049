"""FileLog-only behaviour: restarts, crash recovery, segments, indexes, checkpoints, unusable directories."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from log_batches import decode, make_batch

from reference_broker.clock import ManualClock
from reference_broker.log import batch as B
from reference_broker.log.base import EpochEntry, TimestampOffset
from reference_broker.log.file import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    FileLog,
    FileLogConfig,
    LogClosed,
    LogDirError,
    RecordBatchTooLarge,
)

REPO = Path(__file__).resolve().parents[2]
SMALL = FileLogConfig(segment_bytes=1_000, index_interval_bytes=100)


def seg_file(d: Path, base: int, suffix: str = ".log") -> Path:
    return d / f"{base:020d}{suffix}"


def fill(log: FileLog, n_batches: int, records: int = 3, epoch_every: int = 10) -> None:
    for i in range(n_batches):
        log.append(make_batch(records, timestamp=1_000 + 10 * i, tag=i), i // epoch_every)


def snapshot(log: FileLog) -> tuple:
    """Everything a client can observe about the log."""
    return (log.log_start_offset, log.log_end_offset,
            log.read(log.log_start_offset, 1 << 30, log.log_end_offset).data,
            log.epoch_entries(), log.max_timestamp(),
            [log.offset_for_timestamp(t) for t in (0, 1_005, 1_234, 1_500, 99_999)])


@pytest.fixture
def d(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# -- restart ----------------------------------------------------------------------------------------------------

def test_restart_recovers_everything(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 60)
    log.delete_records_before(40)
    log.truncate_to(150)
    before = snapshot(log)
    bases = log.segment_bases()
    log.close()
    log = FileLog(d, SMALL)
    assert snapshot(log) == before
    assert log.segment_bases() == bases
    assert log.log_start_offset == 40 and log.log_end_offset == 150
    assert log.append(make_batch(1), 9).base_offset == 150
    log.close()
    with pytest.raises(LogClosed):
        log.read(0, 10, 10)


def test_kill_9_loses_nothing_that_append_returned(d: Path) -> None:
    """A process crash (not an OS crash) keeps every write the kernel took: reopen serves all of it."""
    child = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(REPO)!r}, {str(Path(__file__).parent)!r}]
        from log_batches import make_batch
        from reference_broker.log.file import FileLog, FileLogConfig
        log = FileLog({str(d)!r}, FileLogConfig(segment_bytes=5_000))
        for i in range(200):
            log.append(make_batch(2, timestamp=i, tag=i), i // 50)
        print(log.log_end_offset, flush=True)
        sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "400"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    log = FileLog(d)
    assert log.log_end_offset == 400
    assert [r[0] for r in decode(log.read(0, 1 << 30, 400).data)] == list(range(400))
    assert log.epoch_entries() == [EpochEntry(e, 100 * e) for e in range(4)]
    log.close()


# -- torn and corrupt tails -------------------------------------------------------------------------------------

def batch_positions(path: Path) -> list[tuple[int, B.BatchHeader]]:
    return list(B.iter_batches(path.read_bytes()))


@pytest.mark.parametrize("cut", [1, 30, 61, 70, -1])
def test_torn_last_batch_is_dropped_on_reopen(d: Path, cut: int) -> None:
    log = FileLog(d, SMALL)
    fill(log, 12)
    log.append(make_batch(5, timestamp=7_777), 3)        # the batch that will be torn, in a new epoch
    last_base = log.segment_bases()[-1]
    log.close()
    path = seg_file(d, last_base)
    pos, h = batch_positions(path)[-1]
    os.truncate(path, pos + (cut if cut > 0 else h.size - 1))
    log = FileLog(d, SMALL)
    assert log.log_end_offset == 36
    assert [r[0] for r in decode(log.read(0, 1 << 30, 36).data)] == list(range(36))
    assert EpochEntry(3, 36) not in log.epoch_entries()
    assert log.offset_for_timestamp(7_777) is None
    assert path.stat().st_size == pos                 # the torn bytes are gone from disk, not just hidden
    assert log.append(make_batch(1), 4).base_offset == 36
    log.close()


@pytest.mark.parametrize("where", ["records", "crc", "magic", "length"])
def test_corrupt_last_batch_is_dropped_and_nothing_before_it(d: Path, where: str) -> None:
    log = FileLog(d, SMALL)
    fill(log, 14)
    before = log.read(0, 1 << 30, 39).data
    base = log.segment_bases()[-1]
    log.close()
    path = seg_file(d, base)
    pos, h = batch_positions(path)[-1]
    assert h.base_offset == 39
    raw = bytearray(path.read_bytes())
    at = {"records": pos + h.size - 2, "crc": pos + B.CRC, "magic": pos + B.MAGIC, "length": pos + B.LENGTH}[where]
    raw[at] ^= 0x40
    path.write_bytes(raw)
    log = FileLog(d, SMALL)
    assert log.log_end_offset == 39
    assert log.read(0, 1 << 30, 39).data == before
    log.close()


def test_corruption_in_middle_of_last_segment_drops_the_rest(d: Path) -> None:
    log = FileLog(d, FileLogConfig(index_interval_bytes=50))
    fill(log, 20)
    log.close()
    path = seg_file(d, 0)
    pos, h = batch_positions(path)[8]
    raw = bytearray(path.read_bytes())
    raw[pos + B.HEADER_SIZE + 3] ^= 0x01
    path.write_bytes(raw)
    log = FileLog(d, FileLogConfig(index_interval_bytes=50))
    assert log.log_end_offset == h.base_offset == 24
    assert [r[0] for r in decode(log.read(0, 1 << 30, 24).data)] == list(range(24))
    # the rebuilt offset index only points inside the surviving bytes
    idx = seg_file(d, 0, ".index").read_bytes()
    assert idx and all(int.from_bytes(idx[i + 4:i + 8], "big") < pos for i in range(0, len(idx), 8))
    log.close()


def test_unflushed_segments_are_validated_and_later_ones_deleted(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30)
    bases = log.segment_bases()
    log.close()
    assert len(bases) >= 4
    victim = bases[1]
    path = seg_file(d, victim)
    pos, h = batch_positions(path)[1]
    raw = bytearray(path.read_bytes())
    raw[pos + h.size - 1] ^= 0x01
    path.write_bytes(raw)
    # As if the last fsync before the crash was long ago: everything from offset 0 is unflushed.
    (d / RECOVERY_POINT_CHECKPOINT).write_text("0\n1\n0\n")
    log = FileLog(d, SMALL)
    assert log.log_end_offset == h.base_offset
    assert log.segment_bases() == bases[:2]
    assert not seg_file(d, bases[2]).exists()
    assert [r[0] for r in decode(log.read(0, 1 << 30, h.base_offset).data)] == list(range(h.base_offset))
    log.close()


def test_flushed_sealed_segments_are_not_rescanned(d: Path) -> None:
    """Below the recovery point a sealed segment is trusted (Kafka does not re-CRC it); its corrupt records
    are served as stored and the consumer's CRC check is what catches them."""
    log = FileLog(d, SMALL)
    fill(log, 30)
    bases = log.segment_bases()
    log.close()
    path = seg_file(d, bases[0])
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(raw)
    log = FileLog(d, SMALL)
    assert log.segment_bases() == bases and log.log_end_offset == 90
    log.close()


# -- segments ---------------------------------------------------------------------------------------------------

def test_segments_roll_at_segment_bytes_and_are_named_by_base_offset(d: Path) -> None:
    cfg = FileLogConfig(segment_bytes=1_000)
    log = FileLog(d, cfg)
    size = len(make_batch(3, tag=1))
    fill(log, 40)
    per_segment = 1_000 // size
    bases = log.segment_bases()
    assert bases == [3 * per_segment * k for k in range(len(bases))]
    for b in bases:
        assert seg_file(d, b, ".index").exists() and seg_file(d, b, ".timeindex").exists()
        data = seg_file(d, b).read_bytes()
        assert 0 < len(data) <= 1_000
        assert B.parse_header(data).base_offset == b
    assert sum(seg_file(d, b).stat().st_size for b in bases) == 40 * size
    with pytest.raises(RecordBatchTooLarge):
        log.append(make_batch(50, value_size=100), 0)
    assert log.log_end_offset == 120
    log.close()


def test_delete_records_deletes_whole_segments_and_persists_start(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30)
    bases = log.segment_bases()
    cut = bases[2] + 1
    log.delete_records_before(cut)
    assert log.segment_bases() == bases[2:]
    assert not seg_file(d, bases[0]).exists() and not seg_file(d, bases[1], ".index").exists()
    log.close()
    assert (d / LOG_START_CHECKPOINT).read_text() == f"0\n1\n{cut}\n"
    log = FileLog(d, SMALL)
    assert log.log_start_offset == cut
    log.close()


def test_crash_between_start_checkpoint_and_segment_delete(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30)
    bases = log.segment_bases()
    log.close()
    (d / LOG_START_CHECKPOINT).write_text(f"0\n1\n{bases[3]}\n")
    log = FileLog(d, SMALL)
    assert log.log_start_offset == bases[3]
    assert log.segment_bases() == bases[3:]
    log.close()


def test_log_end_below_checkpointed_start_starts_afresh(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 10)
    log.delete_records_before(30)
    log.close()
    last = max(int(p.name[:20]) for p in d.glob("*.log"))
    os.truncate(seg_file(d, last), 0)                  # lost data the checkpoint had seen
    for p in d.glob("*.log"):
        if int(p.name[:20]) != last:
            p.unlink()
    log = FileLog(d, SMALL)
    assert (log.log_start_offset, log.log_end_offset) == (30, 30)
    assert log.epoch_entries() == []
    log.close()


def test_truncate_into_sealed_segment_reopens_it_for_appends(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30)
    bases = log.segment_bases()
    log.truncate_to(bases[1] + 3)
    assert log.segment_bases() == bases[:2]
    assert log.max_timestamp() == TimestampOffset(bases[1] + 2, 1_000 + 10 * (bases[1] // 3) + 2)
    log.append(make_batch(2, timestamp=5), 0)
    log.close()
    log = FileLog(d, SMALL)
    assert log.log_end_offset == bases[1] + 5
    assert [r[0] for r in decode(log.read(0, 1 << 30, 1 << 30).data)] == list(range(bases[1] + 5))
    log.close()


def test_fd_budget_with_many_segments(d: Path) -> None:
    cfg = FileLogConfig(segment_bytes=300, index_interval_bytes=0, max_open_segments=4)
    log = FileLog(d, cfg)
    fill(log, 200, records=1)
    assert len(log.segment_bases()) > 50
    fds = psutil.Process().num_fds()
    for off in range(0, 200, 7):
        assert decode(log.read(off, 1 << 20, 200).data)[0][0] == off
        assert log.offset_for_timestamp(1_000 + 10 * off) == TimestampOffset(off, 1_000 + 10 * off)
    assert psutil.Process().num_fds() <= fds + 3
    log.close()


# -- indexes ----------------------------------------------------------------------------------------------------

def index_bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".index", ".timeindex")}


def test_sparse_index_follows_kafkas_interval_rule(d: Path) -> None:
    size = len(make_batch(3, tag=1))
    log = FileLog(d, FileLogConfig(index_interval_bytes=4 * size))   # "more than" 4 batches: every 5th
    fill(log, 100)
    log.close()
    idx = seg_file(d, 0, ".index").read_bytes()
    entries = [(int.from_bytes(idx[i:i + 4], "big"), int.from_bytes(idx[i + 4:i + 8], "big"))
               for i in range(0, len(idx), 8)]
    # an entry each time more than the interval went in since the last one, keyed by the batch's last offset
    k = 5
    assert entries == [(3 * j * k + 2, j * k * size) for j in range(1, len(entries) + 1)]
    assert len(entries) == (100 - 1) // k
    tidx = seg_file(d, 0, ".timeindex").read_bytes()
    assert len(tidx) == 12 * len(entries)
    assert int.from_bytes(tidx[-12:-4], "big", signed=True) == 1_000 + 10 * (len(entries) * k) + 2


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage"])
def test_indexes_rebuilt_when_missing_or_corrupt(d: Path, damage: str) -> None:
    log = FileLog(d, SMALL)
    fill(log, 40)
    before = snapshot(log)
    log.close()
    good = index_bytes(d)
    for base in [int(n[:20]) for n in good if n.endswith(".index")]:
        for suffix in (".index", ".timeindex"):
            p = seg_file(d, base, suffix)
            if damage == "delete":
                p.unlink()
            elif damage == "truncate":
                os.truncate(p, max(0, p.stat().st_size - 5))
            else:
                p.write_bytes(b"\x7f" * p.stat().st_size)
    log = FileLog(d, SMALL)
    assert snapshot(log) == before
    log.close()
    assert index_bytes(d) == good


def test_orphan_index_files_are_removed(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 5)
    log.close()
    seg_file(d, 999, ".index").write_bytes(b"")
    seg_file(d, 999, ".timeindex").write_bytes(b"")
    FileLog(d, SMALL).close()
    assert not seg_file(d, 999, ".index").exists()


# -- checkpoints and flush policy -------------------------------------------------------------------------------

def test_leader_epoch_checkpoint_is_kafkas_format_and_rebuilt_if_missing(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30, epoch_every=7)
    entries = log.epoch_entries()
    log.truncate_to(50)
    log.close()
    assert (d / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n1 21\n2 42\n"
    (d / LEADER_EPOCH_CHECKPOINT).unlink()
    log = FileLog(d, SMALL)
    assert log.epoch_entries() == entries[:3]
    log.close()


def test_reopen_drops_an_epoch_entry_at_the_log_end(d: Path) -> None:
    """Kafka's LogLoader truncates the epoch cache from the LEO on load: an epoch this replica led without
    writing (entry at the log end) is gone after a restart, as are entries for data the disk lost."""
    log = FileLog(d, SMALL)
    fill(log, 5)                                        # 0-14 in epoch 0
    log.assign_epoch(3, 15)
    assert log.epoch_entries() == [EpochEntry(0, 0), EpochEntry(3, 15)]
    log.close()
    log = FileLog(d, SMALL)
    assert log.log_end_offset == 15 and log.epoch_entries() == [EpochEntry(0, 0)]
    log.close()


def test_truncate_fully_survives_a_restart(d: Path) -> None:
    log = FileLog(d, SMALL)
    fill(log, 30)
    log.truncate_fully_and_start_at(500)
    assert log.segment_bases() == [500]
    log.close()
    log = FileLog(d, SMALL)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_entries()) == (500, 500, [])
    assert log.append(make_batch(2), 4).base_offset == 500
    log.close()


def test_crash_before_the_batch_covering_the_kept_log_start(d: Path) -> None:
    """truncate_fully_and_start_at(5, log_start=12) and a crash before the append: the log reopens empty at 12."""
    log = FileLog(d, SMALL)
    fill(log, 3)
    log.truncate_fully_and_start_at(5, log_start=12)
    log.close()
    log = FileLog(d, SMALL)
    assert (log.log_start_offset, log.log_end_offset) == (12, 12)
    log.close()


def test_flush_every_n_messages_moves_the_recovery_point(d: Path) -> None:
    log = FileLog(d, FileLogConfig(flush_interval_messages=6))
    log.append(make_batch(3), 0)
    assert log.recovery_point == 0
    log.append(make_batch(3), 0)
    assert log.recovery_point == 6
    log.append(make_batch(3), 0)
    assert log.recovery_point == 6
    log.close()
    every = FileLog(d.with_name("every"), FileLogConfig(flush_interval_messages=1))
    every.append(make_batch(2), 0)
    assert every.recovery_point == 2
    every.close()


def test_flush_interval_ms_uses_the_injected_clock(d: Path) -> None:
    clock = ManualClock()
    log = FileLog(d, FileLogConfig(flush_interval_ms=500), clock=clock)
    log.append(make_batch(1), 0)
    clock.advance(0.4)
    log.append(make_batch(1), 0)
    assert log.recovery_point == 0
    clock.advance(0.1)
    log.append(make_batch(1), 0)
    assert log.recovery_point == 3
    log.append(make_batch(1), 0)
    log.maybe_flush()                     # a timer on an idle partition: not due yet
    assert log.recovery_point == 3
    clock.advance(0.5)
    log.maybe_flush()
    assert log.recovery_point == 4
    log.close()


def test_config_from_kafka_keys() -> None:
    cfg = FileLogConfig.from_broker_config({"log.segment.bytes": "2048", "log.index.interval.bytes": 64,
                                            "log.flush.interval.messages": 1})
    assert (cfg.segment_bytes, cfg.index_interval_bytes, cfg.flush_interval_messages) == (2048, 64, 1)
    assert FileLogConfig.from_broker_config({}).segment_bytes == 1 << 30
    with pytest.raises(ValueError, match="log.segment.bytes"):
        FileLogConfig(segment_bytes=1 << 31)


# -- memory stays flat ------------------------------------------------------------------------------------------

def test_log_data_is_not_held_in_memory(d: Path) -> None:
    log = FileLog(d, FileLogConfig(segment_bytes=16 << 20))
    batch = make_batch(64, value_size=1_000)
    proc = psutil.Process()
    log.append(batch, 0)
    rss0 = proc.memory_info().rss
    for _ in range(96 << 20 // len(batch)):
        log.append(batch, 0)
    off = 0
    while off < log.log_end_offset:
        off = decode(log.read(off, 1 << 20, log.log_end_offset).data[-len(batch):])[-1][0] + 1
    grown = proc.memory_info().rss - rss0
    log.close()
    assert grown < 24 << 20, f"RSS grew {grown >> 20} MB writing and reading 96 MB"


# -- unusable directories ---------------------------------------------------------------------------------------

def test_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "notadir"
    f.write_text("x")
    with pytest.raises(LogDirError, match=f"{f}.*not a directory"):
        FileLog(f)


def test_segment_file_that_is_not_a_log(d: Path) -> None:
    d.mkdir()
    seg_file(d, 0).write_text("this is a text file, not record batches\n" * 5)
    with pytest.raises(LogDirError, match=f"{d}.*00000000000000000000.log is not a Kafka log segment"):
        FileLog(d)
    assert seg_file(d, 0).stat().st_size > 0             # refused, not truncated away


def test_badly_named_segment_file(d: Path) -> None:
    d.mkdir()
    (d / "notes.log").write_text("x")
    with pytest.raises(LogDirError, match=f"{d}.*notes.log is not a log segment file"):
        FileLog(d)


def test_segment_path_that_is_a_directory(d: Path) -> None:
    seg_file(d, 0).mkdir(parents=True)
    with pytest.raises(LogDirError, match="not a regular file"):
        FileLog(d)


def test_malformed_checkpoint(d: Path) -> None:
    FileLog(d).close()
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n1 0\n")
    with pytest.raises(LogDirError, match=f"{d}.*{LEADER_EPOCH_CHECKPOINT} is malformed"):
        FileLog(d)


def test_second_open_of_same_dir_is_refused(d: Path) -> None:
    log = FileLog(d)
    with pytest.raises(LogDirError, match=f"{d}.*already open"):
        FileLog(d)
    log.close()
    FileLog(d).close()


def test_no_permission(tmp_path: Path) -> None:
    d = tmp_path / "locked"
    d.mkdir()
    os.chmod(d, 0o500)
    os.chmod(tmp_path, 0o755)
    if os.geteuid() != 0:
        with pytest.raises(LogDirError, match=f"(?i){d}.*permission"):
            FileLog(d)
        return
    # root ignores modes: try as nobody in a forked child (no exec needed, modules already loaded)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                FileLog(d)
                msg = "opened"
            except Exception as e:
                msg = f"{type(e).__name__}: {e}"
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert msg.startswith("LogDirError") and str(d) in msg and "permission" in msg.lower(), msg


def test_lookups_use_the_indexes_not_a_scan(d: Path) -> None:
    """Counted with the kernel's read-syscall counter: a lookup deep in a 4000-batch segment costs a handful
    of preads (binary search on the index, a short header walk), not one per batch."""
    log = FileLog(d, FileLogConfig(index_interval_bytes=1_000))
    for i in range(4_000):
        log.append(make_batch(2, timestamps=[i, i], tag=i), 0)
    proc = psutil.Process()

    def syscalls(fn) -> int:
        before = proc.io_counters().read_count
        fn()
        return proc.io_counters().read_count - before

    assert syscalls(lambda: log.read(7_777, 1 << 20, 8_000)) < 40
    assert syscalls(lambda: log.bytes_between(6_001, 7_001)) < 60
    assert syscalls(lambda: log.offset_for_timestamp(3_900)) < 60
    assert log.offset_for_timestamp(3_900) == TimestampOffset(7_800, 3_900)
    log.close()


def test_time_index_only_grows_with_the_max_timestamp(d: Path) -> None:
    """Kafka's TimeIndex.maybeAppend: an entry only when the max timestamp so far grew, so entries ascend."""
    log = FileLog(d, FileLogConfig(segment_bytes=2_000, index_interval_bytes=0))
    stamps = [500, 100, 200, 900, 300, 900, 950, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    for i, ts in enumerate(stamps):
        log.append(make_batch(1, timestamps=[ts], tag=i), 0)
    log.close()
    raw = seg_file(d, 0, ".timeindex").read_bytes()
    entries = [(int.from_bytes(raw[i:i + 8], "big"), int.from_bytes(raw[i + 8:i + 12], "big"))
               for i in range(0, len(raw), 12)]
    assert entries == [(500, 0), (900, 3), (950, 6)]
