"""Partition log benchmark: FileLog append / sequential read throughput and process RSS, against MemoryLog.

The durable log must not keep the log in RAM (reads go to the files; the kernel's page cache does the caching),
so the process RSS after writing 1 GB should stay far below the data size — goal: under 200 MB. MemoryLog runs
on a smaller size in the same process, after the FileLog figures are taken, to give a throughput ratio.

    /work/venv/bin/python benchmarks/bench_log.py                      # 1 GB file log, 128 MB memory log
    /work/venv/bin/python benchmarks/bench_log.py --size-mb 256 --flush-messages 1000 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil
from kafka.record.default_records import DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_broker.log.base import Log  # noqa: E402
from reference_broker.log.file import FileLog, FileLogConfig  # noqa: E402
from reference_broker.log.memory import MemoryLog  # noqa: E402

MB = 1 << 20


def build_batches(record_bytes: int, per_batch: int, variants: int = 8) -> list[bytes]:
    """A few distinct producer batches of ``per_batch`` records of ``record_bytes`` (kafka.record, magic 2)."""
    out = []
    for v in range(variants):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i in range(per_batch):
            b.append(i, timestamp=1_700_000_000_000 + v, key=b"k%d" % i, value=os.urandom(record_bytes), headers=[])
        out.append(bytes(b.build()))
    return out


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / MB


def drop_page_cache() -> None:
    """Make the read phase come from the disk (root only)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run(log: Log, batches: list[bytes], total_bytes: int, drop_caches: bool = False) -> dict[str, float]:
    """Append until ``total_bytes``, then read everything back sequentially in 1 MB fetches."""
    rss_before = rss_mb()
    written, n = 0, 0
    t0 = time.perf_counter()
    while written < total_bytes:
        written += log.append(batches[n % len(batches)], 0).size
        n += 1
    t_append = time.perf_counter() - t0
    t0 = time.perf_counter()
    log.flush()
    t_flush = time.perf_counter() - t0
    rss_after_write = rss_mb()
    if drop_caches:
        drop_page_cache()
    t0 = time.perf_counter()
    offset, read = log.log_start_offset, 0
    end = log.log_end_offset
    while offset < end:
        res = log.read(offset, MB, end)
        read += len(res.data)
        # next fetch offset: one past the last batch returned (its header holds base offset and delta)
        last = res.data
        pos = 0
        while pos < len(last):
            size = int.from_bytes(last[pos + 8:pos + 12], "big") + 12
            nxt = int.from_bytes(last[pos:pos + 8], "big") + int.from_bytes(last[pos + 23:pos + 27], "big") + 1
            pos += size
        offset = nxt
    t_read = time.perf_counter() - t0
    assert read == written, (read, written)
    return {"bytes": written, "batches": n, "append_mb_s": written / MB / t_append, "flush_s": t_flush,
            "read_mb_s": read / MB / t_read, "rss_before_mb": rss_before, "rss_after_write_mb": rss_after_write,
            "rss_after_read_mb": rss_mb()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="data appended to the FileLog (default 1024)")
    ap.add_argument("--memory-size-mb", type=int, default=128, help="data appended to the MemoryLog")
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--records-per-batch", type=int, default=16)
    ap.add_argument("--segment-mb", type=int, default=256, help="log.segment.bytes in MB")
    ap.add_argument("--flush-messages", type=int, default=2**63 - 1,
                    help="log.flush.interval.messages (1 = fsync every append; default: at roll/close only)")
    ap.add_argument("--dir", type=Path, default=None, help="where the FileLog lives (default: a temp dir)")
    ap.add_argument("--drop-caches", action="store_true",
                    help="as root: drop the page cache before reading so reads come from the disk")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()

    batches = build_batches(args.record_bytes, args.records_per_batch)
    base = args.dir or Path(tempfile.mkdtemp(prefix="bench-log-", dir="/var/tmp"))
    cfg = FileLogConfig(segment_bytes=args.segment_mb * MB, flush_interval_messages=args.flush_messages)
    path = base / "bench-0"
    shutil.rmtree(path, ignore_errors=True)
    flog = FileLog(path, cfg)
    try:
        file_res = run(flog, batches, args.size_mb * MB, drop_caches=args.drop_caches)
    finally:
        flog.close()
        shutil.rmtree(path, ignore_errors=True)
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    mem_res = run(MemoryLog(), batches, args.memory_size_mb * MB)

    results = {"file": file_res, "memory": mem_res, "config": {
        "size_mb": args.size_mb, "memory_size_mb": args.memory_size_mb, "record_bytes": args.record_bytes,
        "records_per_batch": args.records_per_batch, "batch_bytes": len(batches[0]),
        "segment_mb": args.segment_mb, "flush_messages": args.flush_messages}}
    f, m = file_res, mem_res
    print(f"batch: {args.records_per_batch} x {args.record_bytes} B records = {len(batches[0])} B")
    print(f"{'':8} {'MB':>7} {'append MB/s':>12} {'read MB/s':>10} {'RSS before':>11} {'after write':>12} "
          f"{'after read':>11}")
    for name, r in (("FileLog", f), ("MemoryLog", m)):
        print(f"{name:9} {r['bytes'] / MB:7.0f} {r['append_mb_s']:12.1f} {r['read_mb_s']:10.1f} "
              f"{r['rss_before_mb']:10.1f}M {r['rss_after_write_mb']:11.1f}M {r['rss_after_read_mb']:10.1f}M")
    print(f"FileLog / MemoryLog throughput: append {f['append_mb_s'] / m['append_mb_s']:.2f}x, "
          f"read {f['read_mb_s'] / m['read_mb_s']:.2f}x; FileLog flush at end {f['flush_s']:.2f}s")
    grown = f["rss_after_write_mb"] - f["rss_before_mb"]
    ok = f["rss_after_write_mb"] < 200
    print(f"FileLog RSS after {f['bytes'] / MB:.0f} MB: {f['rss_after_write_mb']:.1f} MB (grew {grown:.1f} MB) — "
          f"goal < 200 MB: {'met' if ok else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
