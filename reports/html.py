"""The HTML report (Jinja2 template + inline SVG plots) from a Spark job's collected tables."""

from __future__ import annotations

import json
import os
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from . import svg
from .latency import LAT_EDGES_NS

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))


def _bars_by(anomalies: list[dict], field: str) -> tuple[list[str], dict[str, list[float]]]:
    groups = sorted({str(a[field]) for a in anomalies})
    names = sorted({a["anomaly"] for a in anomalies})
    series = {n: [0.0] * len(groups) for n in names}
    for a in anomalies:
        series[a["anomaly"]][groups.index(str(a[field]))] += a["runs"]
    return groups, series


def render(res: Any) -> str:
    """Render a :class:`reports.spark_job.JobResult` as one self-contained HTML page."""
    failing = [r for r in res.runs if not r["valid"]]
    target_names = sorted({t["target"] for t in res.targets})
    rule_matrix = {(r["rule"], r["target"]): r for r in res.rules}
    rule_names = sorted({r["rule"] for r in res.rules}, key=lambda n: (not n.startswith("linearizable"), n))
    g, s = _bars_by(res.anomalies, "target")
    plot_target = svg.grouped_bars("Runs with each anomaly, per target", g, s)
    g, s = _bars_by(res.anomalies, "nemesis")
    plot_nemesis = svg.grouped_bars("Runs with each anomaly, per nemesis", g, s)
    latency_plots = []
    for target in sorted(res.latency):
        for kind in ("send", "poll"):
            latency_plots.append(svg.histogram(f"{target}: ok {kind} latency", res.latency[target][kind],
                                               LAT_EDGES_NS))
    plot_timeline = svg.timeline(res.timeline["ops"], f"run {res.timeline['run_id']}") if res.timeline else ""
    evidence = []
    for e in getattr(res, "evidence", []) or []:
        evidence.append({**e, "counterexample": json.loads(e["counterexample"]) if e.get("counterexample") else None,
                         "cases": json.dumps(json.loads(e["cases"]), indent=1)[:6000] if e.get("cases") else None})
    return _env().get_template("report.html.j2").render(
        runs=res.runs, failing=failing, targets=res.targets, target_names=target_names, rule_names=rule_names,
        rule_matrix=rule_matrix, anomalies=sorted(res.anomalies, key=lambda a: (a["target"], str(a["nemesis"]),
                                                                               a["anomaly"])),
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
