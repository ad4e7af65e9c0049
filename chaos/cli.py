"""The chaos CLI: `python -m chaos proxy serve --api HOST:PORT` and `python -m chaos nemesis plan ...`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    from .proxy import ProxyServer

    server = ProxyServer(args.api, seed=args.seed, loopback_only=not args.any_address)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.request_stop)
        serving = asyncio.ensure_future(server.serve_forever())
        while server.api_port == 0 and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            await serving  # raises the listen error
        print(f"READY {server.api_address}", flush=True)
        await serving

    try:
        asyncio.run(main())
    except OSError as e:
        print(f"error: cannot listen on {args.api}: {e}", file=sys.stderr)
        return 1
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .nemesis.schedule import ScheduleSpec, generate

    spec = ScheduleSpec(interval=args.interval, duration=args.fault_duration, total=args.total,
                        faults=tuple(args.faults.split(",")), brokers=tuple(int(b) for b in args.brokers.split(",")))
    for step in generate(args.seed, spec):
        print(step.describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    proxy = sub.add_parser("proxy", help="the Toxiproxy-compatible proxy")
    psub = proxy.add_subparsers(dest="proxy_cmd", required=True)
    serve = psub.add_parser("serve", help="serve Toxiproxy's HTTP API; prints 'READY host:port'")
    serve.add_argument("--api", default="127.0.0.1:8474", help="API listen address (port 0: any free port)")
    serve.add_argument("--seed", type=int, default=None, help="seed for toxicity rolls and jitter")
    serve.add_argument("--any-address", action="store_true", help="allow proxies to listen off loopback")
    serve.set_defaults(fn=_serve)
    nem = sub.add_parser("nemesis", help="fault schedules")
    nsub = nem.add_subparsers(dest="nemesis_cmd", required=True)
    plan = nsub.add_parser("plan", help="print the schedule a seed gives (a dry run: nothing is touched)")
    plan.add_argument("--seed", type=int, required=True)
    plan.add_argument("--interval", type=float, default=10.0, help="seconds between fault starts")
    plan.add_argument("--fault-duration", type=float, default=5.0, help="seconds each fault lasts")
    plan.add_argument("--total", type=float, default=60.0, help="seconds the schedule covers")
    plan.add_argument("--faults", default="kill,pause,partition,latency,kafka-error")
    plan.add_argument("--brokers", default="0", help="comma-separated broker ids")
    plan.set_defaults(fn=_plan)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    return int(args.fn(args))
