"""The reference broker against Apache Kafka, measured in the same run: every figure a ratio reference ÷ Kafka.

Issue 17's benchmark. Both targets are started through fixtures (`make_target("reference" | "kafka")`), the
reference broker durable (as Kafka is), with the same broker settings by Kafka's names; each repeat starts every
target afresh and alternates which goes first, and each figure is the median over the repeats (the machine may
be shared: the load average is recorded before and after).

One node per target (RF=1):
- start-up: from start() (for Kafka that includes `kafka-storage format` of each node, a short JVM run) until
  every broker answers Metadata naming every broker and a controller;
- produce / consume msgs/s of 100-byte records with confluent-kafka, acks=all, 3 partitions (after an untimed
  warm-up of a fifth as many records on a topic of their own: the JVM compiles its hot paths first);
- parked-fetch wake p99 (a Produce's answer to the parked Fetch's answer) and max_wait error p99 (answer time
  minus a 100 ms max_wait on an idle partition), over the reference client's timed connection;
- rebalance after a member leaves or dies, for 2, 10 and 50 members (reference client GroupConsumer).
Three nodes per target (the reference: a controller and 3 broker processes; Kafka: 3 combined KRaft nodes):
- start-up, as above;
- produce / consume msgs/s with RF=3, acks=all, min.insync.replicas=2;
- kill -9 of a partition leader (`--kills` in all, spread over the repeats, pooled for p50/p99): time to a new
  leader in Metadata, and the longest gap an acks=all producer's acknowledgements and a consumer's records show;
- RSS of every node process after writing `--rss-gb` GB at RF=3 (10 KB records).

    .venv/bin/python benchmarks/bench_vs_kafka.py                 # the full comparison (see --help for sizes)
    .venv/bin/python benchmarks/bench_vs_kafka.py --quick         # smoke run: small sizes, one repeat
    .venv/bin/python benchmarks/bench_vs_kafka.py --repeat 3 --only throughput,latency

Writes benchmarks/results/bench_vs_kafka.json (every sample, the medians, the ratios) and bench_vs_kafka.md (the
table), `.quick.` in both names for --quick. Every broker is stopped at the end, also on Ctrl-C or SIGTERM, and
the run fails if any of its processes or ports outlives its target.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's fixtures/ and reference_broker/, not an installed copy

from benchmarks.measure import clients, failover, fetch, groups, nodes  # noqa: E402
from benchmarks.measure.stats import load_average, median  # noqa: E402
from fixtures import Target, make_target  # noqa: E402
from fixtures.net import cluster_view, parse_bootstrap  # noqa: E402

TARGETS = ("reference", "kafka")
PARTS = ("startup", "throughput", "latency", "groups", "failover", "rss")
# The same broker settings for both (Kafka's names). Group timings as benchmarks/bench_groups.py; a 3 s broker
# session (heartbeat 500 ms) so a killed leader is fenced in seconds on both, as in benchmarks/bench_cluster.py.
CLUSTER_SETTINGS = {"kafka.broker.session.timeout.ms": "3000", "kafka.broker.heartbeat.interval.ms": "500"}
RF3_TOPIC = {"min.insync.replicas": "2"}

FULL = {"records": 500_000, "records_rf3": 200_000, "samples": 300, "kills": 20, "sizes": "2,10,50", "rss_gb": 1.0,
        "repeat": 3}
QUICK = {"records": 20_000, "records_rf3": 5_000, "samples": 20, "kills": 2, "sizes": "2,10", "rss_gb": 0.02,
         "repeat": 1}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def target_config(name: str, brokers: int) -> dict[str, str]:
    """--target-config of one side: brokers, and the group (and for 3 nodes, session) settings for both."""
    cfg = {"brokers": str(brokers), **groups.BROKER_SETTINGS}
    if brokers > 1:
        cfg.update(CLUSTER_SETTINGS)
    return cfg


def ready(target: Target, brokers: int, timeout: float = 120.0) -> None:
    """Every bootstrap broker's Metadata names `brokers` brokers and a controller: what a client needs."""
    deadline = time.monotonic() + timeout
    for host, port in parse_bootstrap(target.bootstrap):
        while True:
            try:
                view = cluster_view(host, port, timeout=2.0)
                if len(view.brokers) >= brokers and view.controller_id >= 0:
                    break
            except Exception:  # noqa: BLE001 - not answering yet: ask again until the deadline
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target.name}: {host}:{port} did not name {brokers} brokers and a controller")
            time.sleep(0.02)


@contextmanager
def session(name: str, brokers: int, work: Path, leftovers: list[str]) -> Iterator[tuple[Target, float]]:
    """A started target and its start-up time; stopped on the way out (also on Ctrl-C), its data deleted, its
    processes and ports checked gone (anything left is recorded in `leftovers`)."""
    work.mkdir(parents=True, exist_ok=True)
    target = make_target(name, config=target_config(name, brokers), work_dir=work)
    t0 = time.monotonic()
    pids: dict[str, int] = {}
    bootstrap = ""
    try:
        target.start()
        bootstrap = target.bootstrap
        ready(target, brokers)
        startup = time.monotonic() - t0
        pids = nodes.node_pids(target)
        log(f"{name} {brokers} node(s) ready in {startup:.1f} s: {bootstrap}")
        yield target, startup
    finally:
        if target.running:
            pids.update(nodes.node_pids(target))     # a restarted node has a new PID: stop() must end it too
        target.stop()
        left = nodes.leftovers(pids, bootstrap) if bootstrap else []
        leftovers.extend(f"{name} {brokers} node(s): {x}" for x in left)
        for data in [p for p in work.rglob("data") if p.is_dir()]:
            shutil.rmtree(data, ignore_errors=True)   # the logs stay, the (GBs of) records go


def one_node(target: Target, args: argparse.Namespace, r: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "throughput" in args.only:
        out["throughput"] = clients.throughput(target.bootstrap, args.records, topic=f"rf1-{r}",
                                               warmup=args.records // 5)
        log(f"  RF=1 {out['throughput']}")
    if "latency" in args.only:
        out["latency"] = fetch.latencies(target.bootstrap, args.samples, topic=f"lat-{r}")
        log(f"  latency {out['latency']}")
    if "groups" in args.only:
        out["groups"] = groups.rebalances(target.bootstrap, args.sizes, log=lambda row: log(f"  group {row}"))
    return out


def three_nodes(target: Target, args: argparse.Namespace, r: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "throughput" in args.only:
        out["throughput"] = clients.throughput(target.bootstrap, args.records_rf3, topic=f"rf3-{r}", rf=3,
                                               topic_config=RF3_TOPIC, warmup=args.records_rf3 // 5)
        log(f"  RF=3 {out['throughput']}")
    kills = args.kills // args.repeat + (1 if r < args.kills % args.repeat else 0)
    if "failover" in args.only and kills:
        out["failover"] = failover.failover(target, kills, topic=f"fo-{r}", log=log)
    if "rss" in args.only and args.rss_gb > 0:
        out["rss"] = clients.rss_while_writing(target.bootstrap, nodes.node_pids(target), args.rss_gb,
                                               topic=f"rss-{r}", rf=3)
        log(f"  RSS {out['rss']}")
    return out


# ---------------------------------------------------------------------------------------------------- figures
# (key, label, unit, better): better is "higher" or "lower"; the ratio is always reference ÷ Kafka.
Metric = tuple[str, str, str, str]


def figures_of(run: dict[str, Any]) -> dict[str, float | None]:
    """One repeat of one target, flattened to metric key -> value (the keys METRICS names)."""
    f: dict[str, float | None] = {}
    for n in ("1", "3"):
        part = run.get(f"{n}node", {})
        if "startup_s" in part:
            f[f"startup_{n}node_s"] = part["startup_s"]
        rf = "rf1" if n == "1" else "rf3"
        if "throughput" in part:
            f[f"produce_{rf}_msgs_s"] = part["throughput"]["produce_msgs_s"]
            f[f"consume_{rf}_msgs_s"] = part["throughput"]["consume_msgs_s"]
    one, three = run.get("1node", {}), run.get("3node", {})
    if "latency" in one:
        lat = one["latency"]
        f["wake_p99_ms"] = lat["wake_ack_to_answer_ms_p99"]
        f["wake_p50_ms"] = lat["wake_ack_to_answer_ms_p50"]
        f["max_wait_error_p99_ms"] = lat["max_wait_error_ms_p99"]
        f["max_wait_error_p50_ms"] = lat["max_wait_error_ms_p50"]
    for row in one.get("groups", []):
        for what in ("assigned_ms", "stable_ms"):
            f[f"rebalance_{row['event']}_{row['members']}_{what}"] = row.get(what)
    if "rss" in three:
        per = three["rss"]["per_node"]
        brokers = {k: v for k, v in per.items() if k != "controller"}
        f["rss_after_max_mb"] = max(v["after_mb"] for v in brokers.values())
        f["rss_peak_max_mb"] = max(v["peak_mb"] for v in brokers.values())
        if "controller" in per:
            f["rss_controller_after_mb"] = per["controller"]["after_mb"]
    return f


def metrics(sizes: list[int]) -> list[Metric]:
    rows: list[Metric] = [
        ("startup_1node_s", "start-up to ready, 1 node", "s", "lower"),
        ("startup_3node_s", "start-up to ready, 3 nodes", "s", "lower"),
        ("produce_rf1_msgs_s", "produce RF=1 acks=all, 100 B", "msg/s", "higher"),
        ("consume_rf1_msgs_s", "consume RF=1", "msg/s", "higher"),
        ("produce_rf3_msgs_s", "produce RF=3 acks=all, 100 B", "msg/s", "higher"),
        ("consume_rf3_msgs_s", "consume RF=3", "msg/s", "higher"),
        ("wake_p50_ms", "parked-fetch wake p50 (ack -> answer)", "ms", "lower"),
        ("wake_p99_ms", "parked-fetch wake p99 (ack -> answer)", "ms", "lower"),
        ("max_wait_error_p50_ms", "max_wait error p50 (100 ms)", "ms", "lower"),
        ("max_wait_error_p99_ms", "max_wait error p99 (100 ms)", "ms", "lower"),
    ]
    for key, label in (("to_leader_s", "kill -9 leader -> new leader in Metadata"),
                       ("producer_gap_s", "kill -9 leader: producer gap (acks=all)"),
                       ("consumer_gap_s", "kill -9 leader: consumer gap")):
        rows += [(f"failover_{key}_p50", f"{label} p50", "s", "lower"),
                 (f"failover_{key}_p99", f"{label} p99", "s", "lower")]
    for event in ("leave", "kill"):
        for n in sizes:
            rows.append((f"rebalance_{event}_{n}_assigned_ms", f"rebalance after {event}, {n} members (assigned)",
                         "ms", "lower"))
            rows.append((f"rebalance_{event}_{n}_stable_ms", f"rebalance after {event}, {n} members (Stable)",
                         "ms", "lower"))
    rows += [("rss_after_max_mb", "RSS per node after writing (max of nodes)", "MB", "lower"),
             ("rss_peak_max_mb", "RSS per node, peak while writing (max of nodes)", "MB", "lower"),
             ("rss_controller_after_mb", "RSS of the separate controller process", "MB", "lower")]
    return rows


def summarize(runs: list[dict[str, dict[str, Any]]], sizes: list[int]) -> dict[str, dict[str, Any]]:
    """Per metric: each target's samples over the repeats, their median, and the ratio reference ÷ Kafka.

    Failover figures are percentiles over every kill of every repeat (pooled), not medians of per-repeat ones."""
    per: dict[str, dict[str, list[float | None]]] = {}
    for run in runs:
        for name, res in run.items():
            for key, val in figures_of(res).items():
                per.setdefault(key, {}).setdefault(name, []).append(val)
    pooled: dict[str, dict[str, Any]] = {}
    for name in TARGETS:
        rows = [row for run in runs for row in run.get(name, {}).get("3node", {}).get("failover", [])]
        if rows:
            s = failover.summarize(rows)
            pooled[name] = s
            for key in ("to_leader_s", "producer_gap_s", "consumer_gap_s"):
                for q in ("p50", "p99"):
                    per.setdefault(f"failover_{key}_{q}", {})[name] = [s[key][q]]
    out: dict[str, dict[str, Any]] = {}
    for key, label, unit, better in metrics(sizes):
        if key not in per:
            continue
        meds = {name: median(per[key].get(name, [])) for name in TARGETS}
        ref, kafka = meds["reference"], meds["kafka"]
        ratio = round(ref / kafka, 3) if ref is not None and kafka and kafka > 0 and ref >= 0 else None
        out[key] = {"label": label, "unit": unit, "better": better, "median": meds, "ratio": ratio,
                    "samples": per[key]}
    if pooled:
        out["_failover_pooled"] = pooled
    return out


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def table(summary: dict[str, dict[str, Any]], header: str) -> str:
    """A markdown table: metric, unit, reference, Kafka, ratio reference ÷ Kafka, which way is better."""
    lines = [header, "", "| figure | unit | reference | Kafka | ref ÷ Kafka | better |", "|---|---|--:|--:|--:|---|"]
    for key, s in summary.items():
        if key.startswith("_"):
            continue
        ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}"
        lines.append(f"| {s['label']} | {s['unit']} | {_num(s['median']['reference'])} | "
                     f"{_num(s['median']['kafka'])} | {ratio} | {s['better']} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- main
def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=f"full defaults: {FULL}; --quick: {QUICK}")
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, one repeat")
    ap.add_argument("--repeat", type=int, help="repeats per target (each starts every target afresh)")
    ap.add_argument("--records", type=int, help="records for RF=1 throughput")
    ap.add_argument("--records-rf3", type=int, help="records for RF=3 throughput")
    ap.add_argument("--samples", type=int, help="parked fetches per repeat (max_wait fetches: max(20, 1/4))")
    ap.add_argument("--kills", type=int, help="leader kills per target in all, spread over the repeats")
    ap.add_argument("--sizes", help="group sizes, comma-separated")
    ap.add_argument("--rss-gb", type=float, help="GB written at RF=3 before RSS is read (0: skip)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {','.join(PARTS)} "
                    "(start-up is always measured)")
    ap.add_argument("--work-dir", type=Path, help="where the targets' logs go (default: a fresh temp dir, kept)")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/bench_vs_kafka[.quick].json; "
                    "the table beside it as .md)")
    args = ap.parse_args(argv)
    base = QUICK if args.quick else FULL
    for key, default in base.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]
    args.only = set(args.only.split(","))
    unknown = args.only - set(PARTS)
    if unknown or args.repeat < 1:
        ap.error(f"unknown part(s) {sorted(unknown)}" if unknown else "--repeat must be at least 1")
    if args.out is None:
        args.out = ROOT / "benchmarks" / "results" / f"bench_vs_kafka{'.quick' if args.quick else ''}.json"
    return args


def run(args: argparse.Namespace, work: Path, leftovers: list[str], runs: list[dict[str, Any]]) -> None:
    """Every repeat: each target on one node, then each on three, the order alternating between repeats."""
    steps: list[tuple[int, Callable[[Target, argparse.Namespace, int], dict[str, Any]]]] = []
    if args.only & {"startup", "throughput", "latency", "groups"}:
        steps.append((1, one_node))
    if args.only & {"startup", "throughput", "failover", "rss"}:
        steps.append((3, three_nodes))
    for r in range(args.repeat):
        runs.append({name: {} for name in TARGETS})
        order = TARGETS if r % 2 == 0 else TARGETS[::-1]
        for brokers, measure in steps:
            for name in order:
                log(f"repeat {r + 1}/{args.repeat}: {name}, {brokers} node(s); {load_average()}")
                with session(name, brokers, work / f"r{r}-{name}-{brokers}", leftovers) as (target, startup):
                    res = runs[-1][name].setdefault(f"{brokers}node", {"startup_s": round(startup, 3)})
                    res["version"] = target.version()
                    res.update(measure(target, args, r))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)      # `kill PID` stops the brokers as Ctrl-C does
    signal.signal(signal.SIGINT, signal.default_int_handler)   # also when started in the background (SIG_IGN)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-vs-kafka-"))
    leftovers: list[str] = []
    runs: list[dict[str, Any]] = []
    started = time.time()
    load_before = load_average()
    interrupted = error = None
    try:
        run(args, work, leftovers, runs)
    except KeyboardInterrupt as exc:
        interrupted = str(exc) or "Ctrl-C"
        log(f"interrupted ({interrupted}): brokers stopped")
    except Exception as exc:  # noqa: BLE001 - recorded with what was measured; the exit code says it failed
        error = f"{type(exc).__name__}: {exc}"
        log(f"failed: {error}")
    summary = summarize(runs, args.sizes)
    settings = {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()
                if k not in ("out", "work_dir")}
    result = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
              "wall_s": round(time.time() - started, 1), "settings": settings,
              "broker_settings": {"1 node": target_config("kafka", 1), "3 nodes": target_config("kafka", 3),
                                  "rf3_topic": RF3_TOPIC},
              "load": {"before": load_before, "after": load_average()}, "work_dir": str(work),
              "interrupted": interrupted, "error": error, "leftovers": leftovers, "figures": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    header = (f"reference ÷ Apache Kafka, medians over {args.repeat} repeat(s){' (quick)' if args.quick else ''}; "
              f"{result['started']}, {result['wall_s']:.0f} s; {load_before} before, {result['load']['after']} after")
    text = table(summary, header)
    args.out.with_suffix(".md").write_text(text)
    print(text)
    log(f"wrote {args.out} and {args.out.with_suffix('.md')}; logs in {work}")
    for x in leftovers:
        log(f"LEFT BEHIND: {x}")
    if interrupted:
        return 130
    return 1 if error or leftovers else 0


if __name__ == "__main__":
    raise SystemExit(main())
