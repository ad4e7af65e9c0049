"""What the shared request layer (conformance.wire) records is what happened: the checkers judge its histories."""

from __future__ import annotations

from pathlib import Path

from conformance.recording import SessionHistory
from conformance.wire import Wire
from fixtures.reference import ReferenceTarget
from history import read
from reports.analysis import run_checks

TOO_LARGE = 12  # OFFSET_METADATA_TOO_LARGE


async def test_a_partly_refused_commit_is_recorded_with_what_was_committed(tmp_path: Path) -> None:
    """One OffsetCommit, one partition accepted and one refused (metadata beyond offset.metadata.max.bytes): the
    accepted offset is committed, so the history must say so, or the fetch that returns it reads a lost write."""
    path = str(tmp_path / "h.jsonl")
    hist = SessionHistory("partly", "reference", path)
    with ReferenceTarget({"memory": "true"}, work_dir=tmp_path) as target:
        async with await Wire.connect(target.bootstrap, history=hist) as w:
            topic = await w.create_topic(partitions=2)
            codes = await w.offset_commit("g", {(topic, 0): (5, "ok"), (topic, 1): (7, "x" * 5000)})
            assert codes == {(topic, 0): 0, (topic, 1): TOO_LARGE}
            got = await w.offset_fetch("g", [(topic, 0), (topic, 1)])
            assert (got[(topic, 0)][0], got[(topic, 1)][0]) == (5, -1)
            assert await w.offset_commit("g", {(topic, 1): (9, "y" * 5000)}) == {(topic, 1): TOO_LARGE}
    hist.close()
    (h,) = read(path)
    commits = [op for op in h.ops if op["f"] == "commit" and op["type"] != "invoke"]
    assert [(op["type"], op["value"]["offsets"]) for op in commits] == [("ok", {f"{topic}/0": 5}), ("fail", {})]
    res, lin = run_checks(h)
    assert res.valid and lin["committed-offsets"].verdict == "ok", lin["committed-offsets"]
