"""What a check saw, kept with its result: request/response summaries, timings and free notes.

A divergence is only useful if a person can see *why* it is one, so every check gets an :class:`Evidence`
(the ``evidence`` fixture); the :class:`conformance.wire.Wire` helper fills it with each exchange on its own,
and checks add timings (drawn as plots in the report) and notes. Everything must be JSON-serialisable; bytes are
shown as their length and a short prefix. The list of exchanges is capped (first and last ones kept) so one
chatty check cannot bloat the results file.
"""
from __future__ import annotations

import time
from typing import Any

MAX_EXCHANGES = 40


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-safe summary of ``value`` (bytes → length + prefix, objects → their public fields, depth-capped)."""
    if depth > 8:
        return repr(value)[:200]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        return {"bytes": len(b), "head": b[:24].hex()} if b else {"bytes": 0}
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        out = [jsonable(v, depth + 1) for v in items[:50]]
        if len(items) > 50:
            out.append(f"... {len(items) - 50} more")
        return out
    fields = getattr(value, "_fields", None) or getattr(value, "fields", None)
    if hasattr(value, "to_dict") and callable(value.to_dict):
        try:
            return jsonable(value.to_dict(), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to the repr below
            pass
    if fields and not isinstance(fields, dict):
        try:
            return {str(f if isinstance(f, str) else getattr(f, "name", f)): jsonable(
                getattr(value, f if isinstance(f, str) else f.name), depth + 1) for f in fields}
        except Exception:  # noqa: BLE001
            pass
    if hasattr(value, "__dict__"):
        return {k: jsonable(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)[:500]


class Evidence:
    """Evidence for one check. ``note`` for facts, ``timing`` for measured durations, ``exchange`` for wire I/O."""

    def __init__(self) -> None:
        self.notes: dict[str, Any] = {}
        self.timings: list[dict[str, Any]] = []
        self.exchanges: list[dict[str, Any]] = []
        self.dropped_exchanges = 0
        self._t0 = time.monotonic_ns()

    def note(self, key: str, value: Any) -> None:
        """Record a fact under ``key`` (later notes with the same key replace earlier ones)."""
        self.notes[key] = jsonable(value)

    def timing(self, label: str, measured_ms: float, *, expect_min_ms: float | None = None,
               expect_max_ms: float | None = None, **context: Any) -> None:
        """A measured duration and the window Kafka's rule allows; the report plots one dot per timing."""
        self.timings.append({"label": label, "measured_ms": round(measured_ms, 3), "expect_min_ms": expect_min_ms,
                             "expect_max_ms": expect_max_ms, **{k: jsonable(v) for k, v in context.items()}})

    def exchange(self, api: str, version: int, request: Any, response: Any, rtt_ms: float | None,
                 *, label: str | None = None) -> None:
        """One request/response pair (summaries), with its round-trip time; capped at MAX_EXCHANGES."""
        entry = {"at_ms": round((time.monotonic_ns() - self._t0) / 1e6, 3), "api": api, "version": version,
                 "request": jsonable(request), "response": jsonable(response),
                 "rtt_ms": None if rtt_ms is None else round(rtt_ms, 3)}
        if label:
            entry["label"] = label
        if len(self.exchanges) >= MAX_EXCHANGES:
            # keep the first half and the most recent ones: the setup and the moment it went wrong
            del self.exchanges[MAX_EXCHANGES // 2]
            self.dropped_exchanges += 1
        self.exchanges.append(entry)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.notes:
            out["notes"] = self.notes
        if self.timings:
            out["timings"] = self.timings
        if self.exchanges:
            out["exchanges"] = self.exchanges
        if self.dropped_exchanges:
            out["dropped_exchanges"] = self.dropped_exchanges
        return out
