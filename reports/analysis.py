"""One run's verdict, computed either directly or part by part (the Spark job's way), with identical results.

Every Kafka analysis here is per key, so a run splits into *parts* (P-compositionality): one per topic-partition
(sends and polls restricted to that partition, plus the assign/subscribe/crash operations that reset consumer
tracking, broadcast to every partition) and one per (group, topic-partition) for committed offsets. Checking the
parts and adding up their results gives the same verdict as checking the whole run; the tests hold us to that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from history.io import History, gc_paused
from history.schema import key_of

from .anomalies import RESTS_ON_ABSENCE, indeterminate
from .checkers import ANOMALIES, acceptable, analyze
from .linearizability import ILLEGAL, OK, UNKNOWN, check_operations
from .metadata import TOPIC_METADATA, has_metadata
from .metadata import check as check_metadata
from .models import COMMITTED_OFFSETS, PARTITION_LOG, log_operations, offset_operations

TP, GROUP, TOPIC = "tp", "group", "topic"   # TOPIC: a topic of the metadata workload (reports.metadata)
LIN_MODELS = ("partition-log", "committed-offsets")
_BROADCAST = frozenset(("assign", "subscribe", "crash"))
_INDEX = itemgetter("index")


def _proj(op: dict, value: Any) -> dict:
    return {"run_id": op["run_id"], "index": op["index"], "time_ns": op["time_ns"], "process": op["process"],
            "type": op["type"], "f": op["f"], "value": value}


def split_parts(ops: Sequence[dict]) -> list[tuple[str, str, list[dict]]]:
    """[(kind, key, ops)]: kind ``tp`` with key ``topic/partition``, kind ``group`` with key ``group|topic/partition``."""
    completion: dict[int, int] = {}
    in_flight: dict[int, int] = {}
    for i, op in enumerate(ops):
        if op["type"] == "invoke":
            in_flight[op["process"]] = i
        else:
            j = in_flight.pop(op["process"], None)
            if j is not None:
                completion[j] = i
    parts: dict[tuple[str, str], list[dict]] = {}
    broadcast: list[dict] = []
    tp_lists: dict[tuple, list[dict]] = {}  # (topic, partition) -> its part's list: no key formatted per op
    poll_groups: dict[int, dict[tuple, list]] = {}  # completion position -> its records by (topic, partition)

    def put(kind: str, key: str, op: dict) -> None:
        lst = parts.get((kind, key))
        if lst is None:
            lst = parts[(kind, key)] = []
        lst.append(op)

    def tp_list(tp: tuple) -> list[dict]:
        lst = tp_lists[tp] = parts.setdefault((TP, f"{tp[0]}/{tp[1]}"), [])
        return lst

    for i, op in enumerate(ops):
        f, typ, v = op["f"], op["type"], op["value"]
        if f == "send":
            if "records" in v:
                by_key: dict[str, list] = {}
                for r in v["records"]:
                    by_key.setdefault(key_of(r["topic"], r["partition"]), []).append(r)
                for k, recs in by_key.items():
                    put(TP, k, _proj(op, recs[0] if len(recs) == 1 else {"records": recs}))
            else:
                tp = (v["topic"], v["partition"])
                lst = tp_lists.get(tp)
                if lst is None:
                    lst = tp_list(tp)
                lst.append(op)
        elif f == "poll":
            # The invoke goes where its completion's records go; group the completion's records once for both.
            j = completion.get(i) if typ == "invoke" else i
            src = ops[j] if j is not None else None
            if src is None or src["type"] != "ok":
                continue
            by_tp = poll_groups.pop(j, None)
            positions = src["value"].get("positions")
            if by_tp is None:
                recs = src["value"]["records"]
                if not recs and not positions:
                    continue
                by_tp = {}
                cur = None
                group: list = []
                for r in recs:  # records come grouped by partition; switch lists only on a change
                    tp = (r["topic"], r["partition"])
                    if tp != cur:
                        cur = tp
                        group = by_tp.get(tp)
                        if group is None:
                            group = by_tp[tp] = []
                    group.append(r)
                for k in positions or ():  # a positioned partition is part of the poll even if it read nothing
                    topic, _, part = k.rpartition("/")
                    by_tp.setdefault((topic, int(part)), [])
                if typ == "invoke":
                    poll_groups[j] = by_tp
            whole = typ == "invoke" or len(by_tp) == 1  # the op itself serves every part (never mutated)
            for tp, rs in by_tp.items():
                lst = tp_lists.get(tp)
                if lst is None:
                    lst = tp_list(tp)
                if whole:
                    lst.append(op)
                    continue
                pv: dict = {"records": rs}
                k = f"{tp[0]}/{tp[1]}"
                if positions and k in positions:
                    pv["positions"] = {k: positions[k]}
                lst.append(_proj(op, pv))
        elif f in _BROADCAST:
            broadcast.append(op)
            if f == "assign":
                for k in v["partitions"]:
                    parts.setdefault((TP, k), [])
        elif f == "commit":
            for k, o in v["offsets"].items():
                put(GROUP, f"{v['group']}|{k}", _proj(op, {"group": v["group"], "offsets": {k: o}}))
        elif f == "fetch_offsets":
            if typ == "invoke":
                for k in v.get("partitions", []):
                    put(GROUP, f"{v['group']}|{k}", _proj(op, {"group": v["group"], "partitions": [k]}))
            elif typ == "ok":
                for k, o in v["offsets"].items():
                    put(GROUP, f"{v['group']}|{k}", _proj(op, {"group": v["group"], "offsets": {k: o}}))
    out = []
    for (kind, key), lst in sorted(parts.items()):
        if kind == TP and broadcast:
            # Both lists are in index order: a stable sort of the two runs is their merge (done in C).
            lst = sorted(lst + broadcast, key=_INDEX)
        out.append((kind, key, lst))
    return out


@dataclass
class PartVerdict:
    """What the Spark job computes per (run, part)."""

    kind: str
    key: str
    ops: int
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    cases: dict[str, list] = field(default_factory=dict)
    lin_model: str | None = None
    lin_verdict: str | None = None
    lin_elapsed_s: float = 0.0
    counterexample: dict | None = None


def check_part(kind: str, key: str, ops: Sequence[dict], settings: dict | None, budget_s: float,
               max_cases: int = 8) -> PartVerdict:
    """Anomalies + partition-log linearizability for a ``tp`` part; committed-offsets for a ``group`` part."""
    if kind == TP:
        res = analyze(ops, settings)
        lin = check_operations(PARTITION_LOG, log_operations(ops, settings), budget_s=budget_s)
        pv = PartVerdict(kind, key, len(ops), res.counts, res.summary(max_cases)["cases"], PARTITION_LOG.name)
    else:
        lin = check_operations(COMMITTED_OFFSETS, offset_operations(ops), budget_s=budget_s)
        pv = PartVerdict(kind, key, len(ops), lin_model=COMMITTED_OFFSETS.name)
    pv.lin_verdict = lin.verdict
    pv.lin_elapsed_s = sum(p.elapsed_s for p in lin.parts)
    bad = lin.illegal_parts
    pv.counterexample = bad[0].counterexample if bad else None
    return pv


def part_verdicts(h: History, budget_s: float = 10.0, max_cases: int = 8) -> list[PartVerdict]:
    """What :func:`check_part` gives for every part of :func:`split_parts`, from one whole-run pass per checker.

    Every analysis is per key, so the anomaly checker's cases split by key, and the linearizability search
    partitions by key itself (each part with its own budget, as a part checked alone would have); nothing is
    copied into per-part operation lists. ``ops`` of a part is the number of operations its model checked."""
    whole, lin = run_checks(h, budget_s)
    res = whole.by_key()
    log = {str(p.key): p for p in lin[PARTITION_LOG.name].parts}
    out = []
    for key in sorted(set(res) | set(log)):
        r = res.get(key)
        p = log.get(key)
        pv = PartVerdict(TP, key, p.ops if p else 0, r.counts if r else {},
                         r.summary(max_cases)["cases"] if r else {}, PARTITION_LOG.name, OK)
        if p is not None:
            pv.lin_verdict, pv.lin_elapsed_s, pv.counterexample = p.verdict, p.elapsed_s, p.counterexample
        out.append(pv)
    for p in lin[COMMITTED_OFFSETS.name].parts:
        g, k = p.key
        out.append(PartVerdict(GROUP, f"{g}|{k}", p.ops, lin_model=COMMITTED_OFFSETS.name, lin_verdict=p.verdict,
                               lin_elapsed_s=p.elapsed_s, counterexample=p.counterexample))
    for p in lin[TOPIC_METADATA.name].parts if TOPIC_METADATA.name in lin else ():
        out.append(PartVerdict(TOPIC, str(p.key), p.ops, lin_model=TOPIC_METADATA.name, lin_verdict=p.verdict,
                               lin_elapsed_s=p.elapsed_s, counterexample=p.counterexample))
    return out


@dataclass
class RunVerdict:
    """One run's verdict: anomaly counts, which are not acceptable, linearizability per model, and what cannot be
    decided because lines of its file were skipped (anomalies resting on absence, and illegal linearizability
    verdicts, then: ``indeterminate``)."""

    run_id: str
    target: str
    nemesis: str | None
    ops: int
    anomaly_counts: dict[str, int]
    bad: list[str]
    lin: dict[str, str]
    indeterminate: list[str] = field(default_factory=list)
    skipped_lines: list[int] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``invalid`` (an anomaly or counterexample the history proves), ``indeterminate`` (only ones resting on
        operations that may be on skipped lines) or ``valid``."""
        if self.bad or (not self.skipped_lines and any(v == ILLEGAL for v in self.lin.values())):
            return "invalid"
        return "indeterminate" if self.indeterminate else "valid"

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    def key(self) -> tuple:
        """Everything that must agree between a direct run and the Spark job."""
        return (self.run_id, self.target, self.nemesis, self.ops, tuple(sorted(self.anomaly_counts.items())),
                tuple(self.bad), tuple(sorted(self.lin.items())), tuple(self.indeterminate),
                tuple(self.skipped_lines))


def verdict_of(h: History, counts: dict[str, int], lin: dict[str, str], n_ops: int) -> RunVerdict:
    """The run's verdict from its anomaly counts and linearizability verdicts: acceptable anomalies set aside
    (the run's settings), and with skipped lines those resting on absence and illegal linearizability verdicts
    as indeterminate (reports.anomalies.RESTS_ON_ABSENCE)."""
    ok_set = acceptable(h.settings)
    found = sorted(a for a, n in counts.items() if n and a not in ok_set)
    skipped = list(h.skipped_lines)
    unproven = [a for a in found if skipped and a in RESTS_ON_ABSENCE]
    unproven += [f"linearizable/{m}" for m, v in sorted(lin.items()) if skipped and v == ILLEGAL]
    return RunVerdict(h.run_id, h.target, h.nemesis, n_ops, {a: counts[a] for a in ANOMALIES if counts.get(a)},
                      [a for a in found if a not in unproven], dict(lin), sorted(unproven), skipped)


def combine_lin(verdicts: Iterable[str]) -> str:
    vs = list(verdicts)
    if ILLEGAL in vs:
        return ILLEGAL
    if UNKNOWN in vs:
        return UNKNOWN
    return OK


def run_verdict(h: History, parts: Iterable[PartVerdict], n_ops: int | None = None) -> RunVerdict:
    """Add up part verdicts into the run's verdict."""
    counts: dict[str, int] = {}
    lin: dict[str, list[str]] = {m: [] for m in LIN_MODELS}
    for p in parts:
        for a, n in p.anomaly_counts.items():
            counts[a] = counts.get(a, 0) + n
        if p.lin_model:
            lin.setdefault(p.lin_model, []).append(p.lin_verdict)  # (topic-metadata: only runs that have it)
    return verdict_of(h, counts, {m: combine_lin(v) for m, v in lin.items()},
                      len(h.op_view()) if n_ops is None else n_ops)


def run_checks(h: History, budget_s: float = 10.0, workers: int = 1) -> tuple[Any, dict[str, Any]]:
    """The anomaly checker and both linearizability models on a whole run: ``(anomaly result, model name ->
    linearizability result)``, what ``python -m reports check`` prints and :func:`check_history` sums up.

    The run is read as the checkers need it and no operation dict is built for it: the anomaly checker takes the
    columns the reader gathered, the extraction the typed structs (``History.typed_ops``). The cyclic collector
    waits meanwhile: nothing here makes cycles, and its passes over the growing lists cost more than the check."""
    with gc_paused():
        res = analyze(h.op_view(), h.settings, h.columns)
        res.indeterminate = indeterminate(h.skipped_lines)
        res.skipped_lines = list(h.skipped_lines)
        typed = h.typed_ops()
        lin = {model.name: check_operations(model, extract(typed, h.settings), budget_s=budget_s, workers=workers)
               for model, extract in ((PARTITION_LOG, log_operations), (COMMITTED_OFFSETS, offset_operations))}
        if has_metadata(h.op_view()):
            # the metadata workload's topics: its anomalies join the run's, its model is a third verdict
            meta = check_metadata(h.op_view(), budget_s)
            for a, cases in meta.anomalies.items():
                res.anomalies[a] = res.anomalies.get(a, []) + cases
            res.keys = [*res.keys, *(t for t in meta.topics if t not in res.keys)]
            lin[TOPIC_METADATA.name] = meta.lin
    return res, lin


def check_history(h: History, budget_s: float = 10.0, workers: int = 1) -> RunVerdict:
    """The direct check of a whole run (no splitting by us: the checkers and models partition themselves)."""
    res, lin = run_checks(h, budget_s, workers)
    return verdict_of(h, res.counts, {name: r.verdict for name, r in lin.items()}, len(h.op_view()))
