"""``python -m reports conformance RESULTS.json [...] --out DIR``: conformance results → one static HTML page.

Input: the results files ``conformance.plugin`` writes (schema ``kct-conformance-results/1``), one per pytest
session and target. Output: ``DIR/index.html``, self-contained (inline CSS and SVG), with

- the target × rule matrix: per cell the worst outcome of the rule's checks on that target
  (divergence > error > pass > skipped), with counts and, for skips, the reason. Apache Kafka's runs (the
  ground truth) come first; a cell where Kafka itself diverges says so, since then the check is suspect;
- every divergence with its message and evidence (notes, timings, the wire exchanges, the assertion), beside
  Kafka's own outcome and last answers for the same check where a Kafka run is among the files;
- harness errors apart from divergences (they say nothing about the target);
- rule coverage: per rule, the reference broker's fault switches shown to break it (``switches`` in the results'
  rule catalogue, from ``conformance/coverage.py``) — a rule without one has checks nobody has shown can fail;
- timing plots: for each check that recorded timings (the fetch suite), the measured time per target against the
  window Kafka's rule allows.

Reads JSON only (never a broker, never the suites' code), so it runs anywhere the files are.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from html import escape
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
SCHEMA = "kct-conformance-results/1"
OUTCOMES = ("divergence", "error", "pass", "skipped")  # worst first
SYMBOL = {"pass": "✓", "divergence": "✗", "error": "⚠", "skipped": "–"}
COLOUR = {"pass": "#2e7d32", "divergence": "#c62828", "error": "#8e24aa", "skipped": "#757575"}


class ResultsError(ValueError):
    """A results file is missing, unreadable or not a conformance results file."""


def load(path: str) -> dict[str, Any]:
    """Read and minimally validate one results file."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ResultsError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("checks"), list):
        raise ResultsError(f"{path}: not a conformance results file (schema {SCHEMA})")
    doc["_path"] = path
    return doc


def _column_names(runs: list[dict[str, Any]]) -> list[str]:
    names = [str((r.get("target") or {}).get("name", "?")) for r in runs]
    faults = [((r.get("target") or {}).get("config") or {}).get("faults") or [] for r in runs]
    out = []
    for n, f in zip(names, faults, strict=True):
        out.append(f"{n} [faults: {', '.join(f)}]" if f else n)
    seen: dict[str, int] = defaultdict(int)
    for n in out:
        seen[n] += 1
    counter: dict[str, int] = defaultdict(int)
    final = []
    for n, r in zip(out, runs, strict=True):
        if seen[n] > 1:
            counter[n] += 1
            final.append(f"{n} #{counter[n]} ({str(r.get('run_id', ''))[-6:]})")
        else:
            final.append(n)
    return final


def is_kafka(run: dict[str, Any]) -> bool:
    """A run against Apache Kafka itself (the `kafka` target, or a docker target running Kafka's own jars)."""
    t = run.get("target") or {}
    return t.get("name") == "kafka" or str(t.get("version", "")).startswith("Apache Kafka")


def kafka_first(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kafka's runs first (the column of truth), the others in the order given."""
    return [r for r in runs if is_kafka(r)] + [r for r in runs if not is_kafka(r)]


def _check_key(c: dict[str, Any]) -> tuple[str, str]:
    """A check's identity across targets: (suite, test name with its parameters). Node ids differ between runs
    (pytest makes them relative to where it ran, and --pyargs runs outside the tree)."""
    node = str(c.get("nodeid", ""))
    return str(c.get("suite") or ""), str(c.get("name") or node.rsplit("::", 1)[-1])


def _worst(outcomes: list[str]) -> str:
    for o in OUTCOMES[:3]:
        if o in outcomes:
            return o
    return "skipped"


def _headline(message: str | None) -> str:
    """The check's own words and the failing comparison, without pytest's object-repr introspection."""
    if not message:
        return ""
    return "\n".join(line for line in message.splitlines() if not line.lstrip().startswith(("+", "where ")))


def timing_svg(title: str, rows: list[dict[str, Any]], width: int = 1100) -> str:
    """One row per measured timing: the allowed window as a green band, the measurement as a dot (red outside)."""
    if not rows:
        return ""
    left, right, top, row_h = 420, 70, 34, 22
    height = top + row_h * len(rows) + 36
    pw = width - left - right
    vmax = max(max(r["measured_ms"], r.get("expect_min_ms") or 0, r.get("expect_max_ms") or 0) for r in rows)
    vmax = max(vmax * 1.1, 10.0)

    def x(v: float) -> float:
        return left + pw * min(v, vmax) / vmax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="8" y="18" font-weight="bold" font-size="13">{escape(title)}</text>']
    # grid
    step = _nice_step(vmax)
    v = 0.0
    while v <= vmax:
        out.append(f'<line x1="{x(v):.1f}" y1="{top - 6}" x2="{x(v):.1f}" y2="{height - 30}" stroke="#e3e3e3"/>'
                   f'<text x="{x(v):.1f}" y="{height - 16}" font-size="10" text-anchor="middle">{v:g}</text>')
        v += step
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 3}" font-size="10" text-anchor="middle">'
               "milliseconds</text>")
    for i, r in enumerate(rows):
        y = top + i * row_h
        lo = r.get("expect_min_ms")
        hi = r.get("expect_max_ms")
        band_lo = x(lo or 0)
        band_hi = x(hi) if hi is not None else x(vmax)
        ok = (lo is None or r["measured_ms"] >= lo) and (hi is None or r["measured_ms"] <= hi)
        window = f"{'' if lo is None else f'{lo:g}'}–{'∞' if hi is None else f'{hi:g}'} ms"
        out.append(f'<text x="{left - 8}" y="{y + 14}" font-size="11" text-anchor="end">'
                   f'{escape(r["row"][:70])}</text>')
        out.append(f'<rect x="{band_lo:.1f}" y="{y + 3}" width="{max(band_hi - band_lo, 1):.1f}" height="{row_h - 6}"'
                   f' fill="#c8e6c9"><title>allowed: {escape(window)}</title></rect>')
        colour = "#2e7d32" if ok else "#c62828"
        out.append(f'<circle cx="{x(r["measured_ms"]):.1f}" cy="{y + row_h / 2:.1f}" r="5" fill="{colour}">'
                   f'<title>{escape(r["row"])}: {r["measured_ms"]:.1f} ms (allowed {escape(window)})</title></circle>'
                   f'<text x="{x(r["measured_ms"]) + 8:.1f}" y="{y + 15}" font-size="10" fill="{colour}">'
                   f'{r["measured_ms"]:.0f} ms</text>')
    out.append("</svg>")
    return "".join(out)


def _nice_step(vmax: float) -> float:
    raw = vmax / 6
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def build(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The template's view: matrix rows, divergences, errors, skips and timing plots."""
    runs = kafka_first(runs)
    columns = _column_names(runs)
    kafka_ci = [ci for ci, r in enumerate(runs) if is_kafka(r)]
    # Kafka's answer per check (the first Kafka run that ran it), for the cards and the matrix
    kafka_checks: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    for ci in kafka_ci:
        for c in runs[ci]["checks"]:
            kafka_checks.setdefault(_check_key(c), (ci, c))
    rules: dict[str, dict[str, Any]] = {}
    for r in runs:
        for rid, meta in (r.get("rules") or {}).items():
            rules.setdefault(rid, meta)
    cells: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for ci, r in enumerate(runs):
        for c in r["checks"]:
            for rid in c.get("rules") or ["(no rule)"]:
                rules.setdefault(rid, {"id": rid, "statement": "(not in the catalogue)", "source": "", "suite": "?"})
                cells[(rid, ci)].append(c)
    suites: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rid in sorted(rules):
        meta = rules[rid]
        row = {"id": rid, "statement": meta.get("statement", ""), "source": meta.get("source", ""), "cells": []}
        for ci in range(len(runs)):
            checks = cells.get((rid, ci), [])
            if not checks:
                row["cells"].append({"outcome": None, "text": "not run", "title": "no check of this rule ran"})
                continue
            outs = [c["outcome"] for c in checks]
            worst = _worst(outs)
            counts = {o: outs.count(o) for o in OUTCOMES if outs.count(o)}
            text = f"{SYMBOL[worst]} {worst}"
            if len(checks) > 1:
                text += f" {counts.get(worst, 0)} of {len(checks)} checks"
            others = ", ".join(f"{n} {o}" for o, n in counts.items() if o != worst)
            reasons = sorted({(c.get("message") or "").strip().splitlines()[0] if c.get("message") else ""
                              for c in checks if c["outcome"] == worst})
            reason = reasons[0][:160] if worst in ("skipped", "divergence", "error") and reasons else ""
            if others:
                reason = f"{reason} ({others})" if reason else f"also {others}"
            kafka_too = ci not in kafka_ci and worst == "divergence" and any(
                kafka_checks.get(_check_key(c), (0, {}))[1].get("outcome") == "divergence"
                for c in checks if c["outcome"] == "divergence")
            row["cells"].append({"outcome": worst, "text": text, "counts": counts, "reason": reason,
                                 "anchor": f"{worst}-{ci}-{rid}" if worst != "pass" else "",
                                 "kafka_too": kafka_too,
                                 "title": "; ".join(f"{c['name']}: {c['outcome']}" for c in checks)})
        if any(cell["outcome"] for cell in row["cells"]):
            suites[meta.get("suite", "?")].append(row)

    findings: dict[str, list[dict[str, Any]]] = {"divergence": [], "error": [], "skipped": []}
    for ci, r in enumerate(runs):
        for c in r["checks"]:
            if c["outcome"] in findings:
                ev = c.get("evidence") or {}
                findings[c["outcome"]].append({
                    "column": columns[ci], "ci": ci, "check": c, "rules": c.get("rules") or [],
                    "headline": _headline(c.get("message")),
                    "recent": (ev.get("exchanges") or [])[-3:],
                    "anchors": [f"{c['outcome']}-{ci}-{rid}" for rid in c.get("rules") or []],
                    "notes": json.dumps(ev.get("notes"), indent=1) if ev.get("notes") else "",
                    "timings": ev.get("timings") or [],
                    "exchanges": ev.get("exchanges") or [],
                    "plot": timing_svg(f"{c['name']} on {columns[ci]}", [
                        dict(t, row=t["label"]) for t in ev.get("timings") or []]),
                    "kafka": _kafka_side(kafka_checks.get(_check_key(c)), columns) if ci not in kafka_ci else None,
                })
    # timing plots: per check name (all targets together), rows = target × timing label
    by_check: dict[str, list[dict[str, Any]]] = defaultdict(list)
    check_rules: dict[str, list[str]] = {}
    for ci, r in enumerate(runs):
        for c in r["checks"]:
            for t in (c.get("evidence") or {}).get("timings") or []:
                key = c["name"]
                check_rules[key] = c.get("rules") or []
                by_check[key].append(dict(t, row=f"{columns[ci]}: {t['label']}"))
    plots = [{"check": k, "rules": check_rules[k], "svg": timing_svg(f"{k} — {', '.join(check_rules[k])}", v)}
             for k, v in sorted(by_check.items())]
    totals = []
    for ci, r in enumerate(runs):
        outs = [c["outcome"] for c in r["checks"]]
        t = r.get("target") or {}
        totals.append({"column": columns[ci], "version": t.get("version", "?"), "run_id": r.get("run_id"),
                       "started": r.get("started_at"), "duration_s": r.get("duration_s"),
                       "capabilities": ", ".join(t.get("capabilities") or []) or "none",
                       "durable": (t.get("config") or {}).get("durable"),
                       "counts": {o: outs.count(o) for o in ("pass", "divergence", "skipped", "error")},
                       "path": r.get("_path"), "history": r.get("history")})
    # rule coverage (teeth): rule × fault switch, from the catalogue in the results (files before it: not known)
    known = [m for m in rules.values() if "switches" in m]
    switches = sorted({s for m in known for s in m["switches"]})
    coverage = {"switches": switches, "rows": [
        {"id": m["id"], "suite": m.get("suite", "?"), "switches": set(m["switches"])}
        for m in sorted(known, key=lambda m: (m.get("suite", "?"), m["id"]))],
        "covered": sum(1 for m in known if m["switches"]), "total": len(known)}
    return {"columns": columns, "kafka_columns": [columns[ci] for ci in kafka_ci],
            "suites": dict(sorted(suites.items())), "findings": findings, "plots": plots,
            "coverage": coverage,
            "totals": totals, "symbol": SYMBOL, "colour": COLOUR,
            "generated": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())}


def _kafka_side(found: tuple[int, dict[str, Any]] | None, columns: list[str]) -> dict[str, Any]:
    """Kafka's outcome and last answers for the check a divergence card shows ({"ran": False} if no Kafka run
    ran that check)."""
    if found is None:
        return {"ran": False}
    ci, c = found
    ev = c.get("evidence") or {}
    return {"ran": True, "column": columns[ci], "outcome": c["outcome"], "headline": _headline(c.get("message")),
            "recent": (ev.get("exchanges") or [])[-3:]}


def render(runs: list[dict[str, Any]]) -> str:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=1, default=str, ensure_ascii=False)
    env.filters["tojson_compact"] = lambda v: json.dumps(v, default=str, ensure_ascii=False)
    return env.get_template("conformance.html.j2").render(**build(runs))


def write_report(paths: list[str], out_dir: str) -> str:
    """Render the results files into ``out_dir/index.html``; returns its path."""
    runs = [load(p) for p in paths]
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "index.html")
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(render(runs))
    return target


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", help="conformance results JSON files (one per target run)")
    p.add_argument("--out", required=True, help="directory for index.html")
    p.add_argument("--fail-on-divergence", action="store_true",
                   help="exit 1 when any check diverged or errored (default: 0 once the page is written)")


def run(args: argparse.Namespace) -> int:
    try:
        path = write_report(args.results, args.out)
    except ResultsError as exc:
        print(f"error: {exc}", file=__import__("sys").stderr)
        return 2
    print(path)
    if args.fail_on_divergence:
        bad = any(c["outcome"] in ("divergence", "error") for p in args.results for c in load(p)["checks"])
        return 1 if bad else 0
    return 0
