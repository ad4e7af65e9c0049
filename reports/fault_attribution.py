"""Which faults preceded which anomalies: the per-nemesis breakdown of the Spark job and the run page.

Why: over many chaos runs, "lost-write in 3 of 20 runs" is less useful than "every lost write came within a
kill-leader after a stall-followers". A fault is in effect from the completion of its start to the invoke of
its stop (chaos/nemesis/runner.py). An anomaly case is attributed to every fault in effect at some time in
[earliest evidence time - WINDOW, latest evidence time]: the evidence's operations (a lost write's ack and the
read that missed it, two writers of one offset, ...) bracket when the damage was done. Attribution uses the
cases the checker kept (at most a few per anomaly and part), so it counts *sampled* cases; the run-level columns
(runs with the fault, failing runs) are exact.
"""

from __future__ import annotations

from typing import Any

WINDOW_NS = 10_000_000_000  # faults that ended up to 10 s before the evidence began still count as preceding it


def fault_intervals(ops: list[dict]) -> list[dict[str, Any]]:
    """{kind, id, start, end, params, ok} per fault, in start order; a fault never stopped lasts to the end."""
    starts: dict[Any, dict] = {}
    out = []
    end_ns = ops[-1]["time_ns"] if ops else 0
    for op in ops:
        if op.get("f") != "nemesis" or not isinstance(op.get("value"), dict):
            continue
        v = op["value"]
        if v.get("phase") == "start" and op["type"] != "invoke":
            starts[v.get("id")] = {"kind": str(v.get("fault")), "id": v.get("id"), "start": op["time_ns"],
                                   "params": v, "ok": "error" not in v}
        elif v.get("phase") == "stop" and op["type"] == "invoke" and v.get("id") in starts:
            s = starts.pop(v.get("id"))
            out.append({**s, "end": op["time_ns"]})
    out.extend({**s, "end": end_ns} for s in starts.values())
    return sorted(out, key=lambda f: f["start"])


def _times(x: Any, out: list[int]) -> None:
    if isinstance(x, dict):
        if isinstance(x.get("time_ns"), int) and "type" in x:
            out.append(x["time_ns"])
        for v in x.values():
            _times(v, out)
    elif isinstance(x, list):
        for v in x:
            _times(v, out)


def attribute(faults: list[dict], cases: dict[str, list], window_ns: int = WINDOW_NS) -> dict[str, dict[str, int]]:
    """{fault kind: {anomaly: sampled cases it preceded}}; faults that failed to apply are ignored."""
    out: dict[str, dict[str, int]] = {}
    applied = [f for f in faults if f["ok"]]
    for anomaly, items in cases.items():
        for case in items:
            ts: list[int] = []
            _times(case, ts)
            if not ts:
                continue
            lo, hi = min(ts) - window_ns, max(ts)
            for kind in {f["kind"] for f in applied if f["start"] <= hi and f["end"] >= lo}:
                d = out.setdefault(kind, {})
                d[anomaly] = d.get(anomaly, 0) + 1
    return out


def kinds(faults: list[dict]) -> dict[str, int]:
    """How many faults of each kind were applied."""
    out: dict[str, int] = {}
    for f in faults:
        if f["ok"]:
            out[f["kind"]] = out.get(f["kind"], 0) + 1
    return out
