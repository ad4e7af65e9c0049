"""Field-by-field comparison of two targets' answers, and the tally the report is made of.

An answer is normalised (``conformance.diff.normalise``), flattened to ``{indexed path: value}`` leaves (an array
of plain values, e.g. ``isr_nodes``, is one leaf), and compared leaf by leaf. A field is a schema path without
indices (``responses[].partitions[].high_watermark``); per API key, version and field the tally counts the answers
that carry the field and the answers in which it differs, and keeps the first example with both answers.

A difference is *known* when a row of :data:`GAP_FIELDS` covers it: a deliberate difference of the reference
broker listed in ``reference_broker/GAPS.md`` (each entry names its row by the row's first cell). Everything
else is *unexplained*: a defect of one of the two targets until shown otherwise. A request one target answers and
the other does not (connection closed, no answer in time) differs in the pseudo-field ``<outcome>``.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .codec import api_name

ABSENT = "<absent>"
OUTCOME = "<outcome>"
_INDEX = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True)
class Gap:
    """A deliberate difference of the reference broker (a GAPS.md row) as the answer fields it shows in.

    ``when(path, a, b)`` narrows it to the values the row explains (None: any difference in those fields), ``a``
    being the reference broker's value (the Tally swaps the sides when the reference is target b)."""

    row: str                     # the first cell of the GAPS.md row
    api_key: int
    fields: str                  # a field path; "*" matches any characters
    when: Callable[[str, Any, Any], bool] | None = None
    note: str = ""


def _a_lacks(path: str, a: Any, b: Any) -> bool:
    return a == ABSENT or a == []


DESCRIBE_CONFIGS = "DescribeConfigs (key 32), CreateTopics v5+ configs"
# min.insync.replicas: KRaft 4.x keeps it as a cluster-level dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG, 3)
_MIN_ISR_SOURCE = "[name=min.insync.replicas].config_source"

GAP_FIELDS: tuple[Gap, ...] = (
    Gap("API versions", 18, "api_keys*", note="version ranges and the API keys served"),
    Gap("Feature flags (KIP-584)", 18, "*features*", note="supported/finalized features and their epoch"),
    Gap("Fetch size limits (KIP-74)", 1, "responses[].partitions[].records[].partial_bytes", _a_lacks,
        note="Kafka's answer ends in a batch cut at the size limit; the reference sends whole batches only"),
    Gap(DESCRIBE_CONFIGS, 19, "topics[].configs[].config_source",
        lambda p, a, b: p.endswith(_MIN_ISR_SOURCE) and (a, b) == (5, 3), note="min.insync.replicas source"),
    Gap(DESCRIBE_CONFIGS, 32, "results[].configs*", _a_lacks,
        note="broker settings the reference does not have, and the cluster's dynamic defaults (none here)"),
    Gap(DESCRIBE_CONFIGS, 32, "results[].configs[].config_type", lambda p, a, b: a == 0,
        note="config_type UNKNOWN"),
    Gap(DESCRIBE_CONFIGS, 32, "results[].configs[].config_source",
        lambda p, a, b: p.endswith(_MIN_ISR_SOURCE) and (a, b) == (5, 3), note="min.insync.replicas source"),
    Gap("Dynamic quorum (KIP-853)", 55, "topics[].partitions[].*[].replica_directory_id",
        lambda p, a, b: a is None and b == "<directory id>",
        note="the reference knows no directory ids: zero for every replica, Kafka's brokers (observers) send theirs"),
)


def _glob(pattern: str) -> re.Pattern[str]:
    """A field pattern: literal but for ``*`` (field paths are full of brackets, which fnmatch would read as sets)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def schema_path(path: str) -> str:
    return _INDEX.sub("[]", path)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of a normalised answer by indexed path (an empty array or object is a leaf)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        key = getattr(value, "key", None)      # a KeyedList: elements by their key, not their position
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{key}={v[key]}]" if key else f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def show(value: Any, limit: int = 300) -> Any:
    """A JSON-friendly rendering of a leaf or tree (bytes as text when printable, else hex), long values cut."""
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
            s = f"b{text!r}" if text.isprintable() else "0x" + value.hex()
        except UnicodeDecodeError:
            s = "0x" + value.hex()
        return s if len(s) <= limit else s[:limit] + f"… ({len(value)} bytes)"
    if isinstance(value, dict):
        return {k: show(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [show(v, limit) for v in value]
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"… ({len(value)} chars)"
    if isinstance(value, (int, float, bool)) or value is None or isinstance(value, str):
        return value
    return str(value)


@dataclass
class Difference:
    path: str
    field: str
    a: Any
    b: Any
    gap: str | None


def differences(api_key: int, a: dict[str, Any], b: dict[str, Any], reference: str | None = "a") -> list[Difference]:
    """Every leaf in which two normalised answers differ, each with the GAPS.md row that covers it (or None).
    ``reference``: which side is the reference broker ("a", "b"); GAPS.md rows are its gaps, so with None (two
    other brokers) no difference is known."""
    fa, fb = flatten(a), flatten(b)
    out = []
    for path in list(fa) + [p for p in fb if p not in fa]:
        va, vb = fa.get(path, ABSENT), fb.get(path, ABSENT)
        if va != vb:
            f = schema_path(path)
            gap = (known_gap(api_key, path, va, vb) if reference == "a" else
                   known_gap(api_key, path, vb, va) if reference == "b" else None)
            out.append(Difference(path, f, va, vb, gap))
    return out


def known_gap(api_key: int, path: str, a: Any, b: Any) -> str | None:
    """The GAPS.md row that explains a difference at ``path`` (indexed), or None."""
    field_path = schema_path(path)
    for g in GAP_FIELDS:
        if g.api_key == api_key and _glob(g.fields).fullmatch(field_path) and (
                g.when is None or g.when(path, a, b)):
            return g.row
    return None


@dataclass
class FieldTally:
    answers: int = 0
    differ: int = 0
    known: int = 0          # of ``differ``: covered by a GAPS.md row
    gap: str | None = None
    first: dict[str, Any] | None = None


@dataclass
class ApiTally:
    answers: int = 0
    answers_differing: int = 0
    reasked: int = 0
    fields: dict[str, FieldTally] = field(default_factory=dict)


class Tally:
    """Counts per (API key, version) and field, first examples, and the conversations that differ."""

    def __init__(self, reference: str | None = "a") -> None:
        self.reference = reference      # the side that is the reference broker (GAPS.md applies to it), or None
        self.apis: dict[tuple[int, int], ApiTally] = {}
        self.conversations: dict[str, dict[str, Any]] = {}

    def add(self, where: dict[str, Any], api_key: int, version: int, request: Any, a: dict[str, Any],
            b: dict[str, Any], *, reasked: bool = False) -> list[Difference]:
        """Compare one pair of normalised answers (``where`` names the conversation and step, for examples)."""
        t = self.apis.setdefault((api_key, version), ApiTally())
        t.answers += 1
        t.reasked += int(reasked)
        seen = {schema_path(p) for p in list(flatten(a)) + list(flatten(b))}
        for f in seen:
            t.fields.setdefault(f, FieldTally()).answers += 1
        diffs = differences(api_key, a, b, self.reference)
        if diffs:
            t.answers_differing += 1
        per_field: dict[str, list[Difference]] = {}
        for d in diffs:
            per_field.setdefault(d.field, []).append(d)
        for f, ds in per_field.items():
            ft = t.fields[f]
            ft.differ += 1
            unexplained = [d for d in ds if d.gap is None]
            if not unexplained:
                ft.known += 1
                ft.gap = ds[0].gap
            if ft.first is None or (unexplained and ft.first.get("gap") is not None):
                d = unexplained[0] if unexplained else ds[0]
                ft.first = {**where, "path": d.path, "a": show(d.a), "b": show(d.b), "gap": d.gap,
                            "request": show(request), "answer_a": show(a), "answer_b": show(b)}
        if diffs:
            c = self.conversations.setdefault(where.get("conversation", "?"), {"differences": 0, "unexplained": 0})
            c["differences"] += len(diffs)
            c["unexplained"] += sum(1 for d in diffs if d.gap is None)
        return diffs

    # -- summaries --------------------------------------------------------------------------------------------
    @property
    def unexplained(self) -> int:
        """Fields (per API key and version) with at least one difference no GAPS.md row covers."""
        return sum(1 for t in self.apis.values() for f in t.fields.values() if f.differ > f.known)

    def to_json(self) -> dict[str, Any]:
        apis = []
        for (key, version), t in sorted(self.apis.items()):
            apis.append({"api_key": key, "api": api_name(key), "version": version, "answers": t.answers,
                         "answers_differing": t.answers_differing, "reasked": t.reasked,
                         "fields": [{"field": f, "answers": ft.answers, "differ": ft.differ, "known": ft.known,
                                     "gap": ft.gap, "first": ft.first}
                                    for f, ft in sorted(t.fields.items())]})
        fields = sum(len(t.fields) for t in self.apis.values())
        differing = sum(1 for t in self.apis.values() for f in t.fields.values() if f.differ)
        return {"summary": {"api_keys": len({k for k, _ in self.apis}), "api_versions": len(self.apis),
                            "answers": sum(t.answers for t in self.apis.values()), "fields": fields,
                            "fields_differing": differing, "fields_unexplained": self.unexplained,
                            "fields_known_gaps": differing - self.unexplained},
                "apis": apis, "conversations_differing": self.conversations}
