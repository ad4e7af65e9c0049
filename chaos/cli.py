"""The chaos CLI: `run` (workload + nemesis + verdict), `proxy serve` (Toxiproxy API), `nemesis plan`.

examples:
  python -m chaos run --workload queue --nemesis kill,pause --duration 60s --rate 200 --seed 7 --out out/chaos
  python -m chaos run --workload txn --target kafka --client confluent --nemesis kill,pause,partition \
      --duration 60s --rate 20 --out out/txn      # transactions, read_committed, consume-transform-produce
  python -m chaos run --workload queue --client confluent --group-protocol consumer --nemesis kill,pause \
      --duration 60s --out out/kip848     # consumers in a KIP-848 group (subscribe; the broker assigns)
  python -m chaos run --workload metadata --client reference --target kafka --nemesis kill-controller \
      --duration 60s --out out/meta      # topics created, deleted, grown; leaders elected; Metadata from every broker
  python -m chaos run --schedule lossy --cluster-config min.insync.replicas=1 \
      --cluster-config unclean.leader.election.enable=true --duration 30s --out out/lossy
  python -m chaos run --bootstrap 127.0.0.1:9092 --control /tmp/c/control.sock --nemesis kill --out out/live
  python -m chaos run --schedule empty-epoch --duration 40s --out out/empty-epoch   # liveness after two failovers
  python -m chaos run --nemesis kill --duration 60s --seed 7 --dry-run      # print the schedule only
  python -m chaos proxy serve --api 127.0.0.1:8474
exit codes (run): 0 valid, 1 anomalies found, 2 could not run (bad options, unreachable cluster, interrupted)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any


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


def _kv(pairs: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise ValueError(f"{what} {pair!r}: expected key=value")
        out[k] = v
    return out


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .clients import parse_client_settings
    from .run import EXIT_NOT_RUN, RunError, RunOptions, parse_duration, plan_only, run

    try:
        opts = RunOptions(
            out=Path(args.out), duration=parse_duration(args.duration),
            rate=args.rate if args.rate is not None else (10.0 if args.workload == "metadata" else 200.0), seed=args.seed,
            nemeses=tuple(n for n in args.nemesis.split(",") if n and n != "none"), schedule=args.schedule,
            interval=parse_duration(args.interval), fault_duration=parse_duration(args.fault_duration),
            workload=args.workload, client=args.client, acks=-1 if args.acks == "all" else int(args.acks),
            commit=args.commit,
            sub_via=args.sub_via or ("subscribe" if args.group_protocol == "consumer" else "assign"),
            group_protocol=args.group_protocol, producers=args.producers, consumers=args.consumers,
            partitions=args.partitions, reset_prob=args.reset_prob, brokers=args.brokers,
            transformers=args.transformers, abort_prob=args.abort_prob,
            cluster_settings=_kv(args.cluster_config, "--cluster-config"), bootstrap=args.bootstrap,
            target=args.target, target_config=_kv(args.target_config, "--target-config"),
            docker_image=args.docker_image,
            allow_remote=args.allow_remote, client_extra=parse_client_settings(args.client_config),
            control=args.control, control_cmds=list(args.control_cmd), proxy_api=args.proxy_api, topology=args.topology, dry_run=args.dry_run,
            progress=not args.quiet, check_budget=args.budget, run_id=args.run_id)
        if opts.dry_run:
            for step in plan_only(opts):
                print(step.describe())
            if opts.control_cmds:
                _print_commands(opts)
            return 0
    except (RunError, ValueError) as e:
        print(f"chaos run: {e}", file=sys.stderr)
        return EXIT_NOT_RUN

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        res = run(opts)
    except (RunError, ValueError) as e:
        print(f"chaos run: {e}", file=sys.stderr)
        return EXIT_NOT_RUN
    except KeyboardInterrupt:
        print("chaos run: interrupted; every fault was undone", file=sys.stderr)
        return EXIT_NOT_RUN
    except Exception as e:  # noqa: BLE001 - could not run: say why, exit 2 (never 1)
        print(f"chaos run: could not run: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_NOT_RUN
    finally:
        signal.signal(signal.SIGTERM, old)
    v = res.verdict or {}
    print(f"run {res.run_id}: {res.stats}")
    print(f"history: {res.history}")
    if res.recovery:
        print(f"ISR after the faults: {'every replica back' if res.recovery.get('recovered') else 'NOT recovered'} "
              f"(waited {res.recovery.get('waited_s')} s; missing {res.recovery.get('missing')})")
    if res.final:
        print(f"final read: complete={res.final.get('complete')} ends={res.final.get('ends')}")
    if v.get("anomalies"):
        a = v["anomalies"]
        print(f"verdict: {'VALID' if v.get('valid') else 'INVALID'}")
        for name, n in sorted(a.get("counts", {}).items()):
            tag = "" if name in a.get("bad", []) else " (acceptable here)"
            print(f"  {name}: {n}{tag}")
            for case in a.get("cases", {}).get(name, [])[:2]:
                print(f"    {json.dumps(case, default=str)[:300]}")
        for m, lv in v.get("linearizability", {}).items():
            print(f"  linearizable {m}: {lv['verdict']} ({lv['parts']} parts)")
    elif v:
        print(f"verdict: could not check: {v.get('error', '')[-500:]}")
    if res.html:
        print(f"html: {res.html}")
    if res.message:
        print(f"note: {res.message}", file=sys.stderr)
    print(f"exit {res.exit_code} ({['valid', 'anomalies', 'could not run'][res.exit_code]})")
    return res.exit_code


def _print_commands(opts: Any) -> None:
    """The dry run of --control-cmd: every command each node's faults would run (none is run)."""
    from .remote import CommandTarget, ControlCommandError, parse_templates

    templates = parse_templates(opts.control_cmds)
    try:
        target = CommandTarget.discover(opts.bootstrap, templates, allow_remote=opts.allow_remote)
    except ControlCommandError as e:
        print(f"commands (not rendered: {e}):")
        for verb, template in templates.items():
            print(f"  {verb:8s} {template}")
        return
    print("commands each fault would run (dry run: none is run):")
    for line in target.plan_lines():
        print(f"  {line}")


def _add_run(sub: Any) -> None:
    r = sub.add_parser("run", help="run a workload under a nemesis and check the history",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__)
    r.add_argument("--workload", default="queue", choices=("queue", "txn", "metadata"),
                   help="queue (sends and polls) or txn (transactions of 1-4 sends, some aborted on purpose; "
                        "read_committed consumers; consume-transform-produce with offsets in the transaction: "
                        "--client reference, confluent or java; --rate counts transactions) or metadata (create, "
                        "delete, grow topics, elect leaders, read Metadata from every broker: --client reference; "
                        "--rate counts admin requests, default 10; producers + consumers - 1 workers)")
    r.add_argument("--nemesis", default="kill,pause",
                   help="comma-separated faults: kill, pause, restart, partition, latency, kafka-error, "
                        "isolate-leader, isolate-controller, kill-controller, pause-controller, majority-minority, "
                        "bridge, stall-followers, kill-leader, kill-follower, refuse-produce, delete-consumed; "
                        "'none' for a fault-free run")
    r.add_argument("--schedule", default="random", choices=("random", "lossy", "empty-epoch", "behind-log-start"),
                   help="random: a seeded fault every --interval; lossy: stall followers, kill the leader; "
                        "empty-epoch: refuse produce, kill the leader twice (the second led an epoch with no "
                        "write); behind-log-start: kill a follower, delete consumed records past its log end "
                        "(chaos/scenarios.py). Every run ends by waiting for every replica to rejoin the ISR")
    r.add_argument("--duration", default="60s", help="workload duration (60s, 2m, ...)")
    r.add_argument("--interval", default="10s", help="time between fault starts")
    r.add_argument("--fault-duration", default="5s", help="how long each fault lasts")
    r.add_argument("--rate", type=float, default=None,
                   help="sends per second over all producers (default 200; metadata: requests per second, 10)")
    r.add_argument("--seed", type=int, default=0, help="seed: the same seed replays the same fault schedule")
    r.add_argument("--out", default="out/chaos", help="directory for the history, verdict and HTML page")
    r.add_argument("--run-id", default=None)
    r.add_argument("--client", default="kafka-python", choices=("reference", "confluent", "kafka-python", "java"))
    r.add_argument("--acks", default="all", choices=("all", "1", "-1"))
    r.add_argument("--commit", default="sync", choices=("sync", "async", "auto"))
    r.add_argument("--sub-via", default=None, choices=("assign", "subscribe"),
                   help="queue: how consumers get partitions (default assign; subscribe with --group-protocol consumer)")
    r.add_argument("--group-protocol", default="classic", choices=("classic", "consumer"),
                   help="the consumers' group protocol: classic or consumer (KIP-848, server-side assignment; "
                        "--client confluent or java)")
    r.add_argument("--producers", type=int, default=2)
    r.add_argument("--consumers", type=int, default=2)
    r.add_argument("--partitions", type=int, default=2)
    r.add_argument("--transformers", type=int, default=1, help="txn: consume-transform-produce processes")
    r.add_argument("--abort-prob", type=float, default=0.2, help="txn: share of transactions aborted on purpose")
    r.add_argument("--reset-prob", type=float, default=0.0, help="per poll: tear the consumer down and reopen it")
    r.add_argument("--target", default="reference", choices=("reference", "kafka", "tansu", "docker"),
                   help="the cluster started here: reference (default), kafka (Apache Kafka from Maven Central), "
                        "tansu, docker; --bootstrap instead runs against a live cluster")
    r.add_argument("--target-config", action="append", default=[], metavar="KEY=VALUE",
                   help="target option, as for the suites (e.g. version=4.1.2, controllers=3, storage=s3)")
    r.add_argument("--docker-image", default=None, help="image for --target docker (e.g. build:kafka)")
    r.add_argument("--brokers", type=int, default=3, help="brokers of the cluster started here")
    r.add_argument("--cluster-config", action="append", default=[], metavar="KEY=VALUE",
                   help="broker setting (Kafka's names) of the cluster started here, e.g. min.insync.replicas=1")
    r.add_argument("--bootstrap", help="HOST:PORT of a live cluster instead of starting one")
    r.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --bootstrap")
    r.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                   help="client security settings passed through: security.protocol, sasl.*, ssl.*")
    r.add_argument("--control", help="live reference cluster's CONTROL socket (allows process faults)")
    r.add_argument("--control-cmd", action="append", default=[], metavar="VERB=COMMAND",
                   help="process faults on a live cluster as shell command templates, one per verb (kill, pause, "
                        "resume, restart) with {node}, {host}, {port}: e.g. 'kill=ssh {host} sudo systemctl kill -s "
                        "KILL kafka'; shown by --dry-run; brokers off loopback need --allow-remote")
    r.add_argument("--proxy-api", help="Toxiproxy API HOST:PORT whose proxies network faults may switch")
    r.add_argument("--topology", help='JSON file {"c->b1": "proxy-name", ...}: which proxy carries which link')
    r.add_argument("--budget", type=float, default=10.0, help="linearizability budget per partition, seconds")
    r.add_argument("--dry-run", action="store_true", help="print the fault schedule and exit")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.set_defaults(fn=_run)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_run(sub)
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
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # client chatter during faults drowns the progress line
    args = build_parser().parse_args(argv)
    return int(args.fn(args))
