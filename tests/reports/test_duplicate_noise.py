"""A value appended twice is one ``duplicate`` case, not also skips and steps back of the readers (issue 24).

Jepsen's version order places a value at one offset (here: its first). A duplicated value sits at two, so a
reader that read every record, the second copy included, used to "skip" the values between the copies and "go
back" to the second copy (poll-skip, int-poll-skip, nonmonotonic-poll, int-nonmonotonic-poll, nonmonotonic-send),
each naming records it did read. Both checkers now place a read or send of a duplicated value at the offset it
carries, and a step counts only values that are not duplicated: the duplicate is reported once, as a duplicate,
and a genuine skip next to it is still reported, naming only what was really skipped.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history import History, read, write_jsonl
from reports import checkers, checkers_simple
from reports.checkers_simple import NotCheckedWarning

T = "t"
ORDER = {"poll-skip", "int-poll-skip", "nonmonotonic-poll", "int-nonmonotonic-poll", "nonmonotonic-send",
         "int-nonmonotonic-send", "int-send-skip"}


def build(logs: dict[int, list], polls: list[tuple[int, list[tuple[int, int]]]], txn: bool = False) -> list[dict]:
    """A run on topic ``t``: ``logs`` is each partition's true log (value per offset; a value may repeat). One
    producer sends each value once, in the order of its last copy, acknowledged at that offset (the retry's
    ack); ``polls`` are (process, [(partition, offset), ...]) in history order, as polls or as txns that poll."""
    h = History("dup", settings={"sub_via": ["assign"]})
    ops = h.ops

    def add(p: int, typ: str, f: str, v: object) -> None:
        ops.append({"run_id": "dup", "index": len(ops), "time_ns": 10 * len(ops), "process": p, "type": typ,
                    "f": f, "value": v})

    for part, log in logs.items():
        last = {v: i for i, v in enumerate(log)}
        for v in sorted(last, key=last.__getitem__):
            r = {"topic": T, "partition": part, "key": None, "value": v}
            if txn:
                add(1, "invoke", "txn", {"txn_id": "w", "ops": [{"f": "send", **r}]})
                add(1, "ok", "txn", {"txn_id": "w", "ops": [{"f": "send", **r, "offset": last[v]}]})
            else:
                add(1, "invoke", "send", r)
                add(1, "ok", "send", {**r, "offset": last[v]})
    parts = {"partitions": [f"{T}/{q}" for q in logs]}
    for p in dict.fromkeys(p for p, _ in polls):
        add(p, "invoke", "assign", parts)
        add(p, "ok", "assign", parts)
    for p, reads in polls:
        recs = [{"topic": T, "partition": q, "offset": o, "key": None, "value": logs[q][o]} for q, o in reads]
        if txn:
            add(p, "invoke", "txn", {"txn_id": f"r{p}", "ops": [{"f": "poll"}]})
            add(p, "ok", "txn", {"txn_id": f"r{p}", "ops": [{"f": "poll", "records": recs}]})
        else:
            add(p, "invoke", "poll", {})
            add(p, "ok", "poll", {"records": recs})
    return ops


def both(ops: list[dict]) -> checkers.CheckResult:
    """The columnar checker's result, after requiring the record-by-record checker to find the same cases."""
    fast = checkers._Columns(ops).analyze(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotCheckedWarning)
        slow = checkers_simple.analyze(ops, None)
    for a in checkers.ANOMALIES:
        if a in slow.stats.get("not_checked", {}):
            continue
        assert fast.anomalies[a] == slow.anomalies[a], a
    return fast


X = ["x", "a", "y", "a", "z", "w"]  # a at offsets 1 and 3, y between the copies
ALL = [(0, i) for i in range(6)]
NOISE = {
    "reads the first copy and goes on, one poll": ({0: X}, [(10, ALL)]),
    "reads the first copy and goes on, poll by poll": ({0: X}, [(10, ALL[:2]), (10, ALL[2:4]), (10, ALL[4:])]),
    "polls end on each copy": ({0: X}, [(10, ALL[:2]), (10, ALL[2:3]), (10, ALL[3:4]), (10, ALL[4:])]),
    "reads only the second copy": ({0: X}, [(10, ALL), (11, [(0, 2)]), (11, [(0, 3), (0, 4)])]),
    "another reader starts at the second copy": ({0: X}, [(10, ALL[:3]), (11, ALL[3:])]),
    "several duplicates in a row": ({0: ["a", "b", "a", "b", "c", "d"]},
                                    [(10, ALL), (11, [(0, 0), (0, 1)]), (11, [(0, 2), (0, 3)]), (11, [(0, 4)])]),
    "one value three times": ({0: ["a", "b", "a", "c", "a", "d"]}, [(10, ALL), (11, ALL[:3]), (11, ALL[3:])]),
    "duplicates on two partitions": ({0: X, 1: ["p", "q", "p", "r"]},
                                     [(10, ALL + [(1, i) for i in range(4)]), (11, [(1, 0), (1, 1)]),
                                      (11, [(1, 2), (1, 3)])]),
}


@pytest.mark.parametrize("txn", [False, True], ids=["polls", "txns"])
@pytest.mark.parametrize("shape", list(NOISE))
def test_a_duplicate_is_reported_once_and_only_as_a_duplicate(shape, txn, tmp_path):
    logs, polls = NOISE[shape]
    path = tmp_path / "h.jsonl"
    write_jsonl(History("dup", build(logs, polls, txn), settings={"sub_via": ["assign"]}), str(path))
    (h,) = read(str(path))
    res = both(h.ops)
    assert set(res.found) == {"duplicate"}, res.counts
    dups = {v for log in logs.values() for v in log if log.count(v) > 1}
    assert sorted(c["value"] for c in res.anomalies["duplicate"]) == sorted(dups)
    for c in res.anomalies["duplicate"]:
        log = logs[int(c["key"].rsplit("/", 1)[1])]
        assert c["offsets"] == [i for i, v in enumerate(log) if v == c["value"]]
    # the reader gathers columns for the checker: with them the verdict is the same
    assert checkers.analyze(h.ops, h.settings, h.columns).anomalies == res.anomalies


GENUINE = {
    # z (offset 4) is skipped right after the second copy of a, inside one poll and across two
    "int-poll-skip": ({0: X}, [(10, [(0, 0), (0, 1), (0, 2), (0, 3), (0, 5)]), (11, ALL)], ["z"]),
    "poll-skip": ({0: X}, [(10, ALL[:4]), (10, [(0, 5)]), (11, ALL)], ["z"]),
    # y, between the copies, is skipped: the step from the first copy to the second skips y only
    "int-poll-skip between the copies": ({0: X}, [(10, [(0, 0), (0, 1), (0, 3), (0, 4), (0, 5)]), (11, ALL)],
                                         ["y"]),
    "poll-skip over both copies and y": ({0: X}, [(10, ALL[:1]), (10, ALL[4:]), (11, ALL)], ["y"]),
}


@pytest.mark.parametrize("txn", [False, True], ids=["polls", "txns"])
@pytest.mark.parametrize("shape", list(GENUINE))
def test_a_genuine_skip_next_to_a_duplicate_is_still_found(shape, txn):
    logs, polls, skipped = GENUINE[shape]
    kind = shape.split(" ")[0]
    res = both(build(logs, polls, txn))
    assert set(res.found) == {"duplicate", kind}, res.counts
    (case,) = res.anomalies[kind]
    assert case["skipped"] == skipped and case["delta"] == len(skipped) + 1


@pytest.mark.parametrize("txn", [False, True], ids=["polls", "txns"])
def test_going_back_to_a_copy_already_read_is_still_nonmonotonic(txn):
    # the reader read the second copy of a (offset 3), then y (offset 2) again
    res = both(build({0: X}, [(10, ALL[:4]), (10, ALL[2:]), (11, ALL)], txn))
    assert set(res.found) == {"duplicate", "nonmonotonic-poll"}, res.counts
    (case,) = res.anomalies["nonmonotonic-poll"]
    assert case["values"] == ["a", "y"] and case["delta"] == -1
    res = both(build({0: X}, [(10, ALL[:4] + ALL[1:2] + ALL[4:]), (11, ALL)], txn))
    assert set(res.found) == {"duplicate", "int-nonmonotonic-poll", "int-poll-skip"}, res.counts
    # offset 3 -> 1 goes back; 1 -> 4 skips y (the second copy of a is no skip)
    assert [c["values"] for c in res.anomalies["int-nonmonotonic-poll"]] == [["a", "a"]]
    assert [c["skipped"] for c in res.anomalies["int-poll-skip"]] == [["y"]]


def test_a_producer_acknowledged_at_the_second_copy_is_monotonic():
    """The producer's retry was acknowledged at the second copy: its next send lands after that copy, not
    after the first (before the fix: nonmonotonic-send of y then a)."""
    res = both(build({0: X}, [(10, ALL)]))
    sends = [op["value"]["value"] for op in build({0: X}, [(10, ALL)]) if op["f"] == "send" and op["type"] == "ok"]
    assert sends == ["x", "y", "a", "z", "w"]
    assert set(res.found) == {"duplicate"}


# ---------------------------------------------------------------- generated: clean log, injected duplicates


@st.composite
def duplicated_run(draw: st.DrawFn) -> tuple[dict[int, list], list[tuple], set]:
    """Clean logs on one or two partitions with one to three values appended again later in the log, and two to
    three readers that each read a partition through from some offset, in polls of random sizes."""
    logs: dict[int, list] = {}
    nxt = 0
    dups: set = set()
    for part in range(draw(st.integers(1, 2))):
        n = draw(st.integers(2, 12))
        log = list(range(nxt, nxt + n))
        nxt += n
        for _ in range(draw(st.integers(1 if part == 0 else 0, 3))):
            i = draw(st.integers(0, len(log) - 1))
            j = draw(st.integers(i + 1, len(log)))
            log.insert(j, log[i])
            dups.add(log[i])
        logs[part] = log
    polls: list[tuple] = []
    for reader in range(draw(st.integers(2, 3))):
        p = 10 + reader
        for part, log in logs.items():
            at = 0 if reader == 0 else draw(st.integers(0, len(log) - 1))  # reader 0 reads every record
            while at < len(log):
                n = draw(st.integers(1, 4))
                polls.append((p, [(part, o) for o in range(at, min(at + n, len(log)))]))
                at += n
    order = draw(st.permutations(range(len(polls))))
    # shuffle the polls of different readers, keeping each reader's own polls in order
    by_reader: dict[int, list] = {}
    for poll in polls:
        by_reader.setdefault(poll[0], []).append(poll)
    cursor = dict.fromkeys(by_reader, 0)
    mixed = []
    for k in order:
        p = polls[k][0]
        mixed.append(by_reader[p][cursor[p]])
        cursor[p] += 1
    return logs, mixed, dups


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(duplicated_run(), st.booleans())
def test_injected_duplicates_are_only_duplicates(run, txn):
    logs, polls, dups = run
    res = both(build(logs, polls, txn))
    assert set(res.found) == {"duplicate"}, res.counts
    assert sorted(c["value"] for c in res.anomalies["duplicate"]) == sorted(dups)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(duplicated_run(), st.booleans(), st.data())
def test_an_injected_skip_is_found_beside_injected_duplicates(run, txn, data):
    logs, polls, dups = run
    # one reader other than reader 0 leaves out one record whose value is not duplicated, between two it reads
    cands = [(k, j) for k, (p, reads) in enumerate(polls) if p != 10 for j, (q, o) in enumerate(reads)
             if logs[q][o] not in dups and o < len(logs[q]) - 1
             and any(pp == p and rr and rr[0][0] == q and rr[0][1] < o for pp, rr in polls[:k + 1])]
    if not cands:
        return
    k, j = data.draw(st.sampled_from(cands))
    p, reads = polls[k]
    q, o = reads[j]
    polls = [*polls[:k], (p, reads[:j] + reads[j + 1:]), *polls[k + 1:]]
    res = both(build(logs, polls, txn))
    assert set(res.found) - {"duplicate"} <= {"poll-skip", "int-poll-skip"}, res.counts
    skips = res.anomalies["poll-skip"] + res.anomalies["int-poll-skip"]
    assert [c["skipped"] for c in skips] == [[logs[q][o]]]
    assert sorted(c["value"] for c in res.anomalies["duplicate"]) == sorted(dups)


# ---------------------------------------------------------------- the chaos matrix's verdict on such runs


def test_chaos_matrix_accepts_a_run_whose_only_anomaly_is_the_clients_duplicate(tmp_path):
    """benchmarks/chaos_matrix.py: a safe cell whose producer (idempotence off) sent a value twice is as expected
    when the duplicate is its only anomaly - now also for a result recorded before the fix, whose poll-order
    cases of the duplicate's second copy it checks again - and not when a genuine skip sits beside it."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import chaos_matrix as m

    def cell(name: str, ops: list[dict], bad: list[str]) -> m.Cell:
        path = tmp_path / f"{name}.jsonl"
        write_jsonl(History("dup", ops, settings={"sub_via": ["assign"]}), str(path))
        c = m.Cell("reference", "kill", "confluent", 0, "valid")
        c.result = {"exit": 1, "bad": bad, "history": str(path), "counts": {b: 1 for b in bad}}
        return c

    logs, polls = NOISE["reads the first copy and goes on, poll by poll"]
    assert m.met(cell("now", build(logs, polls), ["duplicate"]))
    old = cell("old", build(logs, polls), ["duplicate", "int-nonmonotonic-poll", "poll-skip"])  # before the fix
    assert m.only_client_duplicates(old) and m.met(old)
    logs, polls, _ = GENUINE["poll-skip"]
    assert not m.met(cell("skip", build(logs, polls), ["duplicate", "poll-skip"]))
    assert not m.met(cell("lost", build(logs, polls), ["duplicate", "lost-write"]))
