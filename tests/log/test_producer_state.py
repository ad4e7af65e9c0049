"""Idempotent producer state owned by the log (Kafka's ProducerStateManager): kept by every append, rebuilt to the
truncation point, reloaded from snapshots plus the tail on open, snapshots in Kafka's file format."""
from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from log_batches import make_batch

from reference_broker.clock import ManualClock
from reference_broker.log import batch as B
from reference_broker.log.base import Log
from reference_broker.log.file import FileLog, FileLogConfig
from reference_broker.log.memory import MemoryLog
from reference_broker.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateConfig,
    ProducerStateEntry,
    ProducerStateError,
    decode_snapshot,
    encode_snapshot,
    last_sequence,
)

SMALL = FileLogConfig(segment_bytes=400, index_interval_bytes=100)     # ~3 batches of 2 records per segment
NO_EXPIRY = ProducerStateConfig(producer_id_expiration_ms=1 << 62)


def idem(pid: int, seq: int, n: int = 2, epoch: int = 0, ts: int = 1_000) -> bytes:
    return make_batch(n, ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq, tag=pid * 1000 + seq)


def header(data: bytes) -> B.BatchHeader:
    return B.parse_header(data)


def state(lg: Log) -> dict[int, tuple[int, list[tuple[int, int, int]]]]:
    """{producer: (epoch, [(first seq, last seq, first offset), ...])}."""
    return {pid: (e.epoch, [(b.first_seq, b.last_seq, b.first_offset) for b in e.batches])
            for pid, e in sorted(lg.producer_state.producers.items())}


@pytest.fixture(params=["memory", "file"])
def any_log(request: pytest.FixtureRequest, tmp_path: Path):
    lg = MemoryLog(producer_state=NO_EXPIRY) if request.param == "memory" else \
        FileLog(tmp_path / "t-0", SMALL, producer_state=NO_EXPIRY)
    yield lg
    lg.close()


def test_appends_keep_the_last_five_batches_per_producer(any_log: Log) -> None:
    for i in range(7):
        any_log.append(idem(1, 2 * i), 0)
    any_log.append(idem(2, 0), 0)
    any_log.append_replica(bytes(_stamped(idem(3, 10), any_log.log_end_offset)))
    st = state(any_log)
    assert st[1] == (0, [(2 * i, 2 * i + 1, 2 * i) for i in range(2, 7)])
    assert st[2] == (0, [(0, 1, 14)]) and st[3] == (0, [(10, 11, 16)])
    assert any_log.producer_state.map_end_offset == any_log.log_end_offset == 18


def _stamped(data: bytes, base: int, epoch: int = 0) -> bytearray:
    b = bytearray(data)
    B.stamp(b, 0, base, epoch)
    return b


def test_truncation_keeps_producers_below_and_forgets_batches_above(any_log: Log) -> None:
    """UnifiedLog.truncateTo → rebuildProducerState: the state is the log's below the truncation offset."""
    for i in range(3):
        any_log.append(idem(1, 2 * i), 0)          # P: offsets 0..5
    any_log.append(idem(2, 0), 0)                  # Q: 6..7, truncated away below
    any_log.append(idem(1, 6), 1)                  # P: 8..9, truncated away
    any_log.truncate_to(6)
    # Replayed from the log start: every batch; from a snapshot (at the segment base 6 here): the last batch only,
    # as Kafka's snapshots keep it (a retry of an older batch is then out of sequence, in Kafka too).
    p_batches = state(any_log)[1][1]
    assert list(state(any_log)) == [1] and p_batches[-1] == (4, 5, 4)
    assert p_batches == [(0, 1, 0), (2, 3, 2), (4, 5, 4)][-len(p_batches):]
    ps = any_log.producer_state
    assert ps.check_client_batch(header(idem(1, 4))) == BatchMetadata(5, 5, 1, 1_001), "a retry: a duplicate"
    assert ps.check_client_batch(header(idem(1, 6))) is None, "P's next sequence is 6 again"
    assert ps.check_client_batch(header(idem(2, 0))) is None, "Q is unknown: its batch is new"
    with pytest.raises(ProducerStateError) as e:
        ps.check_client_batch(header(idem(1, 8)))
    assert e.value.errno == 45


def test_truncation_to_an_older_epoch_restores_it(any_log: Log) -> None:
    any_log.append(idem(1, 0), 0)
    any_log.append(idem(1, 0, epoch=1), 0)         # a new epoch starts at sequence 0
    any_log.truncate_to(2)
    assert state(any_log) == {1: (0, [(0, 1, 0)])}


def test_client_checks_follow_producer_append_info(any_log: Log) -> None:
    ps = any_log.producer_state
    any_log.append(idem(1, 0, epoch=3), 0)
    for bad, code in ((idem(1, 2, epoch=2), 47), (idem(1, 5, epoch=3), 45), (idem(1, 1, epoch=4), 45)):
        with pytest.raises(ProducerStateError) as e:
            ps.check_client_batch(header(bad))
        assert e.value.errno == code
    assert ps.check_client_batch(header(idem(1, 0, epoch=4))) is None, "a new epoch from sequence 0"
    assert ps.check_client_batch(header(idem(9, 77))) is None, "an unknown producer may start anywhere"


def test_sequences_wrap() -> None:
    h = header(idem(1, INT32_MAX - 1, n=4))
    assert last_sequence(h) == 1
    e = ProducerStateEntry(1)
    e.add_batch(0, last_sequence(h), 3, 3, 1)
    assert e.batches[0].first_seq == INT32_MAX - 1
    lg = MemoryLog()
    lg.append(bytes(idem(1, INT32_MAX - 1, n=2)), 0)
    assert lg.producer_state.check_client_batch(header(idem(1, 0))) is None, "after 2^31-1 comes 0"


def test_snapshots_at_roll_and_close_and_reload_without_replay(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    for i in range(10):
        lg.append(idem(1 + i % 2, 2 * (i // 2)), 0)
    bases = lg.segment_bases()
    assert len(bases) >= 3
    assert lg.producer_state.snapshot_offsets() == bases[1:], "one snapshot per rolled segment, at its base"
    before = state(lg)
    lg.close()
    assert (d / "00000000000000000020.snapshot").exists(), "clean close: a snapshot at the log end"
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    assert lg.producer_state.last_rebuild_replayed == 0, "a clean restart reads the snapshot, replays nothing"
    # The snapshot keeps each producer's last batch only (Kafka's ProducerSnapshot), so that is what survives.
    assert state(lg) == {pid: (ep, b[-1:]) for pid, (ep, b) in before.items()}
    lg.close()


def test_crash_reloads_the_last_roll_snapshot_and_replays_the_tail(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    for i in range(10):
        lg.append(idem(1, 2 * i), 0)
    last_base = lg.segment_bases()[-1]
    lg._release()                                  # kill -9: no close, no snapshot at the end
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    assert lg.producer_state.last_rebuild_replayed == (20 - last_base) // 2, "only the tail after the snapshot"
    assert lg.producer_state.check_client_batch(header(idem(1, 18))).first_offset == 18, "the last batch: dup"
    assert lg.producer_state.check_client_batch(header(idem(1, 20))) is None
    lg.close()


def test_crash_without_any_snapshot_replays_the_whole_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = FileLog(d, FileLogConfig(), producer_state=NO_EXPIRY)
    for i in range(6):
        lg.append(idem(1, 2 * i), 0)
    want = state(lg)
    lg._release()
    lg = FileLog(d, FileLogConfig(), producer_state=NO_EXPIRY)
    assert lg.producer_state.last_rebuild_replayed == 6 and state(lg) == want
    lg.close()


def test_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    for i in range(10):
        lg.append(idem(1, 2 * i), 0)
    lg.close()
    latest = d / "00000000000000000020.snapshot"
    raw = bytearray(latest.read_bytes())
    raw[-1] ^= 0xFF
    latest.write_bytes(raw)
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    assert not latest.exists() or lg.producer_state.last_snap_offset == 20
    assert lg.producer_state.check_client_batch(header(idem(1, 18))).first_offset == 18
    lg.close()


def test_truncation_deletes_snapshots_above_and_a_reopen_agrees(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    for i in range(10):
        lg.append(idem(1 + i % 3, 2 * (i // 3)), 0)
    lg.truncate_to(7)
    assert all(o <= 7 for o in lg.producer_state.snapshot_offsets()), lg.producer_state.snapshot_offsets()
    want = state(lg)
    lg.append(idem(4, 0), 0)
    lg.truncate_to(8)
    assert state(lg) == want
    lg._release()
    lg = FileLog(d, SMALL, producer_state=NO_EXPIRY)
    got = state(lg)
    assert {p: (e, b[-1:]) for p, (e, b) in got.items()} == {p: (e, b[-1:]) for p, (e, b) in want.items()}
    lg.close()


def test_delete_records_drops_snapshots_of_deleted_segments_and_keeps_producers(tmp_path: Path) -> None:
    lg = FileLog(tmp_path / "t-0", SMALL, producer_state=NO_EXPIRY)
    for i in range(10):
        lg.append(idem(1, 2 * i), 0)
    bases = lg.segment_bases()
    lg.delete_records_before(bases[2])
    assert all(o >= bases[2] for o in lg.producer_state.snapshot_offsets())
    assert 1 in lg.producer_state.producers, "Kafka keeps producer state when the log start moves"
    lg.close()


def test_expiration_by_batch_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(start_wall_ms=10_000)
    cfg = ProducerStateConfig(producer_id_expiration_ms=5_000)
    lg = FileLog(tmp_path / "t-0", SMALL, clock=clock, producer_state=cfg)
    lg.append(idem(1, 0, ts=9_000), 0)
    lg.append(idem(2, 0, ts=12_000), 0)
    clock.advance(4.5)                    # wall 14 500: producer 1 (max timestamp 9 001) idle 5.5 s, 2 only 2.5 s
    assert lg.producer_state.remove_expired() == [1] and list(lg.producer_state.producers) == [2]
    lg.close()
    clock.advance(10.0)
    lg = FileLog(tmp_path / "t-0", SMALL, clock=clock, producer_state=cfg)
    assert lg.producer_state.producers == {}, "expired producers are not loaded from a snapshot"
    lg.close()


def test_snapshot_file_is_kafkas_producer_snapshot_v1() -> None:
    e = ProducerStateEntry(7, 3, coordinator_epoch=-1, last_timestamp=123)
    e.add_batch(3, 9, 40, 4, 123)
    data = encode_snapshot([e, ProducerStateEntry(8, 0, last_timestamp=5)])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2) and crc == crc32c.crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 3, 9, 40, 4, 123, -1, -1)
    assert struct.unpack_from(">qhiqiqiq", data, 56) == (8, 0, -1, -1, 0, 5, -1, -1)
    back = decode_snapshot(data)
    assert [(x.producer_id, x.epoch, list(x.batches)) for x in back] == [(7, 3, [BatchMetadata(9, 40, 4, 123)]),
                                                                        (8, 0, [])]


def test_memory_log_rebuilds_on_truncation_without_snapshots() -> None:
    lg = MemoryLog(producer_state=NO_EXPIRY)
    for i in range(4):
        lg.append(idem(1, 2 * i), 0)
    lg.truncate_to(4)
    assert state(lg) == {1: (0, [(0, 1, 0), (2, 3, 2)])}
    assert lg.producer_state.snapshot_offsets() == []
