"""Latency histograms of ok sends and polls (invoke -> completion), in fixed log-spaced bins.

Its own module so the Spark job (which computes them) and the HTML report (which plots them) share the bins
without importing each other.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter

# Latency histogram bins: edges at 10^(3 + i/4) ns, i = 0..32 (1 microsecond .. 100 s); last bin is open.
LAT_BINS = 33
LAT_EDGES_NS = [10 ** (3 + i / 4) for i in range(LAT_BINS)]
_EDGES = tuple(LAT_EDGES_NS)

_LAT_FIELDS = itemgetter("process", "type", "f", "time_ns")
_TYPE_CODE = {"invoke": 0, "ok": 1}
_F_CODE = {"send": 0, "poll": 1}


def latency_histograms(ops: list[dict]) -> tuple[list[int], list[int]]:
    """Histograms of ok send and ok poll latencies (invoke -> completion) over LAT_EDGES_NS.

    A completion pairs with its process's operation just before it when that one is an invoke (what a dict of
    calls in flight per process gives), found for all operations at once by a stable sort on the process."""
    import numpy as np

    if not ops:
        return [0] * LAT_BINS, [0] * LAT_BINS
    n = len(ops)
    proc, typ, f, t = zip(*map(_LAT_FIELDS, ops), strict=True)
    proc = np.fromiter(proc, dtype=np.int64, count=n)
    t = np.fromiter(t, dtype=np.int64, count=n)
    typ = np.fromiter(map(_TYPE_CODE.get, typ, repeat(2)), dtype=np.int8, count=n)  # C-level lookups, no ==
    f = np.fromiter(map(_F_CODE.get, f, repeat(2)), dtype=np.int8, count=n)
    order = np.argsort(proc, kind="stable")
    prev, cur = order[:-1], order[1:]
    paired = (proc[prev] == proc[cur]) & (typ[prev] == 0) & (typ[cur] == 1)
    out = []
    for code in (0, 1):  # send, poll
        sel = paired & (f[cur] == code)
        lat = t[cur[sel]] - t[prev[sel]]
        bins = np.maximum(np.searchsorted(_EDGES, lat, side="right") - 1, 0)
        out.append(np.bincount(bins, minlength=LAT_BINS).tolist())
    return out[0], out[1]
