"""``python -m reports SUBCOMMAND``: check histories, run the Spark job, convert to and from Jepsen EDN.

Subcommands register themselves in :data:`SUBCOMMANDS` (name -> (help, add_arguments, run)); add one by
appending there. Exit codes are in :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from history.schema import HistoryError

EXIT_CODES = """exit codes:
  0  valid: every run checked, no anomaly these settings forbid, every linearizability part ok
  1  anomalies found: some run is invalid (an anomaly or an illegal linearizability verdict the history proves)
  2  could not check: bad arguments, unreadable or empty input, a linearizability budget exhausted (unknown),
     or with --skip-corrupt only anomalies that rest on the absence of an operation (lost-write, unseen,
     poll-skip, nonmonotonic-poll, a linearizability counterexample), which skipped lines may have held
     (indeterminate); or an internal error; a crash is never 1"""


def _add_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="history file (.jsonl, .jsonl.gz, .parquet)")
    p.add_argument("--budget", type=float, default=10.0, help="linearizability time budget per part, seconds")
    p.add_argument("--skip-corrupt", action="store_true", help="skip corrupt lines with a warning")
    p.add_argument("--cases", type=int, default=8, help="cases shown per anomaly")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--jobs", type=int, default=1, help="processes for linearizability parts")


def _run_check(args: argparse.Namespace) -> int:
    from history import read
    from reports.analysis import run_checks, verdict_of
    from reports.anomalies import RESTS_ON_ABSENCE
    from reports.linearizability import UNKNOWN
    from reports.txn import TXN_ANOMALIES, describe

    if args.budget <= 0:
        raise HistoryError("--budget must be positive")
    status = 0
    unknown = indeterminate = False
    out = []
    runs = read(args.path, skip_corrupt=args.skip_corrupt)
    if not runs:
        empty = os.path.isfile(args.path) and os.path.getsize(args.path) == 0
        raise HistoryError("no runs: the file is empty (0 bytes)" if empty else "no runs in this file",
                           path=args.path)
    for h in runs:
        res, lin_res = run_checks(h, args.budget, args.jobs)
        lin = {name: {
            "verdict": r.verdict,
            "parts": len(r.parts),
            "illegal": [{"key": str(p.key), "counterexample": p.counterexample} for p in r.illegal_parts],
            "unknown": [str(p.key) for p in r.parts if p.verdict == "unknown"],
        } for name, r in lin_res.items()}
        v = verdict_of(h, res.counts, {name: x["verdict"] for name, x in lin.items()}, len(h.op_view()))
        status = max(status, 1 if v.status == "invalid" else 0)
        indeterminate = indeterminate or v.status == "indeterminate"
        unknown = unknown or any(x["verdict"] == UNKNOWN for x in lin.values())
        out.append({"run_id": h.run_id, "target": h.target, "nemesis": h.nemesis, "ops": len(h.op_view()),
                    "valid": v.valid, "status": v.status, "indeterminate": v.indeterminate,
                    "skipped_lines": v.skipped_lines, "anomalies": res.summary(args.cases), "linearizability": lin})
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    else:
        for r in out:
            a = r["anomalies"]
            if not r["ops"]:
                print(f"run {r['run_id']} ({r['target']}): no operations")
                continue
            print(f"run {r['run_id']} ({r['target']}, {r['ops']} ops): {r['status'].upper()}")
            if r["skipped_lines"]:
                print(f"  skipped lines: {_lines(r['skipped_lines'])}; anomalies that rest on the absence of an "
                      f"operation cannot be proven from this file")
            for name, n in sorted(a["counts"].items()):
                tag = "" if name in a["bad"] else (
                    f" (indeterminate: {RESTS_ON_ABSENCE[name]})" if name in r["indeterminate"] else " (acceptable here)")
                print(f"  {name}: {n}{tag}")
                for case in a["cases"][name][:3]:
                    card = describe(name, case) if name in TXN_ANOMALIES else None  # (txn cases: whole ops)
                    if card:
                        print(f"    {card}")
                        continue
                    brief = {k: v for k, v in case.items() if k in ("key", "why", "value", "values", "offset", "offsets",
                                                                    "delta", "skipped", "index")}
                    print(f"    {json.dumps(brief, default=str)}")
            for m, v in r["linearizability"].items():
                tag = " (indeterminate: a skipped operation may linearize it)" if (
                    f"linearizable/{m}" in r["indeterminate"]) else ""
                print(f"  linearizable {m}: {v['verdict']} ({v['parts']} parts){tag}")
                for bad in v["illegal"][:3]:
                    cex = bad["counterexample"]
                    print(f"    {bad['key']}: fails at {cex['failing']['op']} "
                          f"(after {cex['prefix_completions']} completions); window:")
                    for w in cex["window"][:10]:
                        print(f"      p{w['client']} [{w['call']}..{w['ret']}] {w['op']}")
    if status == 0 and indeterminate:
        print("indeterminate: the only anomalies found rest on the absence of operations, and lines were skipped: "
              "could not check", file=sys.stderr)
        return 2
    if status == 0 and unknown:
        print("some linearizability parts are unknown (budget exhausted): could not check", file=sys.stderr)
        return 2
    return status


def _lines(numbers: list[int], most: int = 20) -> str:
    shown = ", ".join(str(n) for n in numbers[:most])
    return shown + (f" and {len(numbers) - most} more" if len(numbers) > most else "")


def _add_spark(p: argparse.ArgumentParser) -> None:
    from reports.spark_job import add_arguments

    add_arguments(p)


def _run_spark(args: argparse.Namespace) -> int:
    from reports.spark_job import run_from_args

    res = run_from_args(args)
    if any(r["status"] == "invalid" for r in res.runs):
        return 1
    unknown = any("unknown" in (r["lin_partition_log"], r["lin_committed_offsets"], r["lin_topic_metadata"])
                  for r in res.runs)
    indeterminate = any(r["status"] == "indeterminate" for r in res.runs)
    return 2 if res.errors or unknown or indeterminate else 0


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="history file")
    p.add_argument("--out", required=True, help="EDN file to write (one per run: RUN_ID is appended if several)")


def _run_export(args: argparse.Namespace) -> int:
    from history import read
    from history.edn import export_edn

    runs = read(args.path)
    for h in runs:
        target = args.out if len(runs) == 1 else f"{os.path.splitext(args.out)[0]}-{h.run_id}.edn"
        export_edn(h, target)
        print(target)
    return 0


def _add_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="Jepsen Kafka history.edn")
    p.add_argument("--out", required=True, help="history file to write (.jsonl or .parquet)")
    p.add_argument("--run-id", default="jepsen")
    p.add_argument("--topic", default="jepsen", help="topic that Jepsen's integer keys become partitions of")


def _run_import(args: argparse.Namespace) -> int:
    from history import write_jsonl, write_parquet
    from history.edn import import_jepsen

    if not os.path.isfile(args.path):
        raise HistoryError("no such file", path=args.path)
    h = import_jepsen(args.path, run_id=args.run_id, topic=args.topic)
    (write_parquet if args.out.endswith(".parquet") else write_jsonl)(h, args.out)
    print(f"{len(h.ops)} operations -> {args.out}")
    return 0


def _add_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="directory for generated histories")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--ops", type=int, default=1000, help="operations per run")
    p.add_argument("--anomaly-every", type=int, default=0, help="add a one-anomaly scenario to every Nth run")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--seed", type=int, default=0)


def _run_generate(args: argparse.Namespace) -> int:
    from history import write_jsonl, write_parquet
    from reports import synth

    if args.runs < 1 or args.ops < 1:
        raise HistoryError("--runs and --ops must be positive")
    os.makedirs(args.out, exist_ok=True)
    for i in range(args.runs):
        h = synth.generate(f"run-{i:05d}", seed=args.seed + i, n_ops=args.ops,
                           target=("reference", "tansu", "docker")[i % 3],
                           nemesis=("kill", "partition", "pause", None)[i % 4])
        if args.anomaly_every and i % args.anomaly_every == 0:
            h = synth.with_anomaly(h, synth.SCENARIOS[(i // args.anomaly_every) % len(synth.SCENARIOS)])
        path = os.path.join(args.out, f"run-{i:05d}.{args.format}")
        (write_parquet if args.format == "parquet" else write_jsonl)(h, path)
    print(f"{args.runs} runs in {args.out}")
    return 0


SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "check": ("check one history file: anomalies and linearizability", _add_check, _run_check),
    "spark": ("check many runs with Spark and write Parquet tables + HTML", _add_spark, _run_spark),
    "export-edn": ("export a history as Jepsen EDN", _add_export, _run_export),
    "import-jepsen": ("import a Jepsen Kafka history.edn", _add_import, _run_import),
    "run-page": ("HTML page of one chaos run: fault timeline over throughput/latency, verdict",
                 lambda p: __import__("reports.run_page").run_page.add_arguments(p),
                 lambda a: __import__("reports.run_page").run_page.run_from_args(a)),
    "generate": ("write generated (synthetic) histories, for demos and benchmarks", _add_generate, _run_generate),
}



def _add_conformance(p: argparse.ArgumentParser) -> None:
    from reports.conformance_report import add_arguments

    add_arguments(p)


def _run_conformance(args: argparse.Namespace) -> int:
    from reports.conformance_report import run

    return run(args)


SUBCOMMANDS["conformance"] = ("conformance results JSON (one per target run) -> one static HTML page",
                              _add_conformance, _run_conformance)


def _add_diff(p: argparse.ArgumentParser) -> None:
    from reports.diff_page import add_arguments

    add_arguments(p)


def _run_diff(args: argparse.Namespace) -> int:
    from reports.diff_page import run

    return run(args)


SUBCOMMANDS["diff"] = ("differential report JSON (python -m conformance.diff) -> one static HTML page", _add_diff,
                       _run_diff)

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__.splitlines()[0],
                                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_, add, run) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, epilog=EXIT_CODES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        add(p)
        p.set_defaults(func=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; returns its exit code (:data:`EXIT_CODES`: anything unexpected is 2, never 1)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except HistoryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except RecursionError:
        print("error: input nested too deeply to check", file=sys.stderr)
        return 2
    except Exception:  # a crash is "could not check", not a verdict about the system
        import traceback

        traceback.print_exc()
        print("error: internal error (above): could not check", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
