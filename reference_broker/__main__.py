"""Command line of the reference cluster.

- ``python -m reference_broker serve --listen 127.0.0.1:9092 (--data-dir DIR | --memory)``: one broker (with its
  own controller in the same process unless ``--controller HOST:PORT`` names the cluster's);
- ``python -m reference_broker controller --listen HOST:PORT (--data-dir DIR | --memory)``: a cluster's controller;
- ``python -m reference_broker cluster --brokers 3 (--data-dir DIR | --memory)``: a whole cluster, one OS process
  per node, controlled by ``ctl`` (kill -9, pause, resume, restart node k).

Each process prints ``READY host:port`` on stdout once it serves (port 0 picks a free port), so launchers and tests
know when and where to connect. Exits 2 with a one-line reason for bad arguments, a taken port, an unusable data
dir or a node that cannot join.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .clock import Clock, make_rng
from .config import BrokerConfig, ConfigError
from .controller.service import ControllerService
from .faults import FaultError, Faults
from .log.file import LogDirError
from .node import BrokerNode, DataDirError, NodeStartError


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
    s.add_argument("--controller", type=_listen, default=None, metavar="HOST:PORT",
                   help="the cluster's controller; without it the broker runs its own (combined mode)")
    s.add_argument("--ready-timeout", type=float, default=60.0, help="seconds to wait to be unfenced")
    s.add_argument("--log-level", default="WARNING")

    c = sub.add_parser("controller", help="run the controller of a cluster (the metadata log's writer)")
    c.add_argument("--listen", type=_listen, default=("127.0.0.1", 9093), metavar="HOST:PORT")
    cstore = c.add_mutually_exclusive_group(required=True)
    cstore.add_argument("--data-dir", type=Path, help="durable metadata log directory")
    cstore.add_argument("--memory", action="store_true", help="keep the metadata log in memory")
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--fault", action="append", default=[], metavar="NAME")
    c.add_argument("--log-level", default="WARNING")

    from .cluster import add_cluster_arguments
    add_cluster_arguments(sub)
    return ap


async def serve(args: argparse.Namespace) -> int:
    """One broker. Without --controller it runs its own controller in the same process (KRaft combined mode)."""
    cfg = BrokerConfig.from_pairs(args.config)
    if args.broker_id is not None:
        cfg.set("node.id", args.broker_id)
    if args.controller is None and not cfg.is_set("offsets.topic.replication.factor"):
        # A single combined node, as Kafka's shipped config/server.properties sets it: with Kafka's default (3) the
        # offsets topic could never be created, so no group would ever get a coordinator.
        cfg.set("offsets.topic.replication.factor", 1)
    if args.controller is None:
        # The same for __transaction_state (Kafka's config/server.properties: factor 1, min ISR 1).
        for key in ("transaction.state.log.replication.factor", "transaction.state.log.min.isr"):
            if not cfg.is_set(key):
                cfg.set(key, 1)
    faults = Faults(args.fault)
    data_dir = None if args.memory else args.data_dir
    clock = Clock()
    controller = None
    host, port = args.listen
    if args.controller is None:
        controller = ControllerService(cfg, data_dir, clock, make_rng(args.seed), faults)
        caddr = (host, await controller.start(host, 0))
    else:
        caddr = args.controller
    try:
        node = BrokerNode(cfg, data_dir, controller=caddr, clock=clock, seed=args.seed, faults=faults)
    except DataDirError:
        if controller is not None:
            await controller.stop()
        raise
    try:
        bound = await node.start(host, port, ready_timeout=args.ready_timeout)
    except OSError as e:
        print(f"reference_broker: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        await _stop(node, controller)
        return 2
    except NodeStartError as e:
        print(f"reference_broker: {e}", file=sys.stderr)
        await _stop(node, controller)
        return 2
    print(f"READY {host}:{bound}", flush=True)
    await _wait_for_signal()
    if controller is None:
        await node.controlled_shutdown()
    await _stop(node, controller)
    return 0


async def _stop(node, controller) -> None:
    await node.stop()
    if controller is not None:
        await controller.stop()


async def _wait_for_signal() -> None:
    """Until SIGTERM/SIGINT — or, with KCT_EXIT_WITH_PARENT=1 (set by the cluster launcher), until the launcher
    is gone: a launcher killed with -9 cannot stop its nodes, so they stop themselves instead of lingering."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watchdog = None
    if os.environ.get("KCT_EXIT_WITH_PARENT") == "1":
        parent = os.getppid()

        async def watch() -> None:
            while os.getppid() == parent:
                await asyncio.sleep(1.0)
            stop.set()
        watchdog = asyncio.create_task(watch())
    await stop.wait()
    if watchdog is not None:
        watchdog.cancel()


async def run_controller(args: argparse.Namespace) -> int:
    """The controller process of a cluster: prints READY host:port once it listens."""
    cfg = BrokerConfig.from_pairs(args.config)
    clock = Clock()
    service = ControllerService(cfg, None if args.memory else args.data_dir, clock, make_rng(args.seed),
                                Faults(args.fault))
    host, port = args.listen
    try:
        bound = await service.start(host, port)
    except OSError as e:
        print(f"reference_broker: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        await service.stop()
        return 2
    print(f"READY {host}:{bound}", flush=True)
    await _wait_for_signal()
    await service.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "WARNING").upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.cmd == "cluster":
            from .cluster import run_cluster_cli
            return run_cluster_cli(args)
        if args.cmd == "ctl":
            from .cluster import run_ctl_cli
            return run_ctl_cli(args)
        return asyncio.run(serve(args) if args.cmd == "serve" else run_controller(args))
    except (ConfigError, DataDirError, FaultError, LogDirError) as e:
        print(f"reference_broker: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
