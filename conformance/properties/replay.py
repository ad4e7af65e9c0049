"""Write a shrunk hypothesis counterexample out as a standalone Python script that replays it against a broker.

Why: a divergence found by a state machine is only useful if someone can rerun exactly those requests — against
the same broker, after a fix, or against another target — without hypothesis. Hypothesis already prints the
shrunk steps as Python (``state = LogMachine()``, ``partitions_0 = state.create_topic(count=1)``, ...); the script
wraps them with the imports and a broker: ``--bootstrap HOST:PORT``, or (default) a fresh broker of the kind and
settings the failure was found with (reference, with the same fault switches; or Tansu).
"""
from __future__ import annotations

import argparse
import contextlib
import tempfile
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

STEP_PREFIXES = ("state = ", "state.")


def steps_from_exception(exc: BaseException) -> list[str]:
    """The program hypothesis attached to the exception's notes: ``state = M()`` … ``state.teardown()``."""
    notes = [line for n in getattr(exc, "__notes__", []) for line in str(n).splitlines()]
    start = next((i for i, line in enumerate(notes) if line.startswith("state = ")), None)
    if start is None:
        return []
    out = []
    for line in notes[start:]:
        out.append(line)
        if line.strip() == "state.teardown()":
            break
    return out


def script_text(machine: str, steps: list[str], kind: str, config: Mapping[str, str], found_at: str) -> str:
    """The replay program (valid Python; ``python -m py_compile`` accepts it)."""
    body = textwrap.indent("\n".join(steps), " " * 8)
    return f'''"""Replay of a counterexample hypothesis found for {machine} against target {kind!r} at {found_at}.

Run:  python {{this file}} [--bootstrap HOST:PORT]   (in the project's environment)
Without --bootstrap a fresh {kind} broker with the same settings starts (and stops afterwards).
An AssertionError naming a request means the divergence still reproduces; a clean exit means it is gone.
"""
import sys

from conformance.properties.machines import {machine}
from conformance.properties.replay import replay_target

TARGET_KIND = {kind!r}
TARGET_CONFIG = {dict(config)!r}

with replay_target(sys.argv[1:], TARGET_KIND, TARGET_CONFIG) as bootstrap:
    {machine}.configure(bootstrap)
    try:
{body}
    finally:
        if "state" in globals():
            state.teardown()  # noqa: F821 - defined by the first step; teardown is idempotent
print("replay finished without a divergence")
'''


def write_replay(directory: Path, machine: str, steps: list[str], kind: str, config: Mapping[str, str]) -> Path:
    """Write the script under ``directory`` (created if needed); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = directory / f"replay_{machine}_{kind}_{stamp}.py"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"replay_{machine}_{kind}_{stamp}_{n}.py"
    path.write_text(script_text(machine, steps, kind, config, stamp))
    return path


@contextlib.contextmanager
def replay_target(argv: list[str], kind: str, config: Mapping[str, str]) -> Iterator[str]:
    """The broker a replay script talks to: ``--bootstrap`` if given, else a fresh one like the original."""
    parser = argparse.ArgumentParser(description="replay a conformance counterexample")
    parser.add_argument("--bootstrap", help="host:port of a running broker (default: start one like the original)")
    args = parser.parse_args(argv)
    if args.bootstrap:
        yield args.bootstrap
        return
    work = Path(tempfile.mkdtemp(prefix="kct-replay-"))
    if kind == "reference":
        from fixtures.reference import ReferenceTarget

        target = ReferenceTarget(dict(config), work_dir=work)
    elif kind == "tansu":
        from fixtures.tansu import TansuTarget

        target = TansuTarget(dict(config), work_dir=work)
    else:
        raise SystemExit(f"target {kind!r} cannot be started by a replay script: pass --bootstrap HOST:PORT")
    with target:
        print(f"replaying against a fresh {kind} broker at {target.bootstrap} (logs in {work})")
        yield target.bootstrap
