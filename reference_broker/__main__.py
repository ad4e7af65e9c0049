"""Command line: ``python -m reference_broker serve --listen 127.0.0.1:9092 (--data-dir DIR | --memory)``.

Prints ``READY host:port`` on stdout once listening (port 0 picks a free port), so launchers and tests know
when and where to connect. Exits 2 with a one-line reason for bad arguments, a taken port or an unusable data dir.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .broker import Broker, DataDirError
from .config import BrokerConfig, ConfigError
from .faults import FaultError, Faults
from .server import Server


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    try:
        p = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be a number, got {port!r}") from None
    if not 0 <= p <= 65535:
        raise argparse.ArgumentTypeError(f"port {p} outside 0..65535")
    return host, p


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m reference_broker", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run one broker")
    s.add_argument("--listen", type=_listen, default=("127.0.0.1", 9092), metavar="HOST:PORT")
    store = s.add_mutually_exclusive_group(required=True)
    store.add_argument("--data-dir", type=Path, help="durable segmented log directory")
    store.add_argument("--memory", action="store_true", help="keep everything in memory")
    s.add_argument("--broker-id", type=int, default=None, help="node.id (default 0)")
    s.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="Kafka broker config, e.g. log.segment.bytes=1048576 (repeatable)")
    s.add_argument("--seed", type=int, default=None, help="seed for the broker's RNG (ids)")
    s.add_argument("--fault", action="append", default=[], metavar="NAME",
                   help="TEST ONLY: break a Kafka rule on purpose (see reference_broker/faults.py)")
    s.add_argument("--log-level", default="WARNING")
    return ap


async def serve(args: argparse.Namespace) -> int:
    cfg = BrokerConfig.from_pairs(args.config)
    if args.broker_id is not None:
        cfg.set("node.id", args.broker_id)
    broker = Broker(cfg, None if args.memory else args.data_dir, seed=args.seed, faults=Faults(args.fault))
    server = Server(broker)
    host, port = args.listen
    try:
        bound = await server.start(host, port)
    except OSError as e:
        print(f"reference_broker: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        broker.close()
        return 2
    broker.host, broker.port = host, bound
    flusher = asyncio.create_task(broker.flush_scheduler()) if broker.data_dir is not None else None
    print(f"READY {host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if flusher is not None:
        flusher.cancel()
    await server.stop()
    broker.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(serve(args))
    except (ConfigError, DataDirError, FaultError) as e:
        print(f"reference_broker: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
