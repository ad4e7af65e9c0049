"""The Spark job's HTML report read as a user reads it: an anomaly the runs' settings allow is not drawn as a
failure, fault-free runs are named so, and the timings add up. Rendered from collected tables (no Spark needed)."""

from __future__ import annotations

import re

from reports.html import render
from reports.spark_job import JobResult
from reports.svg import PALETTE


def _result() -> JobResult:
    run = {"run_id": "r1", "target": "reference", "nemesis": None, "ops": 10, "valid": True, "status": "valid",
           "bad": [], "indeterminate": [], "skipped_at": [], "lin_partition_log": "ok", "lin_committed_offsets": "ok"}
    runs = [run,
            {**run, "run_id": "r2", "nemesis": "kill", "valid": False, "status": "invalid", "bad": ["duplicate"]},
            {**run, "run_id": "r3", "valid": False, "status": "indeterminate", "indeterminate": ["unseen"],
             "skipped_at": [7, 9]}]
    anomalies = [  # the conformance suites' partial reads make lost-write acceptable in fault-free runs
        {"target": "reference", "nemesis": None, "anomaly": "lost-write", "verdict": "acceptable",
         "acceptable": True, "runs": 5, "cases": 9},
        {"target": "reference", "nemesis": "kill", "anomaly": "duplicate", "verdict": "bad", "acceptable": False,
         "runs": 1, "cases": 1},
        {"target": "reference", "nemesis": None, "anomaly": "unseen", "verdict": "indeterminate",
         "acceptable": False, "runs": 1, "cases": 1},
    ]
    targets = [{"target": "reference", "runs": 3, "valid_runs": 1, "failing_runs": 1, "indeterminate_runs": 1,
                "ops": 30, "log_illegal": 0, "log_unknown": 0, "offsets_illegal": 0, "offsets_unknown": 0}]
    return JobResult(runs=runs, targets=targets, anomalies=anomalies, rules=[], errors=[], latency={},
                     timeline=None, timings={"check_s": 4.0, "aggregate_s": 1.5, "total_s": 6.0})


def _grey(colour: str) -> bool:
    return colour[1:3] == colour[3:5] == colour[5:7]


def _fills(svg: str, series: str) -> set[str]:
    return set(re.findall(r'fill="(#[0-9a-f]{6})"><title>[^<]*/ ' + re.escape(series) + ":", svg))


def test_acceptable_anomalies_are_grey_and_fault_free_runs_are_named() -> None:
    """Before: lost-write, acceptable under partial_reads, was a full coloured bar beside real failures, under a
    nemesis called "None", and the header said "total 0.0 s"."""
    page = render(_result())
    per_nemesis = page[page.index("Runs with each anomaly, per nemesis"):]
    per_nemesis = per_nemesis[:per_nemesis.index("</svg>")]
    acceptable = _fills(per_nemesis, "lost-write (acceptable here)") or _fills(per_nemesis, "lost-write")
    assert acceptable and all(_grey(c) for c in acceptable), f"lost-write (acceptable) drawn in {acceptable}"
    assert _fills(per_nemesis, "duplicate") <= set(PALETTE) and _fills(per_nemesis, "duplicate")
    assert ">no faults</text>" in per_nemesis and ">None</text>" not in per_nemesis
    assert "<td>None</td>" not in page and "<td>no faults</td>" in page
    assert "acceptable here: partial_reads" in page and "fails the run" in page
    assert "1 failing, 1 indeterminate" in page and "Indeterminate runs" in page and "7, 9" in page
    assert "total 0.0" not in page and "6.0 s in all" in page
