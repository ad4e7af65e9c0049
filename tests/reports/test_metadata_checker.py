"""The metadata checker (reports.metadata): a clean history with concurrency, lagging brokers, retried requests and
unknown outcomes is valid; each anomaly is found in a history built to show it, with the operations that show it;
the topic-metadata model refuses what the controller could not have answered; and the run's verdict (reports.
analysis, `python -m reports check`) carries both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kafka import errors as E

from history import History, read, write_jsonl
from reports.analysis import check_history, run_checks
from reports.metadata import check

EXISTS = E.TopicAlreadyExistsError.errno
UNKNOWN = E.UnknownTopicOrPartitionError.errno
INVALID = E.InvalidPartitionsError.errno
TIMEOUT = E.RequestTimedOutError.errno


def _ops(steps: list[tuple]) -> list[dict]:
    return [{"run_id": "m", "index": i, "time_ns": i * 10, "process": p, "type": typ, "f": f, "value": v}
            for i, (p, typ, f, v) in enumerate(steps)]


def _create(p: int, t: str, n: int, typ: str = "ok", code: int | None = None) -> list[tuple]:
    v = {"topic": t, "partitions": n, "replication": 3}
    return [(p, "invoke", "create_topic", v), (p, typ, "create_topic", {**v, **({"code": code} if code else {})})]


def _delete(p: int, t: str, typ: str = "ok", code: int | None = None) -> list[tuple]:
    return [(p, "invoke", "delete_topic", {"topic": t}),
            (p, typ, "delete_topic", {"topic": t, **({"code": code} if code else {})})]


def _grow(p: int, t: str, n: int, typ: str = "ok", code: int | None = None) -> list[tuple]:
    v = {"topic": t, "count": n}
    return [(p, "invoke", "create_partitions", v),
            (p, typ, "create_partitions", {**v, **({"code": code} if code else {})})]


def _read(p: int, node: int, view: dict, final: bool = False) -> list[tuple]:
    inv = {"topics": sorted(view), "node": node}
    return [(p, "invoke", "metadata", inv),
            (p, "ok", "metadata", {**inv, "topics": view, **({"final": True} if final else {})})]


def _verdict(steps: list[tuple]):
    h = History("m", _ops(steps), target="reference", settings={"workload": "metadata"})
    return check_history(h, budget_s=5.0), run_checks(h, 5.0)


def _found(steps: list[tuple]) -> dict[str, list[dict]]:
    return {a: c for a, c in check(_ops(steps)).anomalies.items() if c}


def _final(p: int, view: dict, nodes: tuple[int, ...] = (1, 2, 3)) -> list[tuple]:
    return [s for n in nodes for s in _read(p, n, view, final=True)]


def test_clean_history_with_lag_retries_and_unknowns_is_valid() -> None:
    steps = [
        *_create(0, "a", 2),
        *_read(1, 2, {"a": None}),                     # broker 2 has not applied the create yet: lagging, legal
        *_read(1, 1, {"a": 2}),
        *_create(0, "a", 2, "fail", EXISTS),           # a second create of a present topic
        *_grow(0, "a", 3),
        *_grow(0, "a", 3, "fail", INVALID),
        *_create(0, "b", 1, "info", TIMEOUT),          # unknown outcome
        *_create(1, "c", 1, "fail", EXISTS),           # its own create retried after a failover: exists
        *_delete(1, "c"),
        *_delete(1, "c", "fail", UNKNOWN),
        *_read(1, 1, {"a": 3, "c": None}),
        *_final(2, {"a": 3, "b": 1, "c": None}),
    ]
    v, (res, lin) = _verdict(steps)
    assert v.valid, (v.bad, v.lin)
    assert v.lin["topic-metadata"] == "ok"
    assert res.counts == {"lagging-read": 1}           # reported, acceptable
    assert "lagging-read" in res.summary()["acceptable_found"]


def test_lost_create() -> None:
    found = _found([*_create(0, "a", 2), *_final(1, {"a": None}, nodes=(1,))])
    assert set(found) == {"lost-create"}
    case = found["lost-create"][0]
    assert case["key"] == "a" and [op["f"] for op in case["ops"]] == ["create_topic", "metadata"]
    v, _ = _verdict([*_create(0, "a", 2), *_final(1, {"a": None}, nodes=(1,))])
    assert "lost-create" in v.bad and v.lin["topic-metadata"] == "illegal"


def test_lost_create_not_claimed_when_a_delete_was_invoked() -> None:
    assert not _found([*_create(0, "a", 2), *_delete(1, "a", "info", TIMEOUT), *_final(1, {"a": None})])


def test_phantom_never_created() -> None:
    found = _found([*_read(0, 1, {"ghost": 1})])
    assert set(found) == {"phantom"} and found["phantom"][0]["key"] == "ghost"


def test_phantom_more_partitions_than_asked() -> None:
    found = _found([*_create(0, "a", 2), *_read(1, 1, {"a": 5})])
    assert set(found) == {"phantom"} and found["phantom"][0]["shown"] == 5


def test_phantom_after_acknowledged_delete() -> None:
    found = _found([*_create(0, "a", 1), *_delete(0, "a"), *_final(1, {"a": 1}, nodes=(2,))])
    assert set(found) == {"phantom"}
    assert [op["f"] for op in found["phantom"][0]["ops"]] == ["metadata", "delete_topic"]


def test_create_concurrent_with_the_delete_is_no_phantom() -> None:
    """A create invoked before an acknowledged delete but acknowledged after it (error 0: it found no topic, so it ran
    after the delete) re-creates the topic: a final read showing it is legal, and the history linearizable. Seen in a
    chaos run on the reference quorum (pause-controller: both requests answered right after the frozen controller
    resumed), reported as phantom before."""
    v = {"topic": "a", "partitions": 1, "replication": 3}
    steps = [*_create(0, "a", 1),
             (1, "invoke", "create_topic", v), (2, "invoke", "delete_topic", {"topic": "a"}),
             (1, "ok", "create_topic", v), (2, "ok", "delete_topic", {"topic": "a"}),
             *_final(3, {"a": 1})]
    assert _found(steps) == {}
    # a create that completed before the delete was invoked excuses nothing
    late = [*_create(0, "a", 1), *_create(1, "a", 1, "fail", EXISTS), *_delete(2, "a"), *_final(3, {"a": 1})]
    assert set(_found(late)) == {"phantom"}


def test_phantom_resurrected_on_one_broker() -> None:
    found = _found([*_create(0, "a", 1), *_read(1, 1, {"a": 1}), *_delete(0, "a"), *_read(1, 1, {"a": None}),
                    *_read(1, 1, {"a": 1})])
    assert "shows it again" in found["phantom"][0]["why"]


def test_partitions_shrunk_on_one_broker() -> None:
    found = _found([*_create(0, "a", 1), *_grow(0, "a", 4), *_read(1, 3, {"a": 4}), *_read(1, 3, {"a": 1})])
    assert set(found) == {"partitions-shrunk", "lagging-read"}
    assert found["partitions-shrunk"][0]["before"] == 4 and found["partitions-shrunk"][0]["after"] == 1


def test_partitions_shrunk_in_final_read() -> None:
    found = _found([*_create(0, "a", 1), *_grow(0, "a", 4), *_final(1, {"a": 1}, nodes=(1,))])
    assert set(found) == {"partitions-shrunk"}


def test_lagging_reads_across_brokers_are_not_shrinks() -> None:
    """Broker 1 is ahead of broker 2: across brokers no order is promised."""
    assert set(_found([*_create(0, "a", 1), *_grow(0, "a", 4), *_read(1, 1, {"a": 4}),
                       *_read(1, 2, {"a": 1})])) == {"lagging-read"}


def test_stale_read_on_one_broker() -> None:
    found = _found([*_create(0, "a", 1), *_read(1, 2, {"a": 1}), *_read(1, 2, {"a": None})])
    assert set(found) == {"stale-read", "lagging-read"}
    assert [op["value"]["topics"]["a"] for op in found["stale-read"][0]["ops"]] == [1, None]


def test_model_refuses_two_acknowledged_creates() -> None:
    v, (_, lin) = _verdict([*_create(0, "a", 1), *_create(1, "a", 1)])
    assert v.lin["topic-metadata"] == "illegal" and not v.valid
    assert lin["topic-metadata"].illegal_parts[0].key == "a"


def test_model_accepts_concurrent_creates_one_winning() -> None:
    v, _ = _verdict([(0, "invoke", "create_topic", {"topic": "a", "partitions": 1, "replication": 1}),
                     (1, "invoke", "create_topic", {"topic": "a", "partitions": 1, "replication": 1}),
                     (1, "fail", "create_topic", {"topic": "a", "partitions": 1, "replication": 1, "code": EXISTS}),
                     (0, "ok", "create_topic", {"topic": "a", "partitions": 1, "replication": 1})])
    assert v.valid


def test_model_refuses_delete_ok_of_absent_and_grow_ok_backwards() -> None:
    v, _ = _verdict([*_delete(0, "never")])
    assert v.lin["topic-metadata"] == "illegal"
    v, _ = _verdict([*_create(0, "a", 4), *_grow(0, "a", 2)])
    assert v.lin["topic-metadata"] == "illegal"


def test_elect_leaders_observes_partitions() -> None:
    ok = [*_create(0, "a", 2), (0, "invoke", "elect_leaders", {"topic": "a", "partition": 1}),
          (0, "ok", "elect_leaders", {"topic": "a", "partition": 1, "code": 0})]
    assert _verdict(ok)[0].valid
    bad = [*_create(0, "a", 2), (0, "invoke", "elect_leaders", {"topic": "a", "partition": 0}),
           (0, "fail", "elect_leaders", {"topic": "a", "partition": 0, "code": UNKNOWN})]
    assert _verdict(bad)[0].lin["topic-metadata"] == "illegal"


def test_reports_check_cli_on_a_file(tmp_path: Path) -> None:
    """The file round-trips through the one history format, and `python -m reports check` exits 1 with the case."""
    h = History("m", _ops([*_create(0, "a", 2), *_final(1, {"a": None}, nodes=(1,))]), target="reference",
                settings={"workload": "metadata"})
    path = tmp_path / "m.jsonl"
    write_jsonl(h, str(path))
    assert [op["f"] for op in read(str(path))[0].ops][:2] == ["create_topic", "create_topic"]
    p = subprocess.run([sys.executable, "-m", "reports", "check", str(path), "--json"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)[0]
    assert out["anomalies"]["counts"] == {"lost-create": 1}
    assert out["linearizability"]["topic-metadata"]["verdict"] == "illegal"


def test_the_history_format_validates_metadata_values(tmp_path: Path) -> None:
    """The one reader checks the new operations' values (history.schema.check_metadata): a Metadata ok without
    the broker that answered, or a create without its partition count, is refused with the line."""
    import pytest

    from history.schema import HistoryError

    good = _ops([*_create(0, "a", 2), *_read(1, 1, {"a": 2})])
    for bad_value, f in (({"topics": {"a": 2}}, "metadata"), ({"topic": "a"}, "create_topic")):
        ops = [dict(op) for op in good]
        i = next(j for j, op in enumerate(ops) if op["f"] == f and op["type"] == "ok")
        ops[i]["value"] = bad_value
        path = tmp_path / f"{f}.jsonl"
        write_jsonl(History("m", ops), str(path))
        with pytest.raises(HistoryError, match=f):
            read(str(path))
