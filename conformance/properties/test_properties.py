"""Random request sequences against the target, every answer compared with ``model`` (see ``machines``).

A failure is shrunk by hypothesis to a short sequence and written out as a replay script (path in the failure
message and in the evidence), so the divergence can be rerun with plain ``python``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conformance.evidence import Evidence
from conformance.rules import rule

from .machines import GroupMachine, LogMachine, _BrokerMachine
from .replay import steps_from_exception, write_replay

if TYPE_CHECKING:
    from .conftest import MachineTarget

SUITE = "properties"

rule("PROP-LOG-MODEL", "any sequence of acks=all Produce, Fetch, ListOffsets and DeleteRecords is answered as a "
     "single list per partition with a log start offset and HW = LEO would answer it",
     "ReplicaManager.fetchMessages / appendRecords / deleteRecords; Partition.fetchOffsetForTimestamp; "
     "UnifiedLog (OFFSET_OUT_OF_RANGE outside [log start, HW])", SUITE)
rule("PROP-GROUP-MODEL", "any sequence of complete rebalances (join, leave), heartbeats and commits is answered as a "
     "model of generation, members and committed offsets would answer it",
     "GroupMetadataManager (classicGroupJoin / Sync / Heartbeat / Leave); ClassicGroup.validateOffsetCommit; "
     "OffsetFetch", SUITE)

pytestmark = pytest.mark.timeout(600)


def run_machine(machine: type[_BrokerMachine], target: MachineTarget, chosen: settings, replay_dir: Path,
                evidence: Evidence) -> None:
    """Run the machine; on a failure write the shrunk steps as a replay script and attach its path. Several
    distinct failures (hypothesis reports each) become one AssertionError listing each with its own script."""
    machine.configure(target.bootstrap)
    evidence.note("hypothesis", {"max_examples": chosen.max_examples,
                                 "stateful_step_count": chosen.stateful_step_count})
    try:
        run_state_machine_as_test(machine, settings=chosen)
    except BaseExceptionGroup as group:
        failures = [_attach_replay(e, machine, target, replay_dir) for e in group.exceptions]
        evidence.note("counterexamples", [{"message": m, "steps": st, "replay_script": p} for m, st, p in failures])
        if not all(isinstance(e, AssertionError) for e in group.exceptions):
            raise
        listing = "\n".join(f"- {m}\n  [replay script: {p}]" for m, _, p in failures)
        raise AssertionError(f"hypothesis found {len(failures)} distinct divergences:\n{listing}") from group
    except Exception as exc:
        message, steps, path = _attach_replay(exc, machine, target, replay_dir)
        if path:
            evidence.note("counterexample", steps)
            evidence.note("replay_script", path)
            if isinstance(exc, AssertionError) and exc.args:
                exc.args = (f"{exc.args[0]}\n[shrunk to a {len(steps)}-line program; replay script: {path}]",
                            *exc.args[1:])
        raise


def _attach_replay(exc: BaseException, machine: type[_BrokerMachine], target: MachineTarget,
                   replay_dir: Path) -> tuple[str, list[str], str]:
    """(first line of the failure, its steps, replay script path or "") and a note on the exception."""
    steps = steps_from_exception(exc)
    message = (str(exc).splitlines() or [type(exc).__name__])[0]
    if not steps:
        return message, [], ""
    path = write_replay(replay_dir, machine.__name__, steps, target.kind, target.config)
    exc.add_note(f"replay script: {path}")
    return message, steps, str(path)


@pytest.mark.rule("PROP-LOG-MODEL")
def test_log_machine(machine_target: MachineTarget, machine_settings: settings, replay_dir: Path,
                     evidence: Evidence) -> None:
    run_machine(LogMachine, machine_target, machine_settings, replay_dir, evidence)


@pytest.mark.rule("PROP-GROUP-MODEL")
def test_group_machine(machine_target: MachineTarget, machine_settings: settings, replay_dir: Path,
                       evidence: Evidence) -> None:
    run_machine(GroupMachine, machine_target, machine_settings, replay_dir, evidence)
