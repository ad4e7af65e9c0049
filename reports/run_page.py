"""One chaos run as an HTML page: the fault timeline drawn over send throughput and latency, next to the verdict.

Why: a verdict alone says *that* a run lost writes; the page shows *when*, against which fault, so a reader sees
"the leader was killed while its followers were stalled, then the acknowledged tail vanished".
Reads only the history (and an optional verdict JSON from `reports check --json`).
"""

from __future__ import annotations

import html
import json
from typing import Any

from history import read

from .fault_attribution import fault_intervals
from .txn import describe

W, H, PAD = 980, 180, 40
COLORS = {"kill": "#d62728", "pause": "#ff7f0e", "restart": "#9467bd", "partition": "#1f77b4",
          "latency": "#17becf", "kafka-error": "#8c564b", "stall-followers": "#e377c2", "kill-leader": "#7f0000"}


def per_second(ops: list[dict]) -> tuple[int, list[dict[str, float]]]:
    """Per second since the first op: ok/fail/info sends and send latency (median, max, in ms)."""
    if not ops:
        return 0, []
    t0 = ops[0]["time_ns"]
    invokes: dict[int, int] = {}
    buckets: dict[int, dict[str, Any]] = {}
    for op in ops:
        if op["f"] != "send":
            continue
        if op["type"] == "invoke":
            invokes[op["process"]] = op["time_ns"]
            continue
        t_inv = invokes.pop(op["process"], op["time_ns"])
        b = buckets.setdefault(int((op["time_ns"] - t0) // 1_000_000_000), {"ok": 0, "fail": 0, "info": 0, "lat": []})
        b[op["type"]] += 1
        if op["type"] == "ok":
            b["lat"].append((op["time_ns"] - t_inv) / 1e6)
    n = max(buckets) + 1 if buckets else 0
    rows = []
    for i in range(n):
        b = buckets.get(i, {"ok": 0, "fail": 0, "info": 0, "lat": []})
        lat = sorted(b["lat"])
        rows.append({"ok": b["ok"], "fail": b["fail"], "info": b["info"],
                     "p50": lat[len(lat) // 2] if lat else 0.0, "max": lat[-1] if lat else 0.0})
    return t0, rows


def _chart(title: str, rows: list[dict], series: list[tuple[str, str]], faults: list[dict], t0: int,
           log: bool = False) -> str:
    n = max(len(rows), 1)
    top = max([r[k] for r in rows for k, _ in series] + [1.0])
    x = lambda i: PAD + (W - 2 * PAD) * i / n  # noqa: E731
    y = lambda v: H - PAD - (H - 2 * PAD) * (v / top)  # noqa: E731
    parts = [f'<svg width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg" font-size="11">',
             f'<text x="{PAD}" y="14">{html.escape(title)} (max {top:.0f})</text>']
    for f in faults:
        a, b = (f["start"] - t0) / 1e9, (f["end"] - t0) / 1e9
        parts.append(f'<rect x="{x(a):.1f}" y="{PAD - 10}" width="{max(x(b) - x(a), 1):.1f}" height="{H - 2 * PAD + 10}" '
                     f'fill="{COLORS.get(f["kind"], "#999")}" opacity="0.18"><title>{html.escape(f["kind"])} '
                     f'#{f["id"]} {a:.1f}-{b:.1f}s</title></rect>')
    for key, color in series:
        pts = " ".join(f"{x(i + 0.5):.1f},{y(r[key]):.1f}" for i, r in enumerate(rows))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"><title>{key}</title></polyline>')
    parts.append(f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>')
    for s in range(0, n + 1, max(1, n // 10)):
        parts.append(f'<text x="{x(s):.1f}" y="{H - PAD + 14}">{s}s</text>')
    parts.append("</svg>")
    return "".join(parts)


def render(path: str, verdict: dict[str, Any] | None = None) -> str:
    (h, *_) = read(path)
    ops = h.ops
    faults = fault_intervals(ops)
    t0, rows = per_second(ops)
    v = verdict or {}
    status = "VALID" if v.get("valid") else ("INVALID" if v.get("anomalies") else "not checked")
    anomalies = v.get("anomalies", {})
    lines = [f"<!doctype html><meta charset=utf-8><title>chaos run {html.escape(h.run_id)}</title>",
             "<style>body{font-family:sans-serif;margin:20px} td,th{padding:2px 8px;text-align:left}"
             " .bad{color:#b00} pre{background:#f4f4f4;padding:6px;white-space:pre-wrap}</style>",
             f"<h1>chaos run {html.escape(h.run_id)}: <span class={'bad' if status == 'INVALID' else ''}>{status}"
             "</span></h1>",
             f"<p>target <b>{html.escape(str(h.target))}</b>, nemesis <b>{html.escape(str(h.nemesis))}</b>, "
             f"settings <code>{html.escape(json.dumps({k: x for k, x in h.settings.items() if k != 'faults'}))}</code></p>",
             _chart("sends/s (ok green, info orange, fail red) with faults shaded", rows,
                    [("ok", "#2ca02c"), ("info", "#ff7f0e"), ("fail", "#d62728")], faults, t0),
             _chart("send latency ms (median blue, max grey)", rows, [("p50", "#1f77b4"), ("max", "#999")], faults, t0),
             "<h2>Fault timeline</h2><table><tr><th>#</th><th>fault</th><th>from</th><th>to</th><th>params</th></tr>"]
    for f in faults:
        lines.append(f"<tr><td>{f['id']}</td><td style='color:{COLORS.get(f['kind'], '#999')}'>{html.escape(str(f['kind']))}"
                     f"</td><td>{(f['start'] - t0) / 1e9:.1f}s</td><td>{(f['end'] - t0) / 1e9:.1f}s</td><td><code>"
                     f"{html.escape(json.dumps({k: x for k, x in f['params'].items() if k not in ('fault', 'phase', 'id')}))}"
                     "</code></td></tr>")
    lines.append("</table><h2>Anomalies</h2>")
    if anomalies.get("counts"):
        lines.append("<table><tr><th>anomaly</th><th>count</th><th>acceptable here</th></tr>")
        for name, n in sorted(anomalies["counts"].items()):
            bad = name in anomalies.get("bad", [])
            lines.append(f"<tr class={'bad' if bad else ''}><td>{html.escape(name)}</td><td>{n}</td>"
                         f"<td>{'no' if bad else 'yes'}</td></tr>")
        lines.append("</table>")
        for name, cases in anomalies.get("cases", {}).items():
            lines.append(f"<h3>{html.escape(name)} — evidence</h3>")
            for c in cases[:5]:
                card = describe(name, c) if isinstance(c, dict) else None
                if card:
                    lines.append(f"<p class=card><b>{html.escape(name)}</b>: {html.escape(card)}</p>")
                lines.append(f"<pre>{html.escape(json.dumps(c, indent=1, default=str)[:3000])}</pre>")
    else:
        lines.append("<p>none found</p>" if v.get("anomalies") is not None else
                     f"<pre>{html.escape(str(v.get('error', 'no verdict')))}</pre>")
    for m, lv in v.get("linearizability", {}).items():
        lines.append(f"<p>linearizable {html.escape(m)}: <b>{html.escape(str(lv.get('verdict')))}</b> "
                     f"({lv.get('parts')} parts)</p>")
    return "\n".join(lines)


def add_arguments(p: Any) -> None:
    p.add_argument("path", help="the run's history file")
    p.add_argument("--verdict", help="JSON from `reports check --json` (one run object)")
    p.add_argument("--out", required=True, help="HTML file to write")


def run_from_args(args: Any) -> int:
    verdict = json.load(open(args.verdict)) if args.verdict else None
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(render(args.path, verdict))
    return 0
