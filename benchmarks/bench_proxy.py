"""Proxy overhead: throughput and added latency through chaos's proxy (no toxics) vs a direct connection.

Same run, same machine, alternating direct and proxied repeats, medians reported. Each side gets its own fresh
memory-mode reference broker in its own process; the proxy runs in its own process (`python -m chaos proxy
serve`), so neither shares the client's GIL. The proxied broker advertises the proxy's address so the client
never bypasses it (the broker's `advertised.listeners` setting).

    .venv/bin/python benchmarks/bench_proxy.py [--repeats 5] [--messages 20000] [--size 1024] [--pings 2000]

Goals (issue 10): proxied throughput >= 0.8x direct; p99 added latency < 1 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's chaos/ and reference_broker/, not an installed copy
API_VERSIONS_V0 = b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x"


def _broker_argv(advertise: str) -> list[str]:
    """A reference broker (memory) that advertises ``advertise`` (the proxy) when given, else itself."""
    argv = [sys.executable, "-m", "reference_broker", "serve", "--listen", "127.0.0.1:0", "--memory",
            "--config", "num.partitions=1"]
    return argv + (["--config", f"advertised.listeners={advertise}"] if advertise else [])


class Child:
    """A child process started and stopped by PID, READY line parsed."""

    def __init__(self, argv: list[str]) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     cwd=ROOT, env=env)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        m = re.match(r"READY (\S+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"child {argv} did not start: {line!r}")
        self.address = m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pings(address: str, n: int) -> list[float]:
    """Round trips (seconds) of n ApiVersions v0 requests on one connection."""
    host, port = address.rsplit(":", 1)
    out = []
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t0 = time.perf_counter()
            s.sendall(API_VERSIONS_V0)
            size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
            s.recv(size, socket.MSG_WAITALL)
            out.append(time.perf_counter() - t0)
    return out


def _throughput(bootstrap: str, messages: int, size: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) with confluent-kafka for `messages` of `size` bytes on a fresh topic."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    payload = b"x" * size
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    producer.produce(topic, payload)  # create the topic, open connections
    producer.flush(30)
    t0 = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    produce = messages * size / (time.perf_counter() - t0) / 1e6
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < messages + 1 and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    consume = got * size / (time.perf_counter() - t0) / 1e6
    consumer.close()
    return produce, consume


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--pings", type=int, default=2000)
    ap.add_argument("--json", action="store_true", help="print the result as JSON too")
    args = ap.parse_args()

    from chaos.faults import ToxiproxyClient

    children: list[Child] = []
    try:
        proxy_port = _free_port()
        direct = Child(_broker_argv(""))
        children.append(direct)
        proxied = Child(_broker_argv(f"127.0.0.1:{proxy_port}"))
        children.append(proxied)
        api = Child([sys.executable, "-m", "chaos", "proxy", "serve", "--api", "127.0.0.1:0"])
        children.append(api)
        client = ToxiproxyClient(api.address)
        client.create("bench", upstream=proxied.address, listen=f"127.0.0.1:{proxy_port}")
        through = f"127.0.0.1:{proxy_port}"
        rows: dict[str, list[float]] = {k: [] for k in ("d_prod", "p_prod", "d_cons", "p_cons", "d_p50", "p_p50",
                                                        "d_p99", "p_p99")}
        _pings(direct.address, 200)
        _pings(through, 200)  # warm-up
        for r in range(args.repeats):
            for side, addr in (("d", direct.address), ("p", through)) if r % 2 == 0 else (
                    ("p", through), ("d", direct.address)):
                prod, cons = _throughput(addr, args.messages, args.size)
                pings = _pings(addr, args.pings)
                rows[f"{side}_prod"].append(prod)
                rows[f"{side}_cons"].append(cons)
                rows[f"{side}_p50"].append(_pct(pings, 0.50) * 1e3)
                rows[f"{side}_p99"].append(_pct(pings, 0.99) * 1e3)
            print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(f"{k}={v[-1]:.3f}" for k, v in rows.items()),
                  flush=True)
        med = {k: statistics.median(v) for k, v in rows.items()}
        result = {
            "produce_MBps": {"direct": med["d_prod"], "proxy": med["p_prod"], "ratio": med["p_prod"] / med["d_prod"]},
            "consume_MBps": {"direct": med["d_cons"], "proxy": med["p_cons"], "ratio": med["p_cons"] / med["d_cons"]},
            "rtt_ms": {"direct_p50": med["d_p50"], "proxy_p50": med["p_p50"], "direct_p99": med["d_p99"],
                       "proxy_p99": med["p_p99"], "added_p50": med["p_p50"] - med["d_p50"],
                       "added_p99": med["p_p99"] - med["d_p99"]},
            "repeats": args.repeats, "messages": args.messages, "size": args.size, "pings": args.pings,
        }
        print(f"\nmedians of {args.repeats} repeats ({args.messages} x {args.size} B, {args.pings} pings):")
        for key in ("produce_MBps", "consume_MBps"):
            r = result[key]
            print(f"  {key:13} direct {r['direct']:8.2f}  proxy {r['proxy']:8.2f}  ratio {r['ratio']:.2f}"
                  f"  (goal >= 0.80)")
        rtt = result["rtt_ms"]
        print(f"  rtt ms        p50 direct {rtt['direct_p50']:.3f} proxy {rtt['proxy_p50']:.3f} "
              f"added {rtt['added_p50']:.3f}; p99 direct {rtt['direct_p99']:.3f} proxy {rtt['proxy_p99']:.3f} "
              f"added {rtt['added_p99']:.3f}  (goal < 1 ms)")
        if args.json:
            print(json.dumps(result))
    finally:
        for child in reversed(children):
            child.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
