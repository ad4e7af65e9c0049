"""The Log contract (reference_broker/log/base.py), run against every implementation by the ``log`` fixture."""
from __future__ import annotations

import struct

import pytest
from log_batches import decode, make_batch

from reference_broker.log import batch as B
from reference_broker.log.base import AppendInfo, EpochEntry, Log, ReadResult, TimestampOffset


def fill(log: Log, sizes: list[int], epoch: int = 0, ts0: int = 1_000) -> list[AppendInfo]:
    """Append one batch per entry of ``sizes`` (records per batch), timestamps ascending from ``ts0``."""
    out = []
    for i, n in enumerate(sizes):
        out.append(log.append(make_batch(n, timestamp=ts0 + 100 * i, tag=i), epoch))
    return out


def everything(log: Log) -> ReadResult:
    return log.read(log.log_start_offset, 1 << 30, log.log_end_offset)


# -- append -----------------------------------------------------------------------------------------------------

def test_append_assigns_consecutive_offsets_and_stamps_epoch(log: Log) -> None:
    infos = fill(log, [3, 1, 5], epoch=7)
    assert [(i.base_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3), (4, 8)]
    assert log.log_start_offset == 0 and log.log_end_offset == 9
    data = everything(log).data
    assert [r[0] for r in decode(data)] == list(range(9))
    headers = [h for _, h in B.iter_batches(data)]
    assert [h.leader_epoch for h in headers] == [7, 7, 7]
    assert [h.size for h in headers] == [i.size for i in infos]
    assert infos[2].max_timestamp == 1_200 + 4


def test_append_takes_exactly_one_batch(log: Log) -> None:
    with pytest.raises(B.InvalidBatch):
        log.append(make_batch(1) + make_batch(1), 0)
    assert log.log_end_offset == 0


def test_log_append_time_sets_type_timestamp_and_crc(log: Log) -> None:
    info = log.append(make_batch(3, timestamp=5), 0, timestamp_ms=99_000)
    assert info.max_timestamp == 99_000
    data = everything(log).data
    h = B.validate(data)                                   # CRC recomputed
    assert h.is_log_append_time and h.max_timestamp == 99_000
    assert [r[1] for r in decode(data)] == [99_000] * 3    # consumers see the broker's time
    assert log.max_timestamp() == TimestampOffset(2, 99_000)


# -- read -------------------------------------------------------------------------------------------------------

def test_read_returns_whole_batches_from_the_one_containing_offset(log: Log) -> None:
    fill(log, [4, 4, 4])
    res = log.read(6, 1 << 20, 12)
    assert res.first_offset == 4
    assert [r[0] for r in decode(res.data)] == list(range(4, 12))


def test_read_at_each_offset_starts_at_its_batch(log: Log) -> None:
    infos = fill(log, [2, 5, 1, 3] * 3)
    for off in range(log.log_end_offset):
        res = log.read(off, 1 << 20, log.log_end_offset)
        owner = next(i for i in infos if i.base_offset <= off <= i.last_offset)
        assert res.first_offset == owner.base_offset
        assert decode(res.data)[0][0] == owner.base_offset
        assert decode(res.data)[-1][0] == log.log_end_offset - 1


def test_read_stops_before_a_batch_that_does_not_fit(log: Log) -> None:
    infos = fill(log, [2, 2, 2, 2])
    size = infos[0].size
    res = log.read(0, 2 * size + size // 2, 8)
    assert [r[0] for r in decode(res.data)] == [0, 1, 2, 3]
    assert len(res.data) == 2 * size


def test_min_one_returns_first_batch_whole_even_if_larger(log: Log) -> None:
    infos = fill(log, [10, 1])
    res = log.read(3, 10, 11, min_one=True)
    assert res.first_offset == 0 and len(res.data) == infos[0].size
    assert log.read(3, 10, 11, min_one=False) == ReadResult(b"", 3)


def test_read_stops_at_max_offset(log: Log) -> None:
    fill(log, [3, 3, 3])                    # batches 0-2, 3-5, 6-8
    assert [r[0] for r in decode(log.read(0, 1 << 20, 6).data)] == list(range(6))
    # a batch straddling max_offset holds offsets below it, so it is served
    assert [r[0] for r in decode(log.read(0, 1 << 20, 4).data)] == list(range(6))
    assert log.read(6, 1 << 20, 6) == ReadResult(b"", 6)


def test_read_at_log_end_is_empty(log: Log) -> None:
    fill(log, [2])
    assert log.read(2, 1 << 20, 2) == ReadResult(b"", 2)


def test_read_across_many_batches_matches_appended_bytes(log: Log) -> None:
    batches = [make_batch(1 + i % 4, timestamp=i, tag=i) for i in range(40)]
    expected = b""
    for b in batches:
        log.append(b, 0)
    expected = everything(log).data
    assert len(expected) == sum(len(b) for b in batches)
    # reading in small pieces from successive offsets rebuilds exactly the same bytes
    pieces, off = [], 0
    while off < log.log_end_offset:
        res = log.read(off, 300, log.log_end_offset)
        assert res.data
        pieces.append(res.data)
        off = decode(res.data)[-1][0] + 1
    assert b"".join(pieces) == expected


# -- bytes_between --------------------------------------------------------------------------------------------

def test_bytes_between_counts_whole_batches(log: Log) -> None:
    infos = fill(log, [2, 3, 4])           # 0-1, 2-4, 5-8
    s = [i.size for i in infos]
    assert log.bytes_between(0, 9) == sum(s)
    assert log.bytes_between(2, 5) == s[1]
    assert log.bytes_between(3, 9) == s[1] + s[2]       # start inside a batch counts that batch
    assert log.bytes_between(0, 6) == s[0] + s[1]       # end inside a batch stops before it
    assert log.bytes_between(5, 5) == 0 and log.bytes_between(7, 2) == 0


# -- delete_records_before ------------------------------------------------------------------------------------

def test_delete_records_before_moves_log_start(log: Log) -> None:
    fill(log, [3, 3, 3, 3], epoch=0)
    log.append(make_batch(3, timestamp=9_000), 1)            # 12-14 in epoch 1
    log.delete_records_before(7)
    assert log.log_start_offset == 7 and log.log_end_offset == 15
    res = log.read(7, 1 << 20, 15)
    assert res.first_offset == 6                        # the batch holding 7 is served whole
    assert [r[0] for r in decode(res.data)] == list(range(6, 15))
    assert log.epoch_entries() == [EpochEntry(0, 7), EpochEntry(1, 12)]   # Kafka's truncateFromStart
    log.delete_records_before(3)                        # never backwards
    assert log.log_start_offset == 7
    log.delete_records_before(100)                      # clamped to the LEO
    assert log.log_start_offset == 15 and log.log_end_offset == 15
    assert log.read(15, 1 << 20, 15).data == b""
    info = log.append(make_batch(1), 2)
    assert info.base_offset == 15 and log.log_end_offset == 16


def test_delete_records_hides_timestamps_below_start(log: Log) -> None:
    log.append(make_batch(2, timestamps=[50, 60]), 0)   # 0-1
    log.append(make_batch(2, timestamps=[10, 20]), 0)   # 2-3
    log.append(make_batch(2, timestamps=[30, 40]), 0)   # 4-5
    assert log.offset_for_timestamp(55) == TimestampOffset(1, 60)
    assert log.max_timestamp() == TimestampOffset(1, 60)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(55) is None
    assert log.offset_for_timestamp(15) == TimestampOffset(3, 20)
    assert log.max_timestamp() == TimestampOffset(5, 40)
    log.delete_records_before(3)                        # inside a batch: record 2 is gone, 3 stays
    assert log.offset_for_timestamp(5) == TimestampOffset(3, 20)


# -- truncate_to ----------------------------------------------------------------------------------------------

def test_truncate_to_drops_batches_and_epochs(log: Log) -> None:
    fill(log, [2, 2], epoch=1)                          # 0-3 epoch 1
    fill(log, [2, 2], epoch=2, ts0=5_000)               # 4-7 epoch 2
    fill(log, [2], epoch=3, ts0=9_000)                  # 8-9 epoch 3
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert [r[0] for r in decode(everything(log).data)] == list(range(6))
    assert log.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 4)]
    assert log.max_timestamp() == TimestampOffset(5, 5_001)
    assert log.offset_for_timestamp(9_000) is None
    log.truncate_to(4)
    assert log.epoch_entries() == [EpochEntry(1, 0)]
    info = log.append(make_batch(1, timestamp=7), 4)
    assert info.base_offset == 4
    assert log.epoch_entries() == [EpochEntry(1, 0), EpochEntry(4, 4)]
    log.truncate_to(50)                                 # beyond the LEO: nothing happens
    assert log.log_end_offset == 5


def test_truncate_at_the_log_end_drops_an_epoch_started_there(log: Log) -> None:
    """Kafka's UnifiedLog.truncateTo at or past the LEO removes no batch but truncates the epoch cache from the
    LEO: a replica that led epoch 2 from 4 and lost leadership before writing must not keep answering epoch 2
    (issue 18 item 1: its fetcher sent last fetched epoch 2 forever)."""
    fill(log, [2, 2], epoch=1)                          # 0-3 epoch 1
    log.assign_epoch(2, 4)                              # became leader at 4, wrote nothing
    assert log.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 4)]
    log.truncate_to(4)                                  # the diverging epoch ends at the log end
    assert log.log_end_offset == 4 and log.epoch_entries() == [EpochEntry(1, 0)]
    log.assign_epoch(3, 4)
    log.truncate_to(9)                                  # past the log end: the same
    assert log.log_end_offset == 4 and log.epoch_entries() == [EpochEntry(1, 0)]


def test_truncate_fully_and_start_at_empties_the_log_there(log: Log) -> None:
    """Kafka's truncateFullyAndStartAt: a follower whose log ends below the leader's log start drops everything
    and starts at the leader's log start (issue 18 item 3)."""
    fill(log, [3, 3], epoch=2)                          # 0-5
    log.truncate_fully_and_start_at(20)
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert log.epoch_entries() == [] and log.max_timestamp() is None and log.offset_for_timestamp(0) is None
    assert log.read(20, 1 << 20, 20).data == b""
    data = bytearray(make_batch(2, timestamp=7_000))
    B.stamp(data, 0, 20, 3)                             # the leader's batch at its log start
    assert log.append_replica(bytes(data)).base_offset == 20
    assert log.log_end_offset == 22 and log.epoch_entries() == [EpochEntry(3, 20)]
    assert [r[0] for r in decode(everything(log).data)] == [20, 21]


def test_truncate_fully_keeping_a_log_start_inside_the_next_batch(log: Log) -> None:
    """truncateFullyAndStartAt(batch base, logStartOffset): the follower's log start (12) stays while the leader's
    batch holding it (5..14) is appended whole."""
    fill(log, [3], epoch=0)
    log.truncate_fully_and_start_at(5, log_start=12)
    data = bytearray(make_batch(10, timestamp=7_000))
    B.stamp(data, 0, 5, 1)
    log.append_replica(bytes(data))
    assert (log.log_start_offset, log.log_end_offset) == (12, 15)
    assert log.read(12, 1 << 20, 15).first_offset == 5      # the batch holding 12, whole


def test_truncate_below_log_start_lowers_it(log: Log) -> None:
    fill(log, [3, 3, 3])
    log.delete_records_before(7)
    log.truncate_to(6)
    assert log.log_start_offset == 6 and log.log_end_offset == 6
    assert log.read(6, 1 << 20, 6).data == b""
    assert log.append(make_batch(2), 0).base_offset == 6


def test_truncate_to_zero_empties_the_log(log: Log) -> None:
    fill(log, [3, 3], epoch=5)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.epoch_entries() == [] and log.max_timestamp() is None
    assert log.append(make_batch(1), 6).base_offset == 0


# -- timestamps -----------------------------------------------------------------------------------------------

def test_offset_for_timestamp_finds_earliest_record_at_or_after(log: Log) -> None:
    log.append(make_batch(3, timestamps=[100, 300, 200]), 0)   # 0-2
    log.append(make_batch(2, timestamps=[150, 400]), 0)        # 3-4
    log.append(make_batch(2, timestamps=[500, 500]), 0)        # 5-6
    assert log.offset_for_timestamp(0) == TimestampOffset(0, 100)
    assert log.offset_for_timestamp(100) == TimestampOffset(0, 100)
    assert log.offset_for_timestamp(101) == TimestampOffset(1, 300)
    assert log.offset_for_timestamp(301) == TimestampOffset(4, 400)
    assert log.offset_for_timestamp(500) == TimestampOffset(5, 500)
    assert log.offset_for_timestamp(501) is None


def test_max_timestamp_earliest_batch_on_ties(log: Log) -> None:
    assert log.max_timestamp() is None
    log.append(make_batch(2, timestamps=[10, 70]), 0)          # 0-1
    log.append(make_batch(2, timestamps=[70, 20]), 0)          # 2-3
    log.append(make_batch(1, timestamps=[30]), 0)              # 4
    assert log.max_timestamp() == TimestampOffset(1, 70)
    log.append(make_batch(1, timestamps=[80]), 0)
    assert log.max_timestamp() == TimestampOffset(5, 80)


def test_timestamps_through_many_batches(log: Log) -> None:
    for i in range(60):
        log.append(make_batch(2, timestamps=[10 * i, 10 * i + 5], tag=i), 0)
    for t in (0, 1, 5, 6, 295, 300, 301, 590, 595):
        expect = None
        for off in range(120):
            ts = 10 * (off // 2) + 5 * (off % 2)
            if ts >= t:
                expect = TimestampOffset(off, ts)
                break
        assert log.offset_for_timestamp(t) == expect, t
    assert log.offset_for_timestamp(596) is None


# -- epochs ---------------------------------------------------------------------------------------------------

def test_epoch_entries_and_end_offset_for_epoch(log: Log) -> None:
    assert log.end_offset_for_epoch(0) == (-1, -1)
    fill(log, [2], epoch=2)          # 0-1
    fill(log, [3], epoch=2)          # 2-4
    fill(log, [1], epoch=5)          # 5
    fill(log, [2], epoch=7)          # 6-7
    assert log.epoch_entries() == [EpochEntry(2, 0), EpochEntry(5, 5), EpochEntry(7, 6)]
    assert log.end_offset_for_epoch(7) == (7, 8)          # latest: the LEO
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert log.end_offset_for_epoch(3) == (2, 5)          # unknown epoch: the floor epoch, the next start
    assert log.end_offset_for_epoch(1) == (1, 0)          # below every epoch: itself, first start (Kafka)
    assert log.end_offset_for_epoch(8) == (-1, -1)        # above every epoch: undefined (Kafka)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


# -- append_replica -------------------------------------------------------------------------------------------

def leader_batches(specs: list[tuple[int, int, int]]) -> bytes:
    """Batches as a leader holds them: (base offset, records, epoch) each, stamped like Log.append does."""
    out = bytearray()
    for base, n, epoch in specs:
        buf = bytearray(make_batch(n, timestamp=base * 10, tag=base))
        B.stamp(buf, 0, base, epoch)
        out += buf
    return bytes(out)


def test_append_replica_keeps_offsets_and_epochs(log: Log) -> None:
    data = leader_batches([(0, 2, 1), (2, 3, 1), (5, 1, 4)])
    info = log.append_replica(data)
    assert info == AppendInfo(0, 5, 50, len(data))
    assert everything(log).data == data
    assert log.epoch_entries() == [EpochEntry(1, 0), EpochEntry(4, 5)]
    # already-held batches are skipped, a partial trailing batch is dropped, gaps are allowed
    more = leader_batches([(2, 3, 1), (5, 1, 4), (9, 2, 4), (11, 1, 6)])
    info = log.append_replica(more[:-5])
    assert info is not None and (info.base_offset, info.last_offset) == (9, 10)
    assert log.log_end_offset == 11
    assert [r[0] for r in decode(everything(log).data)] == [0, 1, 2, 3, 4, 5, 9, 10]
    assert log.append_replica(leader_batches([(0, 2, 1)])) is None


def test_append_replica_rejects_corrupt_batch_without_writing(log: Log) -> None:
    good = leader_batches([(0, 2, 1), (2, 2, 1)])
    bad = bytearray(good)
    bad[-3] ^= 0xFF                                     # inside the second batch's records
    with pytest.raises(B.InvalidBatch, match="CRC"):
        log.append_replica(bytes(bad))
    assert log.log_end_offset == 0 and everything(log).data == b""


def test_append_replica_rejects_overlap_with_log_end(log: Log) -> None:
    log.append_replica(leader_batches([(0, 4, 1)]))
    with pytest.raises(B.InvalidBatch, match="overlaps"):
        log.append_replica(leader_batches([(2, 4, 1)]))
    assert log.log_end_offset == 4


def test_compressed_batches_round_trip(log: Log) -> None:
    b = make_batch(50, value_size=200, compression=4)   # zstd via kafka.record
    assert struct.unpack_from(">h", b, B.ATTRIBUTES)[0] & 7 == 4
    log.append(b, 0)
    log.append(make_batch(2), 0)
    assert log.offset_for_timestamp(1_020) == TimestampOffset(20, 1_020)
    assert [r[0] for r in decode(everything(log).data)] == list(range(52))
