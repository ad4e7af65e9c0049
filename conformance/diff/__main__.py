"""``python -m conformance.diff --a TARGET --b TARGET``: see ``conformance.diff`` for the model and exit codes."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fixtures.factory import TARGET_NAMES, make_target
from fixtures.target import Target, TargetError, TargetUsageError

from .codec import api_name
from .compare import GAP_FIELDS, Tally
from .conversation import Conversation, read_conversations
from .lockstep import Lockstep, ReplayResult, Unreachable
from .normalise import NORMALISATIONS

SCHEMA = "kct-diff/1"
# The group timings the suites' conversations are recorded with (the rebalance suite's fast settings): a replay
# target must run with the same, or joins and expiries happen at other times and every answer after them differs.
RECORD_SETTINGS = {"group.initial.rebalance.delay.ms": "300", "group.min.session.timeout.ms": "500"}
# Targets this CLI starts and can hand RECORD_SETTINGS to (their --target-config takes kafka.<setting>)
SETTABLE = ("reference", "kafka")
SUITES = ("fetch", "offsets", "rebalance", "isr_hw", "clients", "elr")
EXIT_CODES = """exit codes:
  0  no difference outside the normalisation table and GAPS.md
  1  unexplained differences (listed per API key, version and field)
  2  could not run: bad arguments, a target that did not start or cannot be reached, settings that differ"""


class UsageError(Exception):
    """Bad arguments or unusable targets: exit 2 with the message."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m conformance.diff", description=__doc__.splitlines()[0],
                                 epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = tuple(TARGET_NAMES)
    for side in ("a", "b"):
        ap.add_argument(f"--{side}", required=True, metavar="TARGET",
                        help=f"target {side}: one of {', '.join(names)}")
        ap.add_argument(f"--{side}-bootstrap", metavar="HOST:PORT", help=f"bootstrap of target {side} (live)")
        ap.add_argument(f"--{side}-config", action="append", default=[], metavar="KEY=VALUE",
                        help=f"--target-config of target {side} (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("out/diff"), help="output directory (default out/diff)")
    ap.add_argument("--conversations", type=Path, metavar="FILE",
                    help="replay these conversations (JSONL from an earlier run) instead of recording the suites")
    ap.add_argument("--suites", default=",".join(SUITES),
                    help=f"suites whose conversations are recorded (default {','.join(SUITES)})")
    ap.add_argument("-k", dest="select", metavar="EXPR", help="pytest -k selection of the checks recorded")
    ap.add_argument("--record-only", action="store_true", help="record the conversations and stop")
    ap.add_argument("--parallel", type=int, default=3, help="conversations replayed at once (default 3)")
    ap.add_argument("--machine", choices=("ci", "thorough", "off"), default="ci",
                    help="hypothesis machine: kct-diff-ci profile (default, bounded), kct-diff-thorough, or off")
    ap.add_argument("--machine-examples", type=int, metavar="N", help="override the profile's number of examples")
    ap.add_argument("--machine-rounds", type=int, default=3, metavar="N",
                    help="after a difference, search again with its fields no longer failing, up to N rounds "
                         "(default 3)")
    ap.add_argument("--record-timeout", type=int, default=1800, help="seconds the recording run may take")
    return ap


def _check_args(args: argparse.Namespace) -> None:
    for side in ("a", "b"):
        name = getattr(args, side)
        if name not in TARGET_NAMES:
            raise UsageError(f"--{side} {name!r}: unknown target; choose one of {', '.join(TARGET_NAMES)}")
        boot = getattr(args, f"{side}_bootstrap")
        if name == "live" and not boot:
            raise UsageError(f"--{side} live needs --{side}-bootstrap HOST:PORT")
        if boot and name != "live":
            raise UsageError(f"--{side}-bootstrap is only for --{side} live (got --{side} {name})")
    unknown = [s for s in args.suites.split(",") if s and s not in SUITES]
    if unknown:
        raise UsageError(f"--suites: unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    if args.parallel < 1:
        raise UsageError("--parallel must be at least 1")
    if args.machine_examples is not None and args.machine_examples < 1:
        raise UsageError("--machine-examples must be at least 1")
    if args.machine_rounds < 1:
        raise UsageError("--machine-rounds must be at least 1")
    if args.conversations is not None and not args.conversations.is_file():
        raise UsageError(f"--conversations {args.conversations}: no such file")


def make_side(args: argparse.Namespace, side: str, work: Path) -> Target:
    """The (not started) target of one side; the recording's group timings are added where this CLI can set them."""
    name = getattr(args, side)
    config = list(getattr(args, f"{side}_config"))
    if name in SETTABLE:
        given = {c.partition("=")[0] for c in config}
        config += [f"kafka.{k}={v}" for k, v in RECORD_SETTINGS.items() if f"kafka.{k}" not in given]
        if name == "reference" and "memory" not in given:
            config.append("memory=true")
    try:
        return make_target(name, bootstrap=getattr(args, f"{side}_bootstrap"), config=config,
                           work_dir=work / f"target-{side}")
    except TargetUsageError as exc:
        raise UsageError(f"--{side}: {exc}") from None


# ------------------------------------------------------------------------------------------------ recording
def record(args: argparse.Namespace, out: Path) -> Path:
    """Run the suites against a fresh reference broker with the recorder on; returns the conversations file."""
    path = out / "conversations.jsonl"
    modules = [f"conformance.suites.test_{s}" for s in args.suites.split(",") if s]
    cmd = [sys.executable, "-m", "pytest", "--pyargs", *modules, "--target", "reference",
           "--target-config", "memory=true",
           *(x for k, v in RECORD_SETTINGS.items() for x in ("--target-config", f"kafka.{k}={v}")),
           "-p", "conformance.diff.recorder", "--kct-conversations", str(path),
           "--kct-results-file", str(out / "recording-results.json"), "-q", "-p", "no:cacheprovider"]
    if args.select:
        cmd += ["-k", args.select]
    print(f"recording the suites' conversations ({', '.join(modules)}) against a fresh reference broker",
          flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.record_timeout)
    (out / "recording.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1) or not path.exists():
        raise UsageError(f"recording run failed (pytest exit {proc.returncode}); see {out / 'recording.log'}")
    print(f"recorded in {time.monotonic() - t0:.0f} s: {path}", flush=True)
    return path


# ------------------------------------------------------------------------------------------------ settings
async def target_settings(bootstrap: str) -> dict[str, str] | None:
    """The recording's group settings as the target reports them (DescribeConfigs), or None if it does not tell."""
    from conformance.wire import Wire

    try:
        w = await Wire.connect(bootstrap, client_id="kct-diff")
    except AssertionError as exc:
        raise Unreachable(str(exc)) from None
    try:
        md = await w.metadata([], record=False)
        for node in sorted(md["_brokers"]):
            found = await w.broker_configs(node, list(RECORD_SETTINGS))
            if found:
                return found
        return None
    except AssertionError:
        return None
    finally:
        await w.close()


def check_settings(label: str, found: dict[str, str] | None) -> str | None:
    """Why a target's settings make a replay meaningless (exit 2), or None; unknown settings only warn."""
    if found is None:
        print(f"warning: target {label} does not report {', '.join(RECORD_SETTINGS)} (DescribeConfigs); the "
              f"conversations assume {RECORD_SETTINGS}", file=sys.stderr)
        return None
    bad = {k: found.get(k) for k, v in RECORD_SETTINGS.items() if k in found and found[k] != v}
    if bad:
        want = " ".join(f"{k}={v}" for k, v in RECORD_SETTINGS.items())
        return (f"target {label} runs with {bad}; the conversations were recorded with {RECORD_SETTINGS}, so "
                f"joins and session expiries would happen at other times. Start it with: {want}")
    return None


# ------------------------------------------------------------------------------------------------ replay
async def replay_all(a: str, b: str, conversations: Sequence[Conversation], parallel: int,
                     tally: Tally) -> list[ReplayResult]:
    ls = Lockstep(a, b, tally)
    await ls.warm_up()
    await ls.handshake()
    sem = asyncio.Semaphore(parallel)
    done = 0

    async def one(c: Conversation) -> ReplayResult:
        nonlocal done
        async with sem:
            r = await ls.replay(c)
        done += 1
        mark = f"{r.unexplained} unexplained" if r.unexplained else ("ok" if not r.differences else
                                                                    f"{r.differences} known")
        print(f"[{done}/{len(conversations)}] {c.id}: {r.compared} answers, {mark} ({r.wall_s} s)", flush=True)
        return r

    return list(await asyncio.gather(*(one(c) for c in conversations)))


def run_machine(a: str, b: str, profile: str, out: Path, tally: Tally, examples: int | None = None,
                steps: int | None = None, derandomize: bool = False, rounds: int = 1) -> dict[str, Any]:
    """The hypothesis machine with a bounded profile; a shrunk difference is written as a replay script. With
    ``rounds`` > 1 the search goes on after a difference, the fields already reported no longer failing."""
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from conformance.properties.replay import steps_from_exception

    from .machine import DIFF_CI, DIFF_THOROUGH, DiffMachine, script_text

    chosen = settings.get_profile(DIFF_THOROUGH if profile == "thorough" else DIFF_CI)
    if examples is not None:
        chosen = settings(chosen, max_examples=examples)
    if steps is not None:
        chosen = settings(chosen, stateful_step_count=steps)
    if derandomize:          # the same examples every run (tests); the CLI explores new ones each time
        chosen = settings(chosen, derandomize=True)
    t0 = time.monotonic()
    asyncio.run(Lockstep(a, b).warm_up())
    found: list[dict[str, Any]] = []
    ignore: set[tuple[int, str]] = set()
    for round_ in range(1, rounds + 1):
        DiffMachine.configure(a, b, tally, ignore)
        try:
            run_state_machine_as_test(DiffMachine, settings=chosen)
            break
        except BaseException as exc:  # noqa: BLE001 - every failure (or group of them) is a finding with a script
            if isinstance(exc, KeyboardInterrupt):
                raise
            excs = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else [exc]
            for e in excs:
                program = steps_from_exception(e)
                script = out / f"machine_difference_{len(found) + 1}.py"
                if program:
                    script.write_text(script_text(program, a, b))
                found.append({"round": round_, "message": str(e)[:4000], "kind": type(e).__name__,
                              "steps": program, "script": str(script) if program else None,
                              "fields": sorted(f"{api_name(k)}.{f}" for k, f in DiffMachine.failed_fields)})
            if not DiffMachine.failed_fields - ignore:
                break             # not a field difference (an error in the machine): searching on finds the same
            ignore |= DiffMachine.failed_fields
    return {"profile": profile, "max_examples": chosen.max_examples,
            "stateful_step_count": chosen.stateful_step_count, "wall_s": round(time.monotonic() - t0, 1),
            "rounds": rounds, "differences": found, "tally": tally.to_json()}


@contextlib.contextmanager
def started(targets: dict[str, Target]) -> Iterator[dict[str, Target]]:
    """Both targets started at once (each is a process or two to wait for), both stopped whatever happens."""
    from concurrent.futures import ThreadPoolExecutor

    def start(side: str) -> str | None:
        try:
            targets[side].start()
            return None
        except TargetError as exc:
            return f"target {side} ({targets[side].name}) did not start: {exc}"

    try:
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            problems = [p for p in pool.map(start, targets) if p]
        if problems:
            raise UsageError("; ".join(problems))
        yield targets
    finally:
        for t in targets.values():
            t.stop()


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    targets = {side: make_side(args, side, work) for side in ("a", "b")}     # option errors before anything runs
    if args.record_only:
        path = record(args, out)
        print(f"{len(read_conversations(path))} conversations in {path}")
        return 0
    t0 = time.monotonic()
    with started(targets):
        boot = {side: t.bootstrap for side, t in targets.items()}
        settings = {}
        for side in ("a", "b"):
            try:
                settings[side] = asyncio.run(target_settings(boot[side]))
            except Unreachable as exc:
                raise UsageError(f"target {side} cannot be reached: {exc}") from None
            problem = check_settings(side, settings[side])
            if problem:
                raise UsageError(problem)
        conversations = read_conversations(args.conversations or record(args, out))
        replayable = [c for c in conversations if not c.excluded]
        reference = "a" if args.a == "reference" else "b" if args.b == "reference" else None
        tally = Tally(reference)
        try:
            results = asyncio.run(replay_all(boot["a"], boot["b"], replayable, args.parallel, tally))
        except Unreachable as exc:
            raise UsageError(f"a target cannot be reached: {exc}") from None
        machine = (run_machine(boot["a"], boot["b"], args.machine, out, Tally(reference), args.machine_examples,
                               rounds=args.machine_rounds)
                   if args.machine != "off"
                   else {"profile": "off", "differences": []})
        doc = report(args, targets, conversations, results, tally, machine, settings, time.monotonic() - t0)
    (out / "diff.json").write_text(json.dumps(doc, indent=1, default=str))
    html = subprocess.run([sys.executable, "-m", "reports", "diff", str(out / "diff.json"), "--out",
                           str(out / "index.html")], capture_output=True, text=True)
    if html.returncode != 0:
        print(f"warning: the HTML page could not be written: {html.stderr.strip()[-500:]}", file=sys.stderr)
    s = doc["summary"]
    print(f"\n{s['api_keys']} API keys ({s['api_versions']} key/version pairs), {s['fields']} fields, "
          f"{s['answers']} answer pairs compared; {s['fields_differing']} fields differ: "
          f"{s['fields_unexplained']} unexplained, {s['fields_known_gaps']} known (GAPS.md)")
    print(f"machine: {len(machine['differences'])} unexplained difference(s)")
    print(f"report: {out / 'diff.json'}, {out / 'index.html'}")
    return 1 if s["fields_unexplained"] or machine["differences"] else 0


def report(args: argparse.Namespace, targets: dict[str, Target], conversations: list[Conversation],
           results: list[ReplayResult], tally: Tally, machine: dict[str, Any], settings: dict[str, Any],
           wall_s: float) -> dict[str, Any]:
    doc = tally.to_json()
    return {
        "schema": SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(wall_s, 1),
        "targets": {side: {"name": t.name, "bootstrap": t.bootstrap, "version": t.version(),
                           "settings": settings.get(side)} for side, t in targets.items()},
        "record_settings": RECORD_SETTINGS,
        "summary": doc["summary"],
        "normalisations": [{"name": n.name, "fields": n.fields, "why": n.why} for n in NORMALISATIONS],
        "gaps": [{"row": g.row, "api_key": g.api_key, "fields": g.fields, "note": g.note} for g in GAP_FIELDS],
        "conversations": {
            "total": len(conversations),
            "replayed": len(results),
            "excluded": [{"id": c.id, "reason": c.excluded} for c in conversations if c.excluded],
            "errors": [{"id": r.conversation, "error": r.error} for r in results if r.error],
            "results": [vars(r) for r in results],
        },
        "apis": doc["apis"],
        "conversations_differing": doc["conversations_differing"],
        "machine": machine,
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"error: could not run: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
