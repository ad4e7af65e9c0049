"""Jepsen EDN: export our histories so Elle/Knossos users can reuse them, and import Jepsen Kafka histories.

Jepsen's Kafka workload names partitions by integer *keys* and encodes operations as micro-op vectors::

    {:index 3, :time 120, :process 0, :type :ok, :f :send, :value [[:send 2 [4 17]]]}
    {:index 5, :time 150, :process 1, :type :ok, :f :poll, :value [[:poll {2 [[3 16] [4 17]]}]]}

Export numbers our ``"topic/partition"`` keys 0, 1, ... in sorted order (the mapping is written as a leading EDN
comment and returned); import maps Jepsen key ``k`` to topic ``"jepsen"``, partition ``k``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .io import History
from .schema import HistoryError, key_of, split_key, validate_op


@dataclass(frozen=True)
class Keyword:
    """An EDN keyword such as ``:send``."""

    name: str

    def __str__(self) -> str:
        return ":" + self.name


@dataclass(frozen=True)
class Symbol:
    name: str


K = Keyword


# ---------------------------------------------------------------- writer

_SAFE_STR = str.maketrans({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"})


def dumps(x: Any) -> str:
    """Render Python data as EDN: dict -> map, list -> vector, tuple -> list, set -> set, None -> nil."""
    if x is None:
        return "nil"
    if x is True:
        return "true"
    if x is False:
        return "false"
    if isinstance(x, Keyword):
        return str(x)
    if isinstance(x, Symbol):
        return x.name
    if isinstance(x, int | float):
        return repr(x)
    if isinstance(x, str):
        return '"' + x.translate(_SAFE_STR) + '"'
    if isinstance(x, dict):
        return "{" + ", ".join(f"{dumps(k)} {dumps(v)}" for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + " ".join(dumps(v) for v in x) + "]"
    if isinstance(x, tuple):
        return "(" + " ".join(dumps(v) for v in x) + ")"
    if isinstance(x, set | frozenset):
        return "#{" + " ".join(dumps(v) for v in x) + "}"
    raise TypeError(f"cannot render {type(x).__name__} as EDN")


# ---------------------------------------------------------------- reader

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<ws>[\s,]+) |
      (?P<comment>;[^\n]*) |
      (?P<str>"(?:[^"\\]|\\.)*") |
      (?P<open>\#\{|[\[({]) |
      (?P<close>[\])}]) |
      (?P<discard>\#_) |
      (?P<tag>\#[A-Za-z][\w.\-/]*) |
      (?P<atom>[^\s,\[\](){}";]+)
    )""",
    re.VERBOSE,
)
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_UNESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class EDNError(HistoryError):
    pass


def _atom(tok: str) -> Any:
    if tok == "nil":
        return None
    if tok == "true":
        return True
    if tok == "false":
        return False
    if tok.startswith(":"):
        return Keyword(tok[1:])
    if _INT.match(tok):
        return int(tok.rstrip("N"))
    if _FLOAT.match(tok):
        return float(tok.rstrip("M"))
    if tok.startswith("\\"):
        return tok[1:]
    return Symbol(tok)


def _freeze(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted(((_freeze(k), _freeze(v)) for k, v in x.items()), key=repr))
    return x


def loads_all(text: str) -> list[Any]:
    """Parse every top-level EDN form in ``text``. Tagged literals (``#jepsen.history.Op{...}``) become the form."""
    pos = 0
    n = len(text)
    stack: list[tuple[str, list]] = []
    out: list[Any] = []
    pending_tags: list[int] = []  # stack depths at which a tag or discard awaits its form
    discards: list[int] = []

    def emit(v: Any) -> None:
        depth = len(stack)
        if discards and discards[-1] == depth:
            discards.pop()
            return
        while pending_tags and pending_tags[-1] == depth:
            pending_tags.pop()
        if stack:
            stack[-1][1].append(v)
        else:
            out.append(v)

    while pos < n:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise EDNError(f"unreadable EDN at character {pos}")
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind) if kind else None
        if kind in ("ws", "comment") or kind is None:
            continue
        if kind == "str":
            body = tok[1:-1]
            emit(re.sub(r"\\(.)", lambda mm: _UNESC.get(mm.group(1), mm.group(1)), body))
        elif kind == "open":
            stack.append((tok, []))
        elif kind == "close":
            if not stack:
                raise EDNError(f"unbalanced {tok!r} at character {pos}")
            opener, items = stack.pop()
            if {"[": "]", "(": ")", "{": "}", "#{": "}"}[opener] != tok:
                raise EDNError(f"mismatched {opener!r} closed by {tok!r} at character {pos}")
            if opener == "{":
                if len(items) % 2:
                    raise EDNError(f"map with odd number of forms ending at character {pos}")
                emit({_freeze(items[i]): items[i + 1] for i in range(0, len(items), 2)})
            elif opener == "#{":
                emit({_freeze(v) for v in items})
            else:
                emit(items)
        elif kind == "discard":
            discards.append(len(stack))
        elif kind == "tag":
            pending_tags.append(len(stack))
        else:
            emit(_atom(tok))
    if stack:
        raise EDNError("truncated EDN: unclosed collection at end of input")
    return out


# ---------------------------------------------------------------- export

def _kw(s: str) -> Keyword:
    return Keyword(s)


def _pair_value(r: dict) -> list:
    return [r.get("offset"), r["value"]]


def _send_records(value: dict) -> list[dict]:
    return value["records"] if "records" in value else [value]


def to_jepsen_ops(h: History) -> tuple[list[dict], dict[str, int]]:
    """Our operations as Jepsen Kafka op maps (keyword keys) plus the key -> integer mapping used."""
    keys: set[str] = set()
    for op in h.ops:
        v = op.get("value") or {}
        if op["f"] == "send":
            keys.update(key_of(r["topic"], r["partition"]) for r in _send_records(v))
        elif op["f"] == "poll" and op["type"] == "ok":
            keys.update(key_of(r["topic"], r["partition"]) for r in v["records"])
        elif op["f"] == "assign":
            keys.update(v["partitions"])
        elif op["f"] == "txn":
            for m in v["ops"]:
                if m["f"] == "send":
                    keys.add(key_of(m["topic"], m["partition"]))
                else:
                    keys.update(key_of(r["topic"], r["partition"]) for r in m.get("records") or ())
    kmap = {k: i for i, k in enumerate(sorted(keys, key=lambda k: (split_key(k)[0], split_key(k)[1])))}
    out = []
    for op in h.ops:
        f, typ, v = op["f"], op["type"], op.get("value")
        if f == "send":
            mops = []
            for r in _send_records(v):
                k = kmap[key_of(r["topic"], r["partition"])]
                if typ == "invoke":
                    mops.append([_kw("send"), k, r["value"]])
                else:
                    mops.append([_kw("send"), k, [r.get("offset") if typ == "ok" else None, r["value"]]])
            value: Any = mops
        elif f == "poll":
            if typ == "ok":
                polled: dict[int, list] = {}
                for r in v["records"]:
                    polled.setdefault(kmap[key_of(r["topic"], r["partition"])], []).append(_pair_value(r))
                value = [[_kw("poll"), polled]]
            else:
                value = [[_kw("poll")]]
        elif f == "txn":
            value = []
            for m in v["ops"]:
                if m["f"] == "send":
                    k = kmap[key_of(m["topic"], m["partition"])]
                    value.append([_kw("send"), k, m["value"] if typ == "invoke" else
                                  [m.get("offset") if typ == "ok" else None, m["value"]]])
                elif "records" in m and typ != "invoke":
                    polled = {}
                    for r in m["records"]:
                        polled.setdefault(kmap[key_of(r["topic"], r["partition"])], []).append(_pair_value(r))
                    value.append([_kw("poll"), polled])
                else:
                    value.append([_kw("poll")])
        elif f == "assign":
            value = [kmap[k] for k in v["partitions"]]
        elif f == "subscribe":
            value = [i for k, i in kmap.items() if split_key(k)[0] in set(v["topics"])]
        else:
            value = v
        proc: Any = _kw("nemesis") if op["process"] < 0 else op["process"]
        out.append(
            {
                _kw("index"): op["index"],
                _kw("time"): op["time_ns"],
                _kw("type"): _kw(typ),
                _kw("process"): proc,
                _kw("f"): _kw(f),
                _kw("value"): value,
            }
        )
    return out, kmap


def export_edn(h: History, path: str | None = None) -> str:
    """Render a run as a Jepsen history (one op map per line, like Jepsen's history.edn); optionally write it."""
    ops, kmap = to_jepsen_ops(h)
    lines = [f";; run {h.run_id} target {h.target}; keys: " + ", ".join(f"{i}={k}" for k, i in kmap.items())]
    lines += [dumps(o) for o in ops]
    text = "\n".join(lines) + "\n"
    if path is not None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return text


# ---------------------------------------------------------------- import

def _get(m: dict, name: str, default: Any = None) -> Any:
    return m.get(Keyword(name), default)


def _name(x: Any) -> Any:
    return x.name if isinstance(x, Keyword | Symbol) else x


def _plain(x: Any) -> Any:
    """EDN data as JSON-like Python: keywords and symbols become strings, map keys strings, sets lists."""
    if isinstance(x, Keyword | Symbol):
        return x.name
    if isinstance(x, dict):
        return {str(_plain(k)): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_plain(v) for v in x]
    return x


def from_jepsen_ops(
    ops: Iterable[dict], run_id: str = "jepsen", topic: str = "jepsen", target: str = "jepsen"
) -> History:
    """Convert Jepsen Kafka op maps into a validated History (keys become partitions of ``topic``)."""
    h = History(run_id, target=target)
    in_flight: dict[Any, str] = {}
    for n, m in enumerate(ops, 1):
        if not isinstance(m, dict):
            raise HistoryError("Jepsen op is not a map", line=n)
        typ, f = _name(_get(m, "type")), _name(_get(m, "f"))
        proc = _get(m, "process")
        proc = -1 if _name(proc) == "nemesis" else proc
        raw = _get(m, "value")
        if f in ("send", "poll", "txn"):
            kinds = {_name(mop[0]) for mop in (raw or [])}
            f = "send" if kinds == {"send"} else ("poll" if kinds <= {"poll"} else "txn")
        if f == "txn":  # a mixed send/poll transaction: one txn op (history/schema.py)
            mops_out: list[dict] = []
            for mop in raw:
                if _name(mop[0]) == "send":
                    _, k, v = mop
                    r = {"f": "send", "topic": topic, "partition": int(k), "key": None}
                    if isinstance(v, list):
                        r["value"] = _freeze(v[1])
                        if typ == "ok" and v[0] is not None:
                            r["offset"] = int(v[0])
                    else:
                        r["value"] = _freeze(v)
                    mops_out.append(r)
                elif _name(mop[0]) == "poll":
                    pm: dict = {"f": "poll"}
                    if len(mop) > 1 and mop[1] is not None:
                        pm["records"] = [{"topic": topic, "partition": int(k), "offset": int(off), "key": None,
                                          "value": _freeze(v)} for k, pairs in mop[1].items() for off, v in pairs]
                    elif typ == "ok":
                        pm["records"] = []
                    mops_out.append(pm)
                else:
                    raise HistoryError(f"txn micro-op {_name(mop[0])!r} is neither send nor poll", line=n)
            value: Any = {"txn_id": f"jepsen-{_name(proc)}", "ops": mops_out}
        elif f == "send":
            recs = []
            for mop in raw:
                _, k, v = mop
                r = {"topic": topic, "partition": int(k), "key": None}
                if isinstance(v, list):
                    r["value"] = _freeze(v[1])
                    if typ == "ok" and v[0] is not None:
                        r["offset"] = int(v[0])
                else:
                    r["value"] = _freeze(v)
                recs.append(r)
            value = recs[0] if len(recs) == 1 else {"records": recs}
        elif f == "poll":
            records = []
            if typ == "ok":
                for mop in raw or []:
                    if len(mop) > 1 and mop[1]:
                        for k, pairs in mop[1].items():
                            for off, v in pairs:
                                records.append(
                                    {"topic": topic, "partition": int(k), "offset": int(off), "key": None,
                                     "value": _freeze(v)}
                                )
                value = {"records": records}
            else:
                value = {}
        elif f == "assign":
            value = {"partitions": [key_of(topic, int(k)) for k in raw or []]}
        elif f == "subscribe":
            value = {"topics": [topic]}
        else:
            value = _plain(raw)
        if proc != -1 and typ == "invoke":
            in_flight[proc] = f
        elif proc != -1:
            in_flight.pop(proc, None)
        op = {
            "run_id": run_id,
            "index": int(_get(m, "index", n - 1)),
            "time_ns": int(_get(m, "time", 0)),
            "process": int(proc) if proc is not None else -1,
            "type": typ,
            "f": f,
            "value": value,
        }
        try:
            h.ops.append(validate_op(op))
        except HistoryError as e:
            raise HistoryError(e.reason, line=n) from None
    return h


def import_jepsen(path_or_text: str, *, run_id: str = "jepsen", topic: str = "jepsen") -> History:
    """Read a Jepsen Kafka history (history.edn: a vector of ops, or one op per line) from a path or EDN text."""
    text = path_or_text
    if "\n" not in path_or_text and not path_or_text.lstrip().startswith(("[", "{", "#")):
        with open(path_or_text, encoding="utf-8") as fh:
            text = fh.read()
    forms = loads_all(text)
    if len(forms) == 1 and isinstance(forms[0], list):
        forms = forms[0]
    return from_jepsen_ops(forms, run_id=run_id, topic=topic)
