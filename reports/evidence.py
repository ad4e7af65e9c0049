"""Bounded evidence: what a report shows of a value is short, whatever the value's size.

A history may carry a 64 MiB value; an anomaly case names it as writer, reader and value, and a counterexample
names it again. Every case and counterexample goes through :func:`bounded` (and every value described in a
counterexample through :func:`short_repr`), so a long string or a huge integer is shown once as its start, its
length and a digest that identifies it, and output stays proportional to the number of cases, not their size.
"""

from __future__ import annotations

import hashlib
from typing import Any

LIMIT = 200  # characters of a string (or digits of an integer) shown in full
ITEMS = 100  # items of a list shown (a poll's records, say); the rest are counted


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _short_str(s: str, limit: int) -> str:
    raw = s.encode("utf-8", "surrogatepass")
    return f"{s[:limit // 2]}…[{len(s)} chars, {len(raw)} bytes, sha256:{_digest(raw)}]"


def bounded(x: Any, limit: int = LIMIT) -> Any:
    """A copy of ``x`` (JSON-like data) with long strings and huge integers replaced by a short description."""
    if isinstance(x, str):
        return x if len(x) <= limit else _short_str(x, limit)
    if isinstance(x, bool) or x is None or isinstance(x, float):
        return x
    if isinstance(x, int):
        if -(10 ** limit) < x < 10 ** limit:
            return x
        return _big_int(x, limit)
    if isinstance(x, dict):
        return {k: bounded(v, limit) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        if len(x) > ITEMS:
            return [*(bounded(v, limit) for v in x[:ITEMS]), f"…[{len(x) - ITEMS} more]"]
        return [bounded(v, limit) for v in x]
    if isinstance(x, bytes):
        return x if len(x) <= limit else f"<{len(x)} bytes, sha256:{_digest(x)}>"
    return x


def short_repr(v: Any, limit: int = LIMIT) -> str:
    """``repr(v)``, bounded the same way."""
    if isinstance(v, str) and len(v) > limit:
        return repr(_short_str(v, limit))
    if isinstance(v, int) and not isinstance(v, bool) and not -(10 ** limit) < v < 10 ** limit:
        return _big_int(v, limit)
    return repr(v)


def _big_int(x: int, limit: int) -> str:
    try:
        return _short_str(str(x), limit)
    except ValueError:  # beyond the interpreter's digit limit for str(): describe it by its size
        return f"<integer of {x.bit_length()} bits, sha256:{_digest(x.to_bytes((x.bit_length() + 8) // 8, 'big', signed=True))}>"
