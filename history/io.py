"""Validated reading and writing of histories as JSON Lines and Parquet (one schema; see history.schema).

Every reader validates as it goes: a corrupt or truncated line raises :class:`HistoryError` naming the file and
line, so a checker never sees malformed data. ``skip_corrupt=True`` instead skips such lines with a
``CorruptLineWarning`` (and drops completions whose invoke was skipped, so pairing stays sound).
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:  # orjson parses history lines several times faster; the standard library is the fallback
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where orjson is absent
    from json import loads as _loads

from .schema import COMPLETIONS, NEMESIS_PROCESS, TYPES, HistoryError, dumps, validate_header, validate_op


class CorruptLineWarning(UserWarning):
    """A corrupt line was skipped because the caller asked for ``skip_corrupt``."""


@dataclass
class History:
    """One run: its header fields and its operations in index order."""

    run_id: str
    ops: list[dict] = field(default_factory=list)
    target: str = "unknown"
    nemesis: str | None = None
    settings: dict = field(default_factory=dict)

    def header_line(self) -> dict:
        body: dict[str, Any] = {"target": self.target, "settings": self.settings}
        if self.nemesis is not None:
            body["nemesis"] = self.nemesis
        return {"run_id": self.run_id, "header": body}


_TYPES = frozenset(TYPES)
_SCALAR_CLASSES = frozenset((str, int, float, bool, type(None)))


def _plainly_valid(op: Any) -> bool:
    """True only for an operation :func:`validate_op` certainly accepts: the sends and polls that make up most
    of a history, checked flat (subscripts, no call per record) with exact classes. Anything else, or anything
    doubtful, returns False and goes to :func:`validate_op`, which accepts it or gives the reason."""
    if op.__class__ is not dict:
        return False
    try:
        if (op["run_id"].__class__ is not str or op["index"].__class__ is not int
                or op["time_ns"].__class__ is not int or op["process"].__class__ is not int):
            return False
        typ = op["type"]
        f = op["f"]
        if typ.__class__ is not str or typ not in _TYPES or f.__class__ is not str:
            return False
        if f == "poll":
            if typ != "ok":
                return True  # a poll invoke or an unsuccessful poll carries nothing the contract checks
            recs = op["value"]["records"]
            if recs.__class__ is not list:
                return False
            for r in recs:
                if (r.__class__ is not dict or r["topic"].__class__ is not str
                        or r["partition"].__class__ is not int or r["offset"].__class__ is not int
                        or r["value"].__class__ not in _SCALAR_CLASSES):
                    return False
            return True
        if f == "send":
            r = op["value"]
            if r.__class__ is not dict or "records" in r:
                return False
            off = r.get("offset")
            return (r["topic"].__class__ is str and r["partition"].__class__ is int
                    and (off is None or off.__class__ is int) and r["value"].__class__ in _SCALAR_CLASSES)
    except (KeyError, TypeError):
        return False
    return False


class _RunBuilder:
    """Per-run cross-line checks: increasing index, monotonic time, invoke/complete pairing."""

    def __init__(self, hist: History) -> None:
        self.hist = hist
        self.last_index = -1
        self.last_time = -(1 << 62)
        self.in_flight: dict[int, str] = {}

    def add(self, op: dict) -> None:
        idx, t = op["index"], op["time_ns"]
        if idx <= self.last_index:
            raise HistoryError(f"index {idx} does not increase (previous {self.last_index})")
        if t < self.last_time:
            raise HistoryError(f"time_ns {t} goes backwards (previous {self.last_time})")
        p, typ, f = op["process"], op["type"], op["f"]
        if p != NEMESIS_PROCESS:
            if typ == "invoke":
                if p in self.in_flight:
                    raise HistoryError(f"process {p} invokes {f} while {self.in_flight[p]} is in flight")
                self.in_flight[p] = f
            else:
                pending = self.in_flight.pop(p, None)
                if pending is None:
                    raise HistoryError(f"{typ} {f} on process {p} without an invoke")
                if pending != f:
                    raise HistoryError(f"{typ} {f} on process {p} completes an invoke of {pending}")
        self.last_index, self.last_time = idx, t
        self.hist.ops.append(op)


def _header_fields(hist: History, body: dict) -> None:
    hist.target = body.get("target") or "unknown"
    hist.nemesis = body.get("nemesis")
    hist.settings = dict(body.get("settings") or {})


def iter_lines_validated(
    lines: Iterable[str], *, path: str | None = None, skip_corrupt: bool = False
) -> list[History]:
    """Parse JSONL text lines into runs, validating each line and the pairing across lines."""
    runs: dict[str, _RunBuilder] = {}
    order: list[str] = []
    skipped_invokes: set[tuple[str, int]] = set()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        try:
            try:
                obj = _loads(line)
            except json.JSONDecodeError as e:
                raise HistoryError(f"corrupt or truncated JSON ({e.msg} at column {e.colno})") from None
            if isinstance(obj, dict) and "header" in obj:
                body = validate_header(obj)
                rb = runs.get(obj["run_id"])
                if rb is None:
                    rb = runs[obj["run_id"]] = _RunBuilder(History(obj["run_id"]))
                    order.append(obj["run_id"])
                _header_fields(rb.hist, body)
                continue
            op = obj if _plainly_valid(obj) else validate_op(obj)
            rid = op["run_id"]
            rb = runs.get(rid)
            if rb is None:
                rb = runs[rid] = _RunBuilder(History(rid))
                order.append(rid)
            if skip_corrupt and op["type"] in COMPLETIONS and (rid, op["process"]) in skipped_invokes:
                skipped_invokes.discard((rid, op["process"]))
                warnings.warn(
                    f"{path or 'history'}:{lineno}: dropped completion whose invoke was corrupt",
                    CorruptLineWarning,
                    stacklevel=2,
                )
                continue
            rb.add(op)
        except HistoryError as e:
            if not skip_corrupt:
                raise HistoryError(e.reason, line=lineno, path=path) from None
            warnings.warn(f"{path or 'history'}:{lineno}: skipped: {e.reason}", CorruptLineWarning, stacklevel=2)
            try:  # remember a skipped invoke so its completion is dropped too
                o = json.loads(line)
                if isinstance(o, dict) and o.get("type") == "invoke":
                    skipped_invokes.add((o.get("run_id"), o.get("process")))
            except (json.JSONDecodeError, TypeError):
                pass
    return [runs[r].hist for r in order]


def _open_text(path: str) -> io.TextIOBase:
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115


def read_jsonl(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read every run in a JSONL (optionally .gz) file."""
    try:
        with _open_text(path) as fh:
            return iter_lines_validated(fh, path=path, skip_corrupt=skip_corrupt)
    except UnicodeDecodeError as e:
        raise HistoryError(f"not UTF-8 text ({e.reason})", path=path) from None
    except (EOFError, gzip.BadGzipFile, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise HistoryError("no such file", path=path) from None
        raise HistoryError(f"cannot read: {e}", path=path) from None


def write_jsonl(histories: History | Iterable[History], path: str) -> None:
    """Write runs as JSONL: a header line, then one line per operation."""
    hs = [histories] if isinstance(histories, History) else list(histories)
    opener = gzip.open(path, "wt", encoding="utf-8") if path.endswith(".gz") else open(path, "w", encoding="utf-8")
    with opener as fh:
        for h in hs:
            fh.write(dumps(h.header_line()) + "\n")
            for op in h.ops:
                fh.write(dumps(op) + "\n")


# ---------------------------------------------------------------- Parquet

def _arrow_schema():  # noqa: ANN202 - pyarrow is imported lazily
    import pyarrow as pa

    return pa.schema(
        [
            ("run_id", pa.string()),
            ("index", pa.int64()),
            ("time_ns", pa.int64()),
            ("process", pa.int64()),
            ("type", pa.string()),
            ("f", pa.string()),
            ("value", pa.string()),
            ("target", pa.string()),
            ("nemesis", pa.string()),
            ("settings", pa.string()),
        ]
    )


def to_arrow(histories: Iterable[History]):  # noqa: ANN201
    """Runs as one Arrow table with the Parquet schema (``value`` and ``settings`` as JSON text)."""
    import pyarrow as pa

    cols: dict[str, list] = {n: [] for n in _arrow_schema().names}
    for h in histories:
        settings = dumps(h.settings)
        for op in h.ops:
            cols["run_id"].append(op["run_id"])
            cols["index"].append(op["index"])
            cols["time_ns"].append(op["time_ns"])
            cols["process"].append(op["process"])
            cols["type"].append(op["type"])
            cols["f"].append(op["f"])
            cols["value"].append(dumps(op.get("value")))
            cols["target"].append(h.target)
            cols["nemesis"].append(h.nemesis)
            cols["settings"].append(settings)
    return pa.table(cols, schema=_arrow_schema())


def write_parquet(histories: History | Iterable[History], path: str) -> None:
    """Write runs to one Parquet file."""
    import pyarrow.parquet as pq

    hs = [histories] if isinstance(histories, History) else list(histories)
    pq.write_table(to_arrow(hs), path)


def from_arrow(table, *, path: str | None = None, skip_corrupt: bool = False) -> list[History]:  # noqa: ANN001
    """Validate an Arrow table with the Parquet schema into runs; errors name the row (1-based)."""
    missing = [c for c in ("run_id", "index", "time_ns", "process", "type", "f", "value") if c not in table.column_names]
    if missing:
        raise HistoryError(f"Parquet file lacks columns {missing}", path=path)
    d = table.to_pydict()
    n = table.num_rows
    runs: dict[str, _RunBuilder] = {}
    order: list[str] = []
    targets = d.get("target") or [None] * n
    nemeses = d.get("nemesis") or [None] * n
    settings = d.get("settings") or [None] * n
    for i in range(n):
        try:
            raw = d["value"][i]
            try:
                value = _loads(raw) if raw is not None else None
            except json.JSONDecodeError as e:
                raise HistoryError(f"value is corrupt JSON ({e.msg})") from None
            op = {
                "run_id": d["run_id"][i],
                "index": d["index"][i],
                "time_ns": d["time_ns"][i],
                "process": d["process"][i],
                "type": d["type"][i],
                "f": d["f"][i],
                "value": value,
            }
            if not _plainly_valid(op):
                validate_op(op)
            rb = runs.get(op["run_id"])
            if rb is None:
                h = History(op["run_id"], target=targets[i] or "unknown", nemesis=nemeses[i])
                if settings[i]:
                    h.settings = json.loads(settings[i])
                rb = runs[op["run_id"]] = _RunBuilder(h)
                order.append(op["run_id"])
            rb.add(op)
        except (HistoryError, json.JSONDecodeError) as e:
            reason = e.reason if isinstance(e, HistoryError) else str(e)
            if not skip_corrupt:
                raise HistoryError(reason, line=i + 1, path=path) from None
            warnings.warn(f"{path or 'parquet'}: row {i + 1} skipped: {reason}", CorruptLineWarning, stacklevel=2)
    return [runs[r].hist for r in order]


def read_parquet(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read every run in a Parquet file written with :func:`write_parquet`'s schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise HistoryError("no such file", path=path) from None
    except (pa.ArrowException, OSError) as e:
        raise HistoryError(f"not a readable Parquet file: {e}", path=path) from None
    return from_arrow(table, path=path, skip_corrupt=skip_corrupt)


def is_parquet_name(path: str) -> bool:
    return path.endswith((".parquet", ".pq"))


def read(path: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read a history file by extension: ``.parquet``/``.pq`` or JSON Lines (``.jsonl``, ``.jsonl.gz``)."""
    if is_parquet_name(path):
        return read_parquet(path, skip_corrupt=skip_corrupt)
    return read_jsonl(path, skip_corrupt=skip_corrupt)


def read_bytes(data: bytes, name: str, *, skip_corrupt: bool = False) -> list[History]:
    """Read a history file's content (as Spark's binaryFile source hands it over); ``name`` picks the format."""
    if is_parquet_name(name):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as e:
            raise HistoryError(f"not a readable Parquet file: {e}", path=name) from None
        return from_arrow(table, path=name, skip_corrupt=skip_corrupt)
    if name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, OSError) as e:
            raise HistoryError(f"cannot read: {e}", path=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HistoryError(f"not UTF-8 text ({e.reason})", path=name) from None
    return iter_lines_validated(text.splitlines(), path=name, skip_corrupt=skip_corrupt)


HISTORY_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".pq")


def expand_paths(spec: str) -> list[str]:
    """A directory (its history files, recursively), a glob, or a file -> sorted file paths."""
    if os.path.isdir(spec):
        out = []
        for root, _dirs, files in os.walk(spec):
            out += [os.path.join(root, f) for f in files if f.endswith(HISTORY_SUFFIXES)]
        return sorted(out)
    if any(c in spec for c in "*?["):
        return sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
    return [spec] if os.path.isfile(spec) else []


def iter_histories(paths: Iterable[str], *, skip_corrupt: bool = False) -> Iterator[History]:
    for p in paths:
        yield from read(p, skip_corrupt=skip_corrupt)
