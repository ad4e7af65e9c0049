"""Percentiles and medians, as every benchmark here reports them."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence


def pct(xs: Sequence[float], q: float) -> float:
    """The q-quantile by rank (no interpolation): p99 of 20 samples is the largest, as a reader expects."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def p50_p99(xs: Sequence[float], digits: int = 3) -> dict[str, float | int | None]:
    """{"p50", "p99", "n"} of a sample (None for an empty one: a figure that could not be measured)."""
    if not xs:
        return {"p50": None, "p99": None, "n": 0}
    return {"p50": round(pct(xs, 0.5), digits), "p99": round(pct(xs, 0.99), digits), "n": len(xs)}


def median(xs: Sequence[float | None]) -> float | None:
    """Median of the measured values (None ignored: a repeat that failed must not count as zero)."""
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def load_average() -> str:
    """The load average, printed beside figures: on a shared machine it says how much to trust them."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"
