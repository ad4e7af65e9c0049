"""Tiny inline-SVG plots for the HTML report (no plotting dependency): grouped bars, histograms, a timeline."""

from __future__ import annotations

from html import escape

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#8c564b"]
TYPE_COLOURS = {"ok": "#59a14f", "fail": "#e15759", "info": "#f28e2b"}


MUTED = ["#c9c9c9", "#b3b3b3", "#dedede", "#a6a6a6", "#d4d4d4", "#bdbdbd"]   # series that do not fail anything


def grouped_bars(title: str, groups: list[str], series: dict[str, list[float]], width: int = 760,
                 height: int = 260, muted: frozenset[str] | set[str] = frozenset(),
                 colours: dict[str, str] | None = None) -> str:
    """Bars per group (x) and series (colour), with a legend; values >= 0. Series named in ``muted`` are drawn in
    greys (e.g. anomalies acceptable under the runs' settings beside ones that fail them); ``colours`` pins a
    series' colour."""
    if not groups or not series:
        return f"<p><em>{escape(title)}: nothing to plot.</em></p>"
    fill: dict[str, str] = {}
    for name in series:
        if colours and name in colours:
            fill[name] = colours[name]
        elif name in muted:
            fill[name] = MUTED[sum(1 for n in fill if n in muted) % len(MUTED)]
        else:
            fill[name] = PALETTE[sum(1 for n in fill if n not in muted) % len(PALETTE)]
    left, right, top, bottom = 50, 190, 28, 60
    pw, ph = width - left - right, height - top - bottom
    vmax = max((v for vals in series.values() for v in vals), default=0) or 1
    gw = pw / len(groups)
    bw = max(1.0, (gw * 0.8) / len(series))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot">',
           f'<text x="{left}" y="16" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>',
           f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" font-size="10">{vmax:g}</text>',
           f'<text x="{left - 6}" y="{top + ph}" text-anchor="end" font-size="10">0</text>']
    for gi, g in enumerate(groups):
        x0 = left + gi * gw + gw * 0.1
        for si, (_name, vals) in enumerate(series.items()):
            v = vals[gi]
            h = ph * v / vmax
            out.append(f'<rect x="{x0 + si * bw:.1f}" y="{top + ph - h:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                       f'fill="{fill[_name]}"><title>{escape(g)} / {escape(_name)}: {v:g}</title>'
                       "</rect>")
        out.append(f'<text x="{left + gi * gw + gw / 2:.1f}" y="{top + ph + 14}" text-anchor="middle" '
                   f'font-size="10">{escape(g[:18])}</text>')
    for si, name in enumerate(series):
        y = top + si * 14
        grey = ' fill="#777"' if name in muted else ""
        out.append(f'<rect x="{left + pw + 10}" y="{y}" width="10" height="10" fill="{fill[name]}"/>'
                   f'<text x="{left + pw + 24}" y="{y + 9}" font-size="10"{grey}>{escape(name[:26])}</text>')
    out.append("</svg>")
    return "".join(out)


def histogram(title: str, counts: list[int], edges_ns: list[float], width: int = 760, height: int = 220) -> str:
    """A latency histogram over log-spaced bins (edges in ns), labelled in ms."""
    total = sum(counts)
    if not total:
        return f"<p><em>{escape(title)}: no samples.</em></p>"
    left, top, bottom = 50, 28, 40
    pw, ph = width - left - 20, height - top - bottom
    bw = pw / len(counts)
    vmax = max(counts)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot">',
           f'<text x="{left}" y="16" font-weight="bold">{escape(title)} ({total} ops)</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>']
    for i, c in enumerate(counts):
        h = ph * c / vmax
        lo = edges_ns[i] / 1e6
        out.append(f'<rect x="{left + i * bw:.1f}" y="{top + ph - h:.1f}" width="{bw * 0.9:.1f}" height="{h:.1f}" '
                   f'fill="#4e79a7"><title>&gt;= {lo:g} ms: {c}</title></rect>')
        if i % 4 == 0:
            out.append(f'<text x="{left + i * bw:.1f}" y="{top + ph + 14}" font-size="10">{lo:g}</text>')
    out.append(f'<text x="{left + pw}" y="{top + ph + 30}" text-anchor="end" font-size="10">latency, ms (log)</text>')
    out.append("</svg>")
    return "".join(out)


def timeline(ops: list[dict], title: str, width: int = 980, max_ops: int = 4000) -> str:
    """Operations as bars from invoke to completion, one lane per process; flagged ops outlined in black;
    nemesis events (process -1) as vertical lines."""
    if not ops:
        return f"<p><em>{escape(title)}: no operations.</em></p>"
    if len(ops) > max_ops:  # keep every flagged op and nemesis event, thin the rest evenly
        keep = [o for o in ops if o["flagged"] or o["process"] < 0]
        rest = [o for o in ops if not (o["flagged"] or o["process"] < 0)]
        step = max(1, len(rest) // max(1, max_ops - len(keep)))
        ops = sorted(keep + rest[::step], key=lambda o: o["call"])
    procs = sorted({o["process"] for o in ops if o["process"] >= 0})
    lane = {p: i for i, p in enumerate(procs)}
    t0 = min(o["call"] for o in ops)
    t1 = max(o["ret"] for o in ops) or t0 + 1
    left, top, lh = 60, 28, 14
    pw = width - left - 20
    height = top + lh * len(procs) + 30
    span = max(1, t1 - t0)

    def x(t: float) -> float:
        return left + pw * (t - t0) / span

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot">',
           f'<text x="{left}" y="16" font-weight="bold">{escape(title)}</text>']
    for p, i in lane.items():
        out.append(f'<text x="{left - 6}" y="{top + i * lh + 10}" text-anchor="end" font-size="9">p{p}</text>')
    for o in ops:
        if o["process"] < 0:
            out.append(f'<line x1="{x(o["call"]):.1f}" y1="{top}" x2="{x(o["call"]):.1f}" '
                       f'y2="{top + lh * len(procs)}" stroke="#b07aa1" stroke-dasharray="3,2">'
                       f'<title>nemesis {escape(str(o["f"]))} #{o["index"]}</title></line>')
            continue
        y = top + lane[o["process"]] * lh + 2
        w = max(1.0, x(o["ret"]) - x(o["call"]))
        stroke = ' stroke="#000" stroke-width="1.5"' if o["flagged"] else ""
        out.append(f'<rect x="{x(o["call"]):.1f}" y="{y}" width="{w:.1f}" height="{lh - 4}" '
                   f'fill="{TYPE_COLOURS.get(o["type"], "#999")}"{stroke}>'
                   f'<title>#{o["index"]} p{o["process"]} {escape(str(o["f"]))} {o["type"]}'
                   f'{" (evidence)" if o["flagged"] else ""}</title></rect>')
    out.append(f'<text x="{left}" y="{height - 8}" font-size="10">0 ms</text>'
               f'<text x="{left + pw}" y="{height - 8}" font-size="10" text-anchor="end">{span / 1e6:.1f} ms</text>')
    out.append("</svg>")
    return "".join(out)
