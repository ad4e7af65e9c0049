"""The columnar anomaly checker finds exactly the cases, in the same order, that the record-by-record one does.

reports.checkers_simple is the executable definition (a dict per topic-partition, one Python statement per
record); reports.checkers answers the same questions with numpy over columns. Hypothesis builds messy histories
on purpose - colliding offsets, values read at two offsets, batches, info and failed sends, re-assigns, subscribes
and crashes between polls, a value shared by two partitions, mixed value types - so every finder has cases.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reports import checkers, checkers_simple, synth

TOPICS = ("t", "u")
PARTS = (0, 1, 2)
KEYS = [f"{t}/{p}" for t in TOPICS for p in PARTS]

record = st.fixed_dictionaries({
    "topic": st.sampled_from(TOPICS), "partition": st.sampled_from(PARTS),
    "offset": st.integers(0, 12), "value": st.integers(0, 15),
})


@st.composite
def value(draw: st.DrawFn) -> object:
    return draw(st.one_of(st.integers(0, 15), st.integers(0, 15), st.sampled_from(["a", "b", "c"])))


@st.composite
def operation(draw: st.DrawFn) -> tuple:
    kind = draw(st.sampled_from(["poll", "poll", "poll", "send", "send", "batch", "assign", "subscribe", "crash"]))
    p = draw(st.integers(0, 3))
    if kind == "poll":
        recs = draw(st.lists(record, max_size=6))
        typ = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
        return p, "poll", typ, {"records": recs} if typ == "ok" else {}
    if kind in ("send", "batch"):
        n = 1 if kind == "send" else draw(st.integers(0, 4))
        typ = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
        recs = []
        for _ in range(n):
            r = {"topic": draw(st.sampled_from(TOPICS)), "partition": draw(st.sampled_from(PARTS)), "key": None,
                 "value": draw(value())}
            if typ != "fail" and draw(st.booleans()):
                r["offset"] = draw(st.integers(0, 12))
            recs.append(r)
        return p, "send", typ, recs[0] if kind == "send" else {"records": recs}
    typ = draw(st.sampled_from(["ok", "ok", "info", "fail"]))
    if kind == "assign":
        return p, "assign", typ, {"partitions": draw(st.lists(st.sampled_from(KEYS), unique=True))}
    if kind == "subscribe":
        return p, "subscribe", typ, {"topics": draw(st.lists(st.sampled_from(TOPICS), unique=True))}
    return p, "crash", "info", None


def history(steps: list[tuple]) -> list[dict]:
    ops = []
    for p, f, typ, v in steps:
        for t in ("invoke", typ):
            ops.append({"run_id": "h", "index": len(ops), "time_ns": len(ops), "process": p, "type": t, "f": f,
                        "value": v})
    return ops


def same(ops: list[dict], settings: dict | None = None) -> None:
    fast = checkers._Columns(ops).analyze(settings)  # the columnar path itself, never its fallback
    slow = checkers_simple.analyze(ops, settings)
    assert fast.stats == slow.stats and fast.keys == slow.keys
    assert {k: r.counts for k, r in fast.by_key().items()} == {k: r.counts for k, r in slow.by_key().items()}
    for a in checkers.ANOMALIES:
        assert fast.anomalies[a] == slow.anomalies[a], a
    assert fast.summary() == slow.summary()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation(), max_size=40))
def test_same_cases_as_record_by_record_on_messy_histories(steps):
    same(history(steps))


@st.composite
def plausible(draw: st.DrawFn) -> list[tuple]:
    """Mostly right: each partition has a true log that sends append to and consumers read windows of, in
    order, with a few slips (a jump, a step back, a repeat, a reordered send, a value appended twice) and resets
    between polls - so the successive-poll and successive-send finders see long clean runs and the odd case."""
    logs: dict[tuple, list] = {}
    pos: dict[tuple, int] = {}
    steps: list[tuple] = []
    nxt = 0
    for _ in range(draw(st.integers(1, 60))):
        p = draw(st.integers(0, 3))
        tp = (draw(st.sampled_from(TOPICS[:1] + TOPICS)), draw(st.sampled_from(PARTS[:2])))
        log = logs.setdefault(tp, [])
        kind = draw(st.sampled_from(["send", "send", "poll", "poll", "poll", "assign", "crash", "swap", "again"]))
        if kind == "again" and log:  # a value appended a second time (a resend); its ack may name the new copy
            v = draw(st.sampled_from(log))
            log.append(v)
            if draw(st.booleans()):
                steps.append((p, "send", "ok", {"topic": tp[0], "partition": tp[1], "key": None, "value": v,
                                                "offset": len(log) - 1}))
        elif kind == "swap":  # one producer's two sends land in the opposite order
            n = len(log)
            for off in (n + 1, n):
                nxt += 1
                log.append(nxt)
                steps.append((p, "send", "ok", {"topic": tp[0], "partition": tp[1], "key": None, "value": nxt,
                                                "offset": off}))
        elif kind == "send":
            nxt += 1
            off = len(log)
            slip = draw(st.sampled_from([0] * 12 + [-1, 1]))
            if slip and log:
                off = max(0, off + slip)
            log.append(nxt)
            typ = draw(st.sampled_from(["ok"] * 8 + ["info", "fail"]))
            r = {"topic": tp[0], "partition": tp[1], "key": None, "value": nxt}
            if typ == "ok":
                r["offset"] = off
            steps.append((p, "send", typ, r))
        elif kind == "poll":
            at = pos.get((p, tp), 0) + draw(st.sampled_from([0] * 10 + [1, 2, -1]))
            at = min(max(at, 0), len(log))
            n = draw(st.integers(0, 4))
            window = list(enumerate(log))[at:at + n]
            if window and draw(st.integers(0, 15)) == 0:
                window.append(window[-1])
            pos[(p, tp)] = at + len(window)
            steps.append((p, "poll", "ok", {"records": [
                {"topic": tp[0], "partition": tp[1], "offset": o, "value": v} for o, v in window]}))
        elif kind == "assign":
            steps.append((p, "assign", "ok", {"partitions": draw(st.lists(st.sampled_from(KEYS), unique=True))}))
        else:
            steps.append((p, "crash", "info", None))
    return steps


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plausible())
def test_same_cases_as_record_by_record_on_mostly_right_histories(steps):
    same(history(steps))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation(), min_size=1, max_size=25), st.sampled_from(["int", "str", "mixed"]))
def test_same_cases_whatever_the_value_types(steps, kind):
    ops = history(steps)
    for op in ops:
        for r in (op["value"] or {}).get("records", [op["value"]] if op["f"] == "send" else []):
            if kind == "str":
                r["value"] = f"v{r['value']}"
            elif kind == "mixed" and isinstance(r["value"], int) and r["value"] % 3 == 0:
                r["value"] = None if r["value"] == 0 else float(r["value"])
    same(ops)


@pytest.mark.parametrize("kind", synth.SCENARIOS)
@pytest.mark.parametrize("seed", [3, 4])
def test_same_cases_on_busy_runs_with_each_anomaly(kind, seed):
    base = synth.generate(f"e{seed}", seed=seed, n_ops=3000, processes=6, partitions=4, p_info=0.15, p_fail=0.1)
    same(synth.with_anomaly(base, kind).ops, base.settings)


def test_offsets_beyond_int64_fall_back_to_the_record_by_record_checker():
    ops = history([(0, "send", "ok", {"topic": "t", "partition": 0, "key": None, "value": 1, "offset": 1 << 70}),
                   (1, "poll", "ok", {"records": [{"topic": "t", "partition": 0, "offset": 1 << 70, "value": 1}]}),
                   (1, "poll", "ok", {"records": [{"topic": "t", "partition": 0, "offset": 3, "value": 1}]})])
    with pytest.raises(checkers._DoesNotFit):
        checkers._Columns(ops)
    assert checkers.analyze(ops).found == {"duplicate", "nonmonotonic-poll"}
