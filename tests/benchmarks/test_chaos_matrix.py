"""The chaos matrix (benchmarks/chaos_matrix.py): a cell that hangs is killed and reported, the others go on.

Before: cells ran in the matrix's own process, and a confluent-kafka deadlock that held the GIL
(Consumer.assignment() waiting on librdkafka's main thread) froze the whole matrix for good — SIGTERM could not even
end it. Now each cell runs in a child process with a deadline."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import chaos_matrix as m  # noqa: E402


def _args(tmp_path: Path, deadline: float) -> argparse.Namespace:
    return argparse.Namespace(out=tmp_path, duration=5.0, rate=10.0, interval=2.0, fault_duration=1.0,
                              cell_deadline=deadline)


def test_a_hung_cell_is_killed_at_its_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(opts: object) -> None:
        while True:          # holds nothing, answers nothing: as a deadlocked client stack looks from outside
            time.sleep(1)

    monkeypatch.setattr(m, "run", hang)
    cell = m.Cell("reference", "kill", "confluent", 0, "valid")
    t0 = time.monotonic()
    m.run_cell(cell, _args(tmp_path, 3.0))
    assert time.monotonic() - t0 < 20
    assert cell.result["exit"] == 2 and "did not finish within 3 s" in cell.result["error"], cell.result
    assert not m.met(cell)


def test_a_cell_that_raises_is_reported_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(opts: object) -> None:
        raise m.RunError("cluster unreachable")

    monkeypatch.setattr(m, "run", boom)
    cell = m.Cell("kafka", "pause", "java", 1, "valid")
    m.run_cell(cell, _args(tmp_path, 30.0))
    assert cell.result["exit"] == 2 and "cluster unreachable" in cell.result["error"], cell.result


def test_txn_cells_combine_their_nemeses_and_have_no_lossy_schedule(tmp_path: Path) -> None:
    """`--workload txn --nemeses kill+pause+partition`: one cell per target, client and seed whose run draws from
    the three faults, runs the txn workload at its own rate, and no lossy cell (a queue-workload schedule)."""
    args = argparse.Namespace(targets=("reference", "tansu"), nemeses=("kill+pause+partition", "isolate-controller"),
                              clients=("java",), seeds=2, lossy=True, workload="txn", out=tmp_path, duration=60.0,
                              rate=None, interval=10.0, fault_duration=5.0)
    cells = m.cells(args)
    assert [c.run_id for c in cells] == [
        "txn-reference-kill+pause+partition-java-s0", "txn-reference-kill+pause+partition-java-s1",
        "txn-reference-isolate-controller-java-s0", "txn-reference-isolate-controller-java-s1",
        "txn-tansu-kill+pause+partition-java-s0", "txn-tansu-kill+pause+partition-java-s1",
        "txn-tansu-isolate-controller-java-s0", "txn-tansu-isolate-controller-java-s1"]
    opts = m.options(cells[0], args)
    assert (opts.workload, opts.nemeses, opts.rate, opts.schedule) == ("txn", ("kill", "pause", "partition"), 20.0,
                                                                       "random")
    assert cells[0].skip is None and cells[-1].skip and "no controller" in cells[-1].skip
    m.write_tables(cells[:1], tmp_path, {})
    assert [c.workload for c in m.load_cells(tmp_path)] == ["txn"]


def test_metadata_cells_use_the_reference_client_stack_and_their_own_rate(tmp_path: Path) -> None:
    """`--workload metadata`: one cell per target, nemesis and seed, with the reference client stack whatever
    --clients says, 10 admin requests per second, no lossy cell; "none" is a fault-free cell."""
    args = argparse.Namespace(targets=("reference", "kafka"), nemeses=("none", "kill-controller"),
                              clients=("java", "confluent"), seeds=1, lossy=True, workload="metadata", out=tmp_path,
                              duration=60.0, rate=None, interval=10.0, fault_duration=5.0)
    cells = m.cells(args)
    assert [c.run_id for c in cells] == [
        "metadata-reference-none-reference-s0", "metadata-reference-kill-controller-reference-s0",
        "metadata-kafka-none-reference-s0", "metadata-kafka-kill-controller-reference-s0"]
    opts = m.options(cells[0], args)
    assert (opts.workload, opts.nemeses, opts.rate, opts.client) == ("metadata", (), 10.0, "reference")
    assert m.options(cells[1], args).nemeses == ("kill-controller",)


def test_consumer_protocol_cells_subscribe_and_say_so(tmp_path: Path) -> None:
    """`--group-protocol consumer`: every cell's consumers join a KIP-848 group (so they subscribe), the run id and
    matrix.json say which protocol ran, and an earlier matrix reads back with it."""
    args = argparse.Namespace(targets=("reference",), nemeses=("kill", "pause"), clients=("confluent", "java"),
                              seeds=1, lossy=False, workload="queue", group_protocol="consumer", out=tmp_path,
                              duration=60.0, rate=None, interval=10.0, fault_duration=5.0)
    cells = m.cells(args)
    assert [c.run_id for c in cells] == [
        "reference-kill-confluent-consumer-s0", "reference-kill-java-consumer-s0",
        "reference-pause-confluent-consumer-s0", "reference-pause-java-consumer-s0"]
    opts = m.options(cells[0], args)
    assert (opts.group_protocol, opts.sub_via) == ("consumer", "subscribe")
    classic = m.Cell("reference", "kill", "confluent", 0, "valid")
    assert classic.run_id == "reference-kill-confluent-s0"
    assert (m.options(classic, args).group_protocol, m.options(classic, args).sub_via) == ("classic", "assign")
    m.write_tables(cells[:1], tmp_path, {})
    assert [c.group_protocol for c in m.load_cells(tmp_path)] == ["consumer"]
