"""The chaos matrix: targets × nemeses × clients × seeds, every history through the Spark job into one report, and
the findings written up the way a Jepsen analysis reports them.

    .venv/bin/python benchmarks/chaos_matrix.py --out out/matrix                       # the full matrix (hours)
    .venv/bin/python benchmarks/chaos_matrix.py --targets kafka --nemeses kill --clients confluent --seeds 1 \\
        --duration 20s --out out/matrix-smoke
    .venv/bin/python benchmarks/chaos_matrix.py --combine out/m-ref-kafka out/m-tansu --out out/matrix   # one report
    .venv/bin/python benchmarks/chaos_matrix.py --workload txn --targets reference,kafka \\
        --nemeses kill+pause+partition --no-lossy --out out/txn-matrix     # transactions, faults combined per cell
    .venv/bin/python benchmarks/chaos_matrix.py --group-protocol consumer --targets reference,kafka \\
        --nemeses kill,pause --clients confluent,java --seeds 1 --no-lossy --out out/kip848-matrix   # KIP-848 groups

Each cell is one `chaos run` (chaos/run.py) against a cluster the run starts itself, with Kafka's safe settings
(acks=all, min.insync.replicas=2, unclean.leader.election.enable=false): expected VALID — no acknowledged write
lost or duplicated. `--lossy` adds, per target and client, the lossy schedule with unclean election on and
min.insync.replicas=1 (stall the followers out of the ISR, kill the leader): expected to lose acknowledged writes
(lost-write or inconsistent-offsets) wherever the target can lose them. A nemesis a target cannot suffer (no
controller to isolate, no proxies) is a skipped cell with its reason, never a silent pass.

Output in --out: histories/ (JSONL + Parquet per run), runs/ (each run's page and result), spark/ (the Spark job's
aggregate: per target, nemesis and anomaly), matrix.json and matrix.md (one row per run: verdict, expected, sends,
faults applied, anomalies; then the findings: for every run whose verdict differs from its expectation, the
anomaly, the fault that preceded its first evidence, the minimal evidence and whether the settings allowed it).
Exit 0 when every cell ran and met its expectation, 1 otherwise.

A nemesis `a+b+c` is one cell whose run draws its faults from all three (chaos run's `--nemesis a,b,c`).
`--workload txn` runs the transactional workload (chaos/txn.py: transactions of 1-4 sends, some aborted on purpose,
read_committed consumers, consume-transform-produce) in every cell, expected VALID (no lost or duplicated committed
write, no aborted or uncommitted read, no torn transaction); its `--rate` counts transactions (default 20). The lossy
schedule is a queue-workload cell only. `--workload metadata` (chaos/metadata.py: topics created, deleted and grown,
preferred elections, Metadata from every broker; the reference client stack) is expected VALID too: no lost create,
phantom, shrunk partition count or stale broker view, the controller's answers linearizable per topic
(reports/metadata.py); its `--rate` counts admin requests (default 10).

    .venv/bin/python benchmarks/chaos_matrix.py --workload metadata --targets reference,kafka --seeds 1 \\
        --nemeses none,kill-controller,pause-controller,isolate-controller --out out/metadata-matrix

Target `reference-quorum` is the reference cluster with its controllers as a 3-voter Raft quorum (controllers=3,
voters 1000..1002), `kafka-dedicated` Kafka with 3 controller-only nodes; `kafka` is Kafka's 3 combined nodes:

    .venv/bin/python benchmarks/chaos_matrix.py --targets reference-quorum,kafka --seeds 1 --no-lossy \\
        --nemeses kill-controller,pause-controller --clients confluent,java --out out/quorum-matrix
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.run import RunError, RunOptions, parse_duration, run  # noqa: E402

DEFAULT_TARGETS = ("reference", "kafka", "tansu")
DEFAULT_NEMESES = ("kill", "pause", "partition", "kill-leader", "isolate-controller", "kill-storage", "pause-storage",
                   "isolate-storage")
STORAGE_NEMESES = ("kill-storage", "pause-storage", "isolate-storage")
DEFAULT_CLIENTS = ("confluent", "java")
UNSAFE = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
# Per target: the --target-config of the cluster each run starts (tansu: brokers over shared storage).
TARGET_CONFIG: dict[str, dict[str, str]] = {
    "reference": {},
    "kafka": {},
    "tansu": {"brokers": "3", "storage": "postgres"},
    # the reference cluster's controllers as a Raft quorum (3 dedicated voters, ids 1000..1002, KIP-595), so the
    # controller nemeses mean on it what they mean on Kafka's quorum
    "reference-quorum": {"controllers": "3"},
    "kafka-dedicated": {"controllers": "3"},   # Kafka with 3 controller-only nodes beside its 3 brokers
}
# Matrix target names that are a started target kind with a --target-config of their own (TARGET_CONFIG).
TARGET_KIND = {"reference-quorum": "reference", "kafka-dedicated": "kafka"}
# The lossy schedule pauses both followers; on Kafka in combined mode that also stalls two of the three controller
# voters, so the ISR cannot shrink (nothing is acknowledged by the leader alone): a controller of its own, as the
# reference cluster has, makes the schedule mean the same thing.
LOSSY_CONFIG: dict[str, dict[str, str]] = {"kafka": {"controllers": "1"}}
# Anomalies that are data loss under the lossy schedule (what "lost writes" means in Jepsen's Kafka analysis).
LOSS = {"lost-write", "inconsistent-offsets"}


@dataclass
class Cell:
    target: str
    nemesis: str          # a nemesis name, several joined by "+", or "lossy"
    client: str
    seed: int
    expect: str           # "valid" | "loss"
    skip: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    workload: str = "queue"
    group_protocol: str = "classic"   # the consumers' group protocol (consumer: KIP-848)

    @property
    def run_id(self) -> str:
        prefix = "" if self.workload == "queue" else f"{self.workload}-"
        suffix = "" if self.group_protocol == "classic" else f"-{self.group_protocol}"
        return f"{prefix}{self.target}-{self.nemesis}-{self.client}{suffix}-s{self.seed}"


def skip_reason(target: str, nemesis: str) -> str | None:
    """Why a target cannot suffer a nemesis (None: it can); a combination as soon as one of its parts cannot."""
    if "+" in nemesis:
        return next((r for part in nemesis.split("+") if (r := skip_reason(target, part))), None)
    if nemesis == "isolate-controller" and target == "tansu":
        return "Tansu has no controller: its brokers are stateless over shared storage"
    if nemesis in STORAGE_NEMESES and target != "tansu":
        return f"{target} keeps its log on each broker: no shared storage service to fault"
    return None


# What the lossy schedule can do to a target with no followers: Tansu's brokers are stateless over one shared store
# (no replicas, no ISR, no unclean election), so stall-followers stalls nobody and the schedule is a kill -9 of the
# broker the clients use, after which nothing acknowledged may be missing.
LOSSY_EXPECT = {"tansu": "valid"}


def cells(args: argparse.Namespace) -> list[Cell]:
    out = []
    for target in args.targets:
        for nemesis in args.nemeses:
            # the metadata workload speaks the protocol through the reference's client stack only
            for client in ("reference",) if args.workload == "metadata" else args.clients:
                for seed in range(args.seeds):
                    out.append(Cell(target, nemesis, client, seed, "valid", skip_reason(target, nemesis),
                                    workload=args.workload, group_protocol=getattr(args, "group_protocol", "classic")))
        if args.lossy and args.workload == "queue":
            for client in args.clients:
                for seed in range(args.seeds):
                    out.append(Cell(target, "lossy", client, seed, LOSSY_EXPECT.get(target, "loss")))
    return out


def options(cell: Cell, args: argparse.Namespace) -> RunOptions:
    lossy = cell.nemesis == "lossy"
    config = {**TARGET_CONFIG.get(cell.target, {}), **(LOSSY_CONFIG.get(cell.target, {}) if lossy else {})}
    return RunOptions(
        out=args.out / "histories", seed=cell.seed, duration=max(args.duration, 30.0) if lossy else args.duration,
        rate=args.rate if args.rate is not None else {"txn": 20.0, "metadata": 10.0}.get(cell.workload, 100.0),
        workload=cell.workload, schedule="lossy" if lossy else "random",
        nemeses=() if lossy else tuple(n for n in cell.nemesis.split("+") if n != "none"),
        interval=args.interval, fault_duration=args.fault_duration, client=cell.client,
        partitions=1 if lossy else 2, consumers=0 if lossy else 2,
        cluster_settings=dict(UNSAFE) if lossy else {}, target=TARGET_KIND.get(cell.target, cell.target),
        target_config=config,
        run_id=cell.run_id, progress=False, check_budget=10, group_protocol=cell.group_protocol,
        # KIP-848 needs group membership; classic cells assign, as before
        sub_via="subscribe" if cell.group_protocol == "consumer" else "assign")


def _run_child(opts: RunOptions, out: Any) -> None:
    try:
        res = run(opts)
    except (RunError, Exception) as exc:  # noqa: BLE001 - a cell that could not run is reported, not fatal
        out.put({"exit": 2, "error": f"{type(exc).__name__}: {exc}"})
        return
    verdict = res.verdict or {}
    anomalies = verdict.get("anomalies", {})
    out.put({
        "exit": res.exit_code, "stats": res.stats, "message": res.message,
        "history": str(res.history) if res.history else None,
        "counts": anomalies.get("counts", {}), "bad": anomalies.get("bad", []),
        "cases": {k: v[:1] for k, v in anomalies.get("cases", {}).items()},
        "final": res.final,
    })


def run_cell(cell: Cell, args: argparse.Namespace) -> None:
    """One cell in a child process with a deadline: a client stack that deadlocks holding the GIL (seen:
    confluent-kafka 2.16.1's Consumer.assignment() waiting on librdkafka's main thread, itself waiting on a lock)
    freezes every thread of its process, so only another process can end the cell; the cluster it started dies
    with the child (the supervisor's watchdog)."""
    t0 = time.monotonic()
    opts = options(cell, args)
    deadline = getattr(args, "cell_deadline", None) or 3 * opts.duration + 420.0   # start, faults, recovery, read
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_run_child, args=(opts, out), name=cell.run_id)
    child.start()
    result: dict[str, Any] | None = None
    while result is None and child.is_alive() and time.monotonic() - t0 < deadline:
        try:
            result = out.get(timeout=1.0)
        except queue.Empty:
            continue
    if result is None:
        try:
            result = out.get(timeout=1.0)
        except queue.Empty:
            result = None
    if result is None:
        hung = child.is_alive()
        if hung:
            child.kill()
        child.join(30)
        result = {"exit": 2, "error": (f"the cell did not finish within {deadline:.0f} s: killed (a client stack or "
                                       "the cluster stopped answering)") if hung else
                  f"the cell's process ended (exit {child.exitcode}) without a result"}
    else:
        child.join(60)
    result["wall_s"] = round(time.monotonic() - t0)
    cell.result = result


# The matrix's producers run without idempotence (retries=0, enable.idempotence=false): Kafka promises no duplicates
# only to idempotent producers (KIP-98), so a client that sends a record twice (librdkafka re-sends to a new leader
# without counting retries=0) duplicates it on any broker. Such a run is as expected when its only anomaly is the
# duplicate: the checker places a read of a duplicated value at the copy it read and reports the value once, as a
# duplicate (issue 24), so a consumer that read both copies is no skip or step back, and one that is, is a finding.
def only_client_duplicates(cell: Cell) -> bool:
    """Whether the run's only anomaly is duplicate. A result recorded by the checker before issue 24 listed, beside
    a duplicate, the poll-order cases that only its second copy made: for such a result the run's history is
    checked again (a result with other anomalies, or without its history, is not)."""
    r = cell.result
    bad = set(r.get("bad", []))
    if r.get("exit") != 1 or "duplicate" not in bad:
        return False
    if bad == {"duplicate"}:
        return True
    if not bad <= _OLD_DUPLICATE_NOISE or not r.get("history") or not Path(r["history"]).exists():
        return False
    return {str(a) for a in _recheck(Path(r["history"]))} == {"duplicate"}


# what the checker before issue 24 also reported for a duplicated value a consumer read at both offsets
_OLD_DUPLICATE_NOISE = {"duplicate", "int-nonmonotonic-poll", "int-poll-skip", "nonmonotonic-poll", "poll-skip",
                        "nonmonotonic-send"}


def _recheck(history: Path) -> set[str]:
    """The anomalies the checker finds in a run's history file now, beyond what its settings accept."""
    from history import read
    from reports.checkers import analyze

    return {a for h in read(str(history)) for a in analyze(h.op_view(), h.settings, h.columns).bad}


def met(cell: Cell) -> bool:
    r = cell.result
    if cell.skip:
        return True
    if cell.expect == "valid":
        return r.get("exit") == 0 or only_client_duplicates(cell)
    return r.get("exit") == 1 and bool(LOSS & set(r.get("bad", [])))


def faults_of(history: Path) -> list[dict[str, Any]]:
    """The nemesis transitions of a run, in order (for 'the fault that preceded it')."""
    out = []
    for line in history.read_text().splitlines()[1:]:
        op = json.loads(line)
        if op.get("f") == "nemesis" and op.get("type") == "info":
            out.append({"index": op["index"], "time_ns": op["time_ns"], **op["value"]})
    return out


def finding(cell: Cell) -> dict[str, Any] | None:
    """A Jepsen-style write-up of a cell whose verdict is not the expected one (or of a loss, which is always
    worth reading): the anomaly, the fault in effect or last ended before its first evidence, the minimal
    evidence, and whether the run's settings allowed it."""
    r = cell.result
    if cell.skip or not r.get("counts"):
        return None
    history = Path(r["history"]) if r.get("history") else None
    faults = faults_of(history) if history and history.exists() else []
    dup_only = only_client_duplicates(cell)
    out = {"run": cell.run_id, "target": cell.target, "nemesis": cell.nemesis, "client": cell.client,
           "expected": cell.expect, "met": met(cell), "anomalies": [],
           **({"note": "idempotence off: the client sent these values twice (Kafka promises no duplicates only to "
                       "idempotent producers, KIP-98)"} if dup_only else {})}
    for name, count in sorted(r["counts"].items()):
        case = (r.get("cases", {}).get(name) or [{}])[0]
        first = _first_index(case)
        before = [f for f in faults if first is not None and f["index"] < first]
        out["anomalies"].append({
            # Kafka promises no durability once unclean election may pick a replica outside the ISR: a loss there is
            # what the settings allow, though the checker (which knows no Kafka settings) flags it
            "anomaly": name, "count": count,
            "allowed_by_settings": (name not in r.get("bad", []) or (name in LOSS and cell.nemesis == "lossy")
                                    or dup_only),
            "preceding_fault": ({k: before[-1].get(k) for k in ("fault", "phase", "id", "broker", "leader",
                                                                 "controller_id", "components") if k in before[-1]}
                                if before else None),
            "evidence": case})
    return out


def _first_index(case: dict[str, Any]) -> int | None:
    """The history index of the earliest operation a case cites as evidence."""
    found: list[int] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("index"), int) and "f" in x:
                found.append(x["index"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(case)
    return min(found) if found else None


def write_tables(all_cells: list[Cell], out: Path, spark: dict[str, Any]) -> None:
    findings = [f for f in (finding(c) for c in all_cells) if f]
    doc = {"cells": [{"run": c.run_id, "target": c.target, "nemesis": c.nemesis, "client": c.client,
                      "workload": c.workload, "group_protocol": c.group_protocol, "seed": c.seed, "expect": c.expect, "skip": c.skip, "met": met(c), **c.result}
                     for c in all_cells], "findings": findings, "spark": spark}
    (out / "matrix.json").write_text(json.dumps(doc, indent=1, default=str))
    lines = ["| run | expected | verdict | sends ok/fail/info | faults (failed) | anomalies | wall s |",
             "|---|---|---|---|---|---|---|"]
    for c in all_cells:
        r = c.result
        if c.skip:
            lines.append(f"| {c.run_id} | {c.expect} | skipped: {c.skip} | | | | |")
            continue
        s = r.get("stats", {})
        verdict = {0: "valid", 1: "anomalies", 2: "could not run"}.get(r.get("exit"), "?")
        mark = "" if met(c) else " **(unexpected)**"
        lines.append(f"| {c.run_id} | {c.expect} | {verdict}{mark} | {s.get('ok')}/{s.get('fail')}/{s.get('info')} "
                     f"| {s.get('faults')} ({s.get('faults_failed')}) | {r.get('counts') or ''} "
                     f"{r.get('error', '')} | {r.get('wall_s')} |")
    lines += ["", "## Findings", ""]
    if not findings:
        lines.append("No anomalies in any run.")
    for f in findings:
        lines.append(f"### {f['run']} (expected {f['expected']}; {'as expected' if f['met'] else 'UNEXPECTED'})")
        if f.get("note"):
            lines.append(f"- {f['note']}")
        for a in f["anomalies"]:
            lines.append(f"- **{a['anomaly']}** × {a['count']} — "
                         f"{'allowed by the run settings' if a['allowed_by_settings'] else 'not allowed by the settings'}"
                         f"; preceding fault: `{json.dumps(a['preceding_fault'])}`")
            lines.append(f"  - evidence: `{json.dumps(a['evidence'], default=str)[:700]}`")
    (out / "matrix.md").write_text("\n".join(lines) + "\n")


def spark_job(out: Path) -> dict[str, Any]:
    hist = out / "histories"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "reports", "spark", "--histories", str(hist / "*.jsonl"),
                        "--out", str(out / "spark")], capture_output=True, text=True)
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0), "report": str(out / "spark" / "report.html"),
            "tail": (p.stdout + p.stderr).strip().splitlines()[-3:]}


def load_cells(out: Path) -> list[Cell]:
    """The cells of an earlier matrix run (its matrix.json), results included."""
    doc = json.loads((out / "matrix.json").read_text())
    cells = []
    for row in doc["cells"]:
        c = Cell(row["target"], row["nemesis"], row["client"], row["seed"], row["expect"], row.get("skip"),
                 workload=row.get("workload", "queue"), group_protocol=row.get("group_protocol", "classic"))
        c.result = {k: v for k, v in row.items()
                    if k not in ("run", "target", "nemesis", "client", "workload", "group_protocol", "seed", "expect",
                                 "skip", "met")}
        cells.append(c)
    return cells


def combine(parts: list[Path], out: Path) -> int:
    """One report from matrix runs made separately (e.g. one target at a time): their cells in one table, their
    histories in out/histories, one Spark job over all of them. A run id in two parts keeps the later part's."""
    (out / "histories").mkdir(parents=True, exist_ok=True)
    by_id: dict[str, Cell] = {}
    for part in parts:
        for c in load_cells(part):
            by_id[c.run_id] = c
        for f in (part / "histories").glob("*"):
            if f.is_file() and not (out / "histories" / f.name).exists():
                shutil.copy2(f, out / "histories" / f.name)
    todo = list(by_id.values())
    spark = spark_job(out)
    write_tables(todo, out, spark)
    bad = [c.run_id for c in todo if not met(c)]
    print(f"combined {len(parts)} matrix runs: {len(todo)} cells, {len(bad)} not as expected {bad[:10]}; "
          f"spark exit {spark['exit']}: {out / 'matrix.md'}")
    return 1 if bad or spark["exit"] not in (0, 1) else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=lambda s: tuple(s.split(",")), default=DEFAULT_TARGETS)
    ap.add_argument("--nemeses", type=lambda s: tuple(s.split(",")), default=DEFAULT_NEMESES)
    ap.add_argument("--clients", type=lambda s: tuple(s.split(",")), default=DEFAULT_CLIENTS)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=parse_duration, default=60.0)
    ap.add_argument("--interval", type=parse_duration, default=10.0)
    ap.add_argument("--fault-duration", type=parse_duration, default=5.0)
    ap.add_argument("--rate", type=float, default=None,
                    help="sends per second (queue, default 100) or transactions per second (txn, default 20)")
    ap.add_argument("--workload", choices=("queue", "txn", "metadata"), default="queue",
                    help="the workload of every cell (txn, metadata: no lossy cells; metadata: --client reference)")
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                    help="the consumers' group protocol in every cell (consumer: KIP-848, subscribed; the lossy "
                         "schedule's cells have no consumers)")
    ap.add_argument("--lossy", action=argparse.BooleanOptionalAction, default=True,
                    help="add the lossy schedule (unclean election on, min.insync.replicas=1) per target and client")
    ap.add_argument("--out", type=Path, default=Path("out/matrix"))
    ap.add_argument("--only", type=lambda v: set(v.split(",")), default=None, metavar="RUN_ID,...",
                    help="run only these cells of the matrix (e.g. to run one again; --combine merges the outputs)")
    ap.add_argument("--cell-deadline", type=parse_duration, default=None,
                    help="kill a cell that runs longer (default 3 x duration + 7 min)")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="MATRIX_OUT",
                    help="no runs: one report (tables, findings, Spark) from these earlier matrix outputs")
    args = ap.parse_args(argv)
    if args.combine:
        return combine(args.combine, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    todo = [c for c in cells(args) if not args.only or c.run_id in args.only]
    t0 = time.monotonic()
    for i, cell in enumerate(todo, 1):
        if not cell.skip:
            run_cell(cell, args)
        r = cell.result
        print(f"[{i}/{len(todo)} {time.monotonic() - t0:.0f}s] {cell.run_id}: "
              f"{'skipped: ' + cell.skip if cell.skip else ('exit ' + str(r.get('exit')))} "
              f"{r.get('counts') or ''} {'' if met(cell) else 'UNEXPECTED'} {r.get('error', '')}", flush=True)
        write_tables(todo[:i], args.out, {})
    spark = spark_job(args.out)
    write_tables(todo, args.out, spark)
    bad = [c.run_id for c in todo if not met(c)]
    print(f"spark: exit {spark['exit']} in {spark['wall_s']}s: {spark['report']}")
    print(f"matrix: {len(todo)} cells, {len(bad)} not as expected {bad[:10]}; {args.out / 'matrix.md'}")
    return 1 if bad or spark["exit"] not in (0, 1) else 0


if __name__ == "__main__":
    sys.exit(main())
