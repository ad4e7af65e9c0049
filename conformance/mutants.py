"""Protocol-level mutation testing of the suites: does each suite fail when a broker answers wrongly?

    python -m conformance.mutants [--only NAME,...] [--out DIR] [--timeout S] [--full]

The model (issue 12, "suites with teeth"): a correct reference broker (one node, memory) sits behind a chaos proxy
and advertises the proxy's address, so every client connection, also after a metadata refresh, goes through it.
A *mutant* is one `kafka_rewrite` toxic on the proxy's downstream stream: it rewrites one field of one API key's
answers (an error code, a high watermark, an offset, a group state, a generation, the record batches). The
suites run as `--target live --bootstrap <proxy>` in a child pytest, once with no mutant (the baseline: must
show zero divergences) and once per mutant of `CATALOGUE`.

Verdicts per mutant:
  killed      at least one check diverged (an assertion on Kafka's rule, or `TargetDiverged`: the target broke
              the protocol: closed a connection, never answered); the diverging checks' rules are "caught by";
  survived    every selected check passed: a hole in the suites, reported with the toxic's hit count (0 hits:
              the suites never sent an answer the mutant could rewrite; >0: they saw wrong answers and did not
              notice);
  timeout     the child pytest outlived its time limit (the suites hang on this mutant: a weakness too);
  broken      the child could not run (no results file).
Score = killed / total. Each mutant runs the suites and `-k` selection its API key plausibly touches (listed in the
JSON and the table), which keeps the whole run to a few minutes; `--full` runs all four suites for every mutant.

Output: `<out>/mutants.json` (per run: mutant, toxic attributes, selection, verdict, caught-by rules, diverging
checks with their first message line, errors, toxic hits, wall time) and `<out>/mutants.txt` (a table).
Everything started here (broker process, proxy thread, child pytest) is stopped here.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.faults import ToxiproxyClient
from chaos.proxy import ProxyServer
from fixtures.net import free_port
from fixtures.reference import ReferenceTarget

ROOT = Path(__file__).resolve().parents[1]
SUITES = "conformance/suites/"
FETCH_S, OFFSETS_S, REBALANCE_S, ISR_HW_S = (SUITES + f for f in (
    "test_fetch.py", "test_offsets.py", "test_rebalance.py", "test_isr_hw.py"))
ALL_SUITES = (FETCH_S, OFFSETS_S, REBALANCE_S, ISR_HW_S)
DATA = (FETCH_S, OFFSETS_S, ISR_HW_S)  # Produce / Fetch / ListOffsets / Metadata / DeleteRecords mutants
PROXY = "kafka"
TOXIC = "mutant"

# API keys
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, DELETE_RECORDS = 11, 12, 13, 14, 15, 21
# error codes (Kafka's Errors enum)
NONE, OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE = 0, 1, 6, 5
NOT_ENOUGH_REPLICAS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 19, 22, 25
INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 26, 27, 79

# -k selections of the group-plane checks (the rebalance suite waits on real rebalances: ~3 s per check)
GROUP_STATES = "state_transitions or describe_unknown"
HEARTBEATS = "heartbeat_in_preparing or heartbeat_in_completing or stale_generation or unknown_member"
COMMITS = ("round_trip or wrong_generation or unknown_member or commit_in_preparing or commit_in_completing "
           "or committed_offset_below")


@dataclass(frozen=True)
class Mutant:
    """One wrong broker: a kafka_rewrite toxic, the rule it should break, and the checks run against it."""

    name: str
    attributes: dict[str, Any]
    breaks: str  # what a correct suite should notice, in words
    suites: tuple[str, ...] = DATA
    select: str | None = None  # pytest -k


def _m(name: str, api_key: int, field_: str, op: str, value: Any, breaks: str, *, match: Any = None,
       suites: tuple[str, ...] = DATA, select: str | None = None) -> Mutant:
    attrs: dict[str, Any] = {"api_key": api_key, "field": field_, "op": op, "value": value}
    if match is not None:
        attrs["match"] = match
    return Mutant(name, attrs, breaks, suites, select)


CATALOGUE: tuple[Mutant, ...] = (
    # Fetch
    _m("fetch.hw+1", FETCH, "high_watermark", "add", 1, "HW above the last committed offset (FETCH-HW-CAP, "
       "HW-CONSISTENT-VIEWS)"),
    _m("fetch.hw-1", FETCH, "high_watermark", "add", -1, "records returned at/above the reported HW"),
    _m("fetch.error.not_leader", FETCH, "error_code", "set", NOT_LEADER_OR_FOLLOWER,
       "every fetch answered NOT_LEADER_OR_FOLLOWER by the leader"),
    _m("fetch.oor_as_none", FETCH, "error_code", "set", NONE, "OFFSET_OUT_OF_RANGE answered as an empty success",
       match=OFFSET_OUT_OF_RANGE),
    _m("fetch.drop_last_batch", FETCH, "records", "drop_batches", 1, "the last readable batch withheld "
       "(FETCH-MINBYTES-GE, limits, resets)"),
    _m("fetch.log_start+1", FETCH, "log_start_offset", "add", 1, "log start offset reported one too high"),
    _m("fetch.lso+1", FETCH, "last_stable_offset", "add", 1, "last stable offset above the high watermark"),
    # ListOffsets
    _m("list_offsets.offset+1", LIST_OFFSETS, "offset", "add", 1, "LATEST/EARLIEST/by-time one too high"),
    _m("list_offsets.offset-1", LIST_OFFSETS, "offset", "add", -1, "LATEST/EARLIEST/by-time one too low"),
    _m("list_offsets.timestamp+1", LIST_OFFSETS, "timestamp", "add", 1, "the timestamp of the record found is "
       "not the record's"),
    # Metadata
    _m("metadata.leader=-1", METADATA, "leader_id", "set", -1, "partitions without a leader"),
    _m("metadata.error.leader_not_available", METADATA, "error_code", "set", LEADER_NOT_AVAILABLE,
       "every topic/partition LEADER_NOT_AVAILABLE", match=NONE),
    # Produce / DeleteRecords
    _m("produce.hide_not_enough_replicas", PRODUCE, "error_code", "set", NONE,
       "acks=all below min.insync.replicas reported as success (ACKS-ALL-MIN-ISR)", match=NOT_ENOUGH_REPLICAS),
    _m("produce.base_offset+1", PRODUCE, "base_offset", "add", 1, "the offset a produce reports is off by one"),
    _m("delete_records.low_watermark-1", DELETE_RECORDS, "low_watermark", "add", -1,
       "DeleteRecords reports the old log start"),
    # OffsetCommit / OffsetFetch
    _m("offset_commit.accept_illegal_generation", OFFSET_COMMIT, "error_code", "set", NONE,
       "a stale generation's commit reported as accepted", match=ILLEGAL_GENERATION,
       suites=(OFFSETS_S, REBALANCE_S), select=COMMITS),
    _m("offset_commit.error.unknown_member", OFFSET_COMMIT, "error_code", "set", UNKNOWN_MEMBER_ID,
       "every commit refused with UNKNOWN_MEMBER_ID", suites=(OFFSETS_S, REBALANCE_S), select=COMMITS),
    _m("offset_fetch.offset+1", OFFSET_FETCH, "committed_offset", "add", 1, "committed offsets read back one too "
       "high", suites=(OFFSETS_S,)),
    _m("offset_fetch.metadata_lost", OFFSET_FETCH, "metadata", "set", "", "commit metadata not returned",
       suites=(OFFSETS_S,)),
    # JoinGroup / SyncGroup / Heartbeat / DescribeGroups / LeaveGroup
    _m("join_group.skip_member_id_required", JOIN_GROUP, "error_code", "set", NONE,
       "JoinGroup v4+ without member id answered NONE (GROUP-MEMBER-ID-REQUIRED)", match=MEMBER_ID_REQUIRED,
       suites=(REBALANCE_S,), select="member_id_required or state_transitions"),
    _m("join_group.accept_bad_session_timeout", JOIN_GROUP, "error_code", "set", NONE,
       "out-of-range session timeout accepted", match=INVALID_SESSION_TIMEOUT, suites=(REBALANCE_S,),
       select="invalid_session_timeout"),
    _m("join_group.no_leader", JOIN_GROUP, "leader", "set", "", "JoinGroup names no leader, so nobody assigns",
       suites=(REBALANCE_S,), select="join_starts_rebalance or state_transitions"),
    _m("join_group.generation+1", JOIN_GROUP, "generation_id", "add", 1, "JoinGroup hands out a generation the "
       "group does not have", suites=(REBALANCE_S,), select="join_starts_rebalance or stale_generation"),
    _m("heartbeat.hide_rebalance", HEARTBEAT, "error_code", "set", NONE,
       "Heartbeat NONE instead of REBALANCE_IN_PROGRESS", match=REBALANCE_IN_PROGRESS, suites=(REBALANCE_S,),
       select=HEARTBEATS),
    _m("heartbeat.hide_unknown_member", HEARTBEAT, "error_code", "set", NONE,
       "Heartbeat NONE from a member the group does not have", match=UNKNOWN_MEMBER_ID, suites=(REBALANCE_S,),
       select=HEARTBEATS),
    _m("heartbeat.hide_illegal_generation", HEARTBEAT, "error_code", "set", NONE,
       "Heartbeat NONE for a stale generation", match=ILLEGAL_GENERATION, suites=(REBALANCE_S,),
       select=HEARTBEATS),
    _m("sync_group.empty_assignment", SYNC_GROUP, "assignment", "set", "", "SyncGroup hands out an empty "
       "assignment (GROUP-SYNC-ASSIGNMENT)", suites=(REBALANCE_S,),
       select="its_assignment or state_transitions or leave_starts or cooperative"),
    _m("sync_group.hide_rebalance", SYNC_GROUP, "error_code", "set", NONE,
       "SyncGroup NONE instead of REBALANCE_IN_PROGRESS", match=REBALANCE_IN_PROGRESS, suites=(REBALANCE_S,),
       select="sync_in_preparing or state_transitions"),
    _m("describe_groups.state=Stable", DESCRIBE_GROUPS, "group_state", "set", "Stable",
       "DescribeGroups always says Stable", suites=(REBALANCE_S,), select=GROUP_STATES),
    _m("describe_groups.dead_as_empty", DESCRIBE_GROUPS, "group_state", "set", "Empty",
       "an unknown group described as Empty, not Dead", match="Dead", suites=(REBALANCE_S,), select=GROUP_STATES),
    _m("leave_group.error.unknown_member", LEAVE_GROUP, "error_code", "set", UNKNOWN_MEMBER_ID,
       "LeaveGroup refused with UNKNOWN_MEMBER_ID", suites=(REBALANCE_S,),
       select="leave_starts or state_transitions"),
)


@dataclass
class RunResult:
    """The outcome of one child pytest: baseline (mutant None) or one mutant."""

    mutant: str | None
    attributes: dict[str, Any] | None
    breaks: str
    suites: list[str]
    select: str | None
    verdict: str = "broken"
    caught_by: list[str] = field(default_factory=list)
    diverged: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    wall_s: float = 0.0
    note: str = ""


FULL_RUN_TIMEOUT_S = 900.0


class Bench:
    """A reference broker behind an in-process proxy; `run()` runs suites through it with one mutant or none."""

    def __init__(self, work_dir: Path, timeout: float = 150.0, check_timeout: float = 30.0,
                 maxfail: int = 3) -> None:
        self.work_dir = Path(work_dir)
        self.timeout = timeout
        # pytest-timeout per check, above the suites' 20 s client deadline: a client retrying forever ends as an
        # error, one that gives up ends as the divergence it is
        self.check_timeout = check_timeout
        self.maxfail = maxfail  # stop a mutant's run after this many failed checks (0: run every selected check)
        self.server: ProxyServer | None = None
        self.broker: ReferenceTarget | None = None
        self.bootstrap = ""

    def __enter__(self) -> Bench:
        self.server = ProxyServer("127.0.0.1:0", seed=12).start()
        try:
            listen, upstream = free_port(), free_port()
            self.client.create(PROXY, upstream=f"127.0.0.1:{upstream}", listen=f"127.0.0.1:{listen}")
            self.bootstrap = f"127.0.0.1:{listen}"
            self.broker = ReferenceTarget({"memory": "true", "port": str(upstream),
                                           "kafka.advertised.listeners": self.bootstrap}, work_dir=self.work_dir)
            self.broker.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    @property
    def client(self) -> ToxiproxyClient:
        assert self.server is not None
        return ToxiproxyClient(self.server.api_address)

    def _hits(self) -> int:
        assert self.server is not None
        w = self.server.collection.proxies[PROXY].get_toxic(TOXIC)
        return w.toxic.hits if w is not None else 0

    def run(self, mutant: Mutant | None, suites: Sequence[str] = ALL_SUITES, select: str | None = None) -> RunResult:
        """One child pytest through the proxy, with `mutant`'s toxic on (None: the baseline)."""
        name = mutant.name if mutant else "baseline"
        res = RunResult(name if mutant else None, dict(mutant.attributes) if mutant else None,
                        mutant.breaks if mutant else "", list(suites), select)
        self.client.reset()
        if mutant is not None:
            self.client.add_toxic(PROXY, "kafka_rewrite", name=TOXIC, stream="downstream",
                                  attributes=mutant.attributes)
        out = self.work_dir / f"{name}.json"
        cmd = [sys.executable, "-m", "pytest", *suites, "-q", "-p", "no:cacheprovider", "--target", "live",
               "--bootstrap", self.bootstrap, "--kct-results-file", str(out), f"--timeout={self.check_timeout:g}"]
        if select:
            cmd += ["-k", select]
        if mutant is not None and self.maxfail:
            cmd += [f"--maxfail={self.maxfail}"]
        # a run of whole suites (the baseline, --full) takes minutes; --timeout bounds the selected runs
        limit = self.timeout if select else max(self.timeout, FULL_RUN_TIMEOUT_S)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            res.verdict, res.note = "timeout", f"child pytest still running after {limit:.0f} s"
        else:
            if out.exists():
                _classify(res, json.loads(out.read_text()))
            else:
                res.note = f"no results file (exit {proc.returncode}): {proc.stdout[-500:]}{proc.stderr[-500:]}"
        res.wall_s = round(time.monotonic() - t0, 1)
        res.hits = self._hits() if mutant else 0
        self.client.reset()
        if mutant is None and res.verdict in ("killed", "survived"):  # the baseline: diverged / passed
            res.verdict = "diverged" if res.verdict == "killed" else "pass"
        elif res.verdict == "survived":
            res.note = ("the mutant never fired: the selected checks got no answer it could rewrite" if not res.hits
                        else f"{res.hits} answers rewritten, no selected check noticed")
        return res


def _classify(res: RunResult, doc: dict[str, Any]) -> None:
    checks = doc.get("checks", [])
    res.summary = dict(doc.get("summary", {}))
    for c in checks:
        first = (c.get("message") or "").splitlines()[0][:200] if c.get("message") else ""
        if c["outcome"] == "divergence":
            res.diverged.append({"check": c["name"], "rules": ",".join(c["rules"]), "message": first})
        elif c["outcome"] == "error":
            res.errors.append({"check": c["name"], "message": first})
    res.caught_by = sorted({r for d in res.diverged for r in d["rules"].split(",")})
    res.verdict = "killed" if res.diverged else "survived" if checks else "broken"


def run_all(work_dir: Path, mutants: Sequence[Mutant], *, full: bool = False, timeout: float = 150.0,
            maxfail: int = 3, baseline: bool = True, log: Any = None) -> dict[str, Any]:
    """Baseline + every mutant against one broker; the report as plain data."""
    t0 = time.monotonic()
    runs: list[RunResult] = []
    with Bench(work_dir, timeout, maxfail=0 if full else maxfail) as bench:
        if baseline:
            runs.append(bench.run(None, ALL_SUITES, None))
            _say(log, runs[-1])
        for m in mutants:
            runs.append(bench.run(m, ALL_SUITES if full else m.suites, None if full else m.select))
            _say(log, runs[-1])
    base = runs[0] if baseline else None
    muts = [r for r in runs if r.mutant is not None]
    killed = [r for r in muts if r.verdict == "killed"]
    return {
        "baseline": asdict(base) if base else None,
        "baseline_ok": base is None or (base.verdict == "pass" and not base.errors),
        "killed": len(killed),
        "total": len(muts),
        "score": round(len(killed) / len(muts), 3) if muts else None,
        "survivors": [{"mutant": r.mutant, "verdict": r.verdict, "breaks": r.breaks, "note": r.note}
                      for r in muts if r.verdict != "killed"],
        "mutants": [asdict(r) for r in muts],
        "wall_s": round(time.monotonic() - t0, 1),
        "full": full,
        "maxfail": 0 if full else maxfail,
    }


def _say(log: Any, r: RunResult) -> None:
    if log is not None:
        print(f"{r.mutant or 'baseline':42s} {r.verdict:8s} {r.wall_s:6.1f}s hits={r.hits:<4d} "
              f"{','.join(r.caught_by) or r.note}", file=log, flush=True)


def table(report: dict[str, Any]) -> str:
    """The short text table: one line per mutant, then the score and the survivors."""
    lines = [f"{'mutant':42s} {'verdict':8s} {'hits':>5s} {'wall':>6s}  caught by / why"]
    b = report.get("baseline")
    if b:
        lines.append(f"{'(no mutant)':42s} {('pass' if report['baseline_ok'] else 'FAIL'):8s} {'-':>5s} "
                     f"{b['wall_s']:5.1f}s  {b['summary']}")
    for r in report["mutants"]:
        why = ", ".join(r["caught_by"]) if r["verdict"] == "killed" else r["note"]
        lines.append(f"{r['mutant']:42s} {r['verdict']:8s} {r['hits']:5d} {r['wall_s']:5.1f}s  {why}")
    lines.append(f"score: {report['killed']}/{report['total']} killed ({report['score']}); wall {report['wall_s']} s")
    for s in report["survivors"]:
        lines.append(f"survivor {s['mutant']}: {s['breaks']} — {s['note']}")
    return "\n".join(lines) + "\n"


def select_mutants(names: str | None) -> list[Mutant]:
    """The catalogue, or the named mutants (comma-separated); unknown names are an error."""
    if not names:
        return list(CATALOGUE)
    by = {m.name: m for m in CATALOGUE}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by]
    if unknown:
        raise SystemExit(f"unknown mutant(s): {', '.join(unknown)}; known: {', '.join(by)}")
    return [by[n] for n in wanted]


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated mutant names (default: the whole catalogue)")
    ap.add_argument("--list", action="store_true", help="print the catalogue and exit")
    ap.add_argument("--out", default="out/mutants", help="directory for mutants.json and mutants.txt")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per child pytest")
    ap.add_argument("--full", action="store_true", help="run all four suites for every mutant (slow)")
    ap.add_argument("--maxfail", type=int, default=3,
                    help="stop a mutant's run after N failed checks (0: all; --full implies 0)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the no-mutant run")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM unwinds like Ctrl-C: broker and proxy are stopped
    mutants = select_mutants(args.only)
    if args.list:
        for m in mutants:
            print(f"{m.name:42s} {json.dumps(m.attributes)}  -- {m.breaks}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kct-mutants-") as tmp:
        report = run_all(Path(tmp), mutants, full=args.full, timeout=args.timeout, maxfail=args.maxfail,
                         baseline=not args.no_baseline, log=sys.stderr)
    (out / "mutants.json").write_text(json.dumps(report, indent=1))
    text = table(report)
    (out / "mutants.txt").write_text(text)
    print(text, end="")
    return 0 if report["baseline_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
