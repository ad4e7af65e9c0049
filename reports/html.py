"""The HTML report (Jinja2 template + inline SVG plots) from a Spark job's collected tables."""

from __future__ import annotations

import json
import os
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from . import svg
from .anomalies import ACCEPTABLE, RESTS_ON_ABSENCE
from .latency import LAT_EDGES_NS
from .txn import describe

NO_FAULTS = "no faults"          # how a run without a nemesis is named (its nemesis is None)
INDETERMINATE_COLOUR = "#f2c14e"

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def nemesis_label(nemesis: Any) -> str:
    """A run's nemesis as a reader should see it: a fault-free run is named so, not "None"."""
    return NO_FAULTS if nemesis in (None, "", "None") else str(nemesis)


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters["nemesis"] = nemesis_label
    return env


def verdict_of(a: dict) -> str:
    """bad, indeterminate or acceptable (rows of older jobs only say acceptable or not)."""
    return a.get("verdict") or ("acceptable" if a.get("acceptable") else "bad")


def series_name(a: dict) -> str:
    v = verdict_of(a)
    return a["anomaly"] if v == "bad" else f"{a['anomaly']} ({'acceptable here' if v == 'acceptable' else v})"


def _bars_by(anomalies: list[dict], field: str) -> tuple[list[str], dict[str, list[float]], set[str], dict]:
    """Runs with each anomaly per ``field``: anomalies that fail runs first in colour, then indeterminate ones in
    amber, then those the runs' settings accept in grey, so the chart never shows an allowed anomaly as a failure."""
    label = nemesis_label if field == "nemesis" else str
    groups = sorted({label(a[field]) for a in anomalies}, key=lambda g: (g == NO_FAULTS, g))
    order = {"bad": 0, "indeterminate": 1, "acceptable": 2}
    names = sorted({(order[verdict_of(a)], series_name(a)) for a in anomalies})
    series = {n: [0.0] * len(groups) for _o, n in names}
    for a in anomalies:
        series[series_name(a)][groups.index(label(a[field]))] += a["runs"]
    muted = {n for o, n in names if o == 2}
    colours = {n: INDETERMINATE_COLOUR for o, n in names if o == 1}
    return groups, series, muted, colours


def _why(a: dict) -> str:
    v = verdict_of(a)
    if v == "acceptable":
        return f"acceptable here: {ACCEPTABLE[a['anomaly']][1]}" if a["anomaly"] in ACCEPTABLE else "acceptable here"
    if v == "indeterminate":
        return f"indeterminate: {RESTS_ON_ABSENCE.get(a['anomaly'], 'lines of the file were skipped')}"
    return "fails the run"


def render(res: Any) -> str:
    """Render a :class:`reports.spark_job.JobResult` as one self-contained HTML page."""
    failing = [r for r in res.runs if r.get("status", "valid" if r["valid"] else "invalid") == "invalid"]
    indeterminate = [r for r in res.runs if r.get("status") == "indeterminate"]
    target_names = sorted({t["target"] for t in res.targets})
    rule_matrix = {(r["rule"], r["target"]): r for r in res.rules}
    rule_names = sorted({r["rule"] for r in res.rules}, key=lambda n: (not n.startswith("linearizable"), n))
    g, s, m, c = _bars_by(res.anomalies, "target")
    plot_target = svg.grouped_bars("Runs with each anomaly, per target", g, s, muted=m, colours=c)
    g, s, m, c = _bars_by(res.anomalies, "nemesis")
    plot_nemesis = svg.grouped_bars("Runs with each anomaly, per nemesis", g, s, muted=m, colours=c)
    latency_plots = []
    for target in sorted(res.latency):
        for kind in ("send", "poll"):
            latency_plots.append(svg.histogram(f"{target}: ok {kind} latency", res.latency[target][kind],
                                               LAT_EDGES_NS))
    plot_timeline = svg.timeline(res.timeline["ops"], f"run {res.timeline['run_id']}") if res.timeline else ""
    evidence = []
    for e in getattr(res, "evidence", []) or []:
        cases = json.loads(e["cases"]) if e.get("cases") else {}
        cards = [f"{a}: {d}" for a, cs in cases.items() for c in cs[:3]
                 if isinstance(c, dict) and (d := describe(a, c))]
        evidence.append({**e, "counterexample": json.loads(e["counterexample"]) if e.get("counterexample") else None,
                         "cases": json.dumps(cases, indent=1)[:6000] if cases else None, "cards": cards})
    return _env().get_template("report.html.j2").render(
        runs=res.runs, failing=failing, indeterminate=indeterminate, targets=res.targets, target_names=target_names,
        rule_names=rule_names, rule_matrix=rule_matrix,
        anomalies=[{**a, "why": _why(a), "verdict": verdict_of(a)} for a in sorted(
            res.anomalies, key=lambda a: (a["target"], nemesis_label(a["nemesis"]), verdict_of(a) != "bad",
                                          a["anomaly"]))],
        plot_target=plot_target, plot_nemesis=plot_nemesis, latency_plots=latency_plots,
        timeline=res.timeline, plot_timeline=plot_timeline, evidence=evidence, errors=res.errors,
        timings=res.timings, nemesis_runs=getattr(res, "nemesis_runs", []),
        nemesis_anomalies=getattr(res, "nemesis_anomalies", []),
    )


def write_report(res: Any, path: str) -> str:
    """Write the report; returns its path."""
    html = render(res)
    if "://" in path and not path.startswith("file://"):
        raise ValueError(f"HTML report needs a local path, got {path}")
    path = path.removeprefix("file://")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(html)
    return path
