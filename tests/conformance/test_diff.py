"""The differential mode against real reference brokers: it must be able to fail (a broker broken by a fault switch
shows a difference in the right API key and field, in a replayed conversation and in the machine), its CLI refuses
bad input with exit 2, and a short end-to-end run reference vs reference finds nothing."""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.diff.__main__ import RECORD_SETTINGS, main, run_machine
from conformance.diff.compare import Tally
from conformance.diff.conversation import Recorder, read_conversations, write_conversations
from conformance.wire import Wire
from fixtures.reference import ReferenceTarget

SETTINGS = {f"kafka.{k}": v for k, v in RECORD_SETTINGS.items()}


def _fields(doc: dict, api: str) -> dict[str, dict]:
    return {f["field"]: f for a in doc["apis"] if a["api"] == api for f in a["fields"]}


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recorded conversation: create a topic, produce twice, a parked fetch woken by a produce, list offsets."""
    path = tmp_path_factory.mktemp("conv") / "conversations.jsonl"
    with ReferenceTarget({"memory": "true"}, work_dir=tmp_path_factory.mktemp("rec")) as t:
        rec = Recorder("hand::produce-fetch", t.bootstrap)

        async def talk() -> None:
            async with await Wire.connect(t.bootstrap, tap=rec) as w, await Wire.connect(t.bootstrap, tap=rec) as p:
                topic = await w.create_topic(partitions=2)
                await w.produce(topic, count=3)
                parked = w.submit_fetch([(topic, 0, 3)], max_wait_ms=3000, min_bytes=1)
                await asyncio.sleep(0.2)
                await p.produce(topic, count=1)
                await parked
                await w.list_offsets(topic, 0, -1)
                await w.fetch([(topic, 0, 0), (topic, 1, 0)], max_wait_ms=0, min_bytes=0)
        asyncio.run(talk())
        write_conversations(path, [rec.finish("passed")])
    return path


def test_conversation_records_order_and_dependencies(conversation: Path) -> None:
    (conv,) = read_conversations(conversation)
    apis = [s.api_key for s in conv.steps]
    assert apis[0] == 19 and apis.count(0) == 2 and 1 in apis and 2 in apis, apis
    kinds = [next(k for k in ("open", "send", "answer", "close") if k in e) for e in conv.events]
    fetch = next(s.index for s in conv.steps if s.api_key == 1)
    woken_by = next(s.index for s in conv.steps if s.api_key == 0 and s.index > fetch)
    order = [(k, e.get(k)) for k, e in zip(kinds, conv.events, strict=True)]
    assert order.index(("send", woken_by)) < order.index(("answer", fetch)), \
        "the produce that wakes the parked fetch is sent before its answer, as recorded"
    assert conv.routes == {0: "bootstrap", 1: "bootstrap"}


def test_broken_broker_differs_in_the_right_field(conversation: Path, tmp_path: Path) -> None:
    """Reference vs a reference whose Fetch reports high_watermark - 1: exit 1, and the differences are exactly in
    Fetch's high_watermark (the produce and list offsets answers agree)."""
    out = tmp_path / "out"
    code = main(["--a", "reference", "--b", "reference", "--b-config", "faults=fetch.hw_off_by_one",
                 "--conversations", str(conversation), "--machine", "off", "--out", str(out)])
    assert code == 1
    doc = json.loads((out / "diff.json").read_text())
    fetch = _fields(doc, "Fetch")
    hw = fetch["responses[].partitions[].high_watermark"]
    assert hw["differ"] == hw["answers"] == 2 and hw["known"] == 0, hw
    assert hw["first"]["b"] == hw["first"]["a"] - 1
    differing = {(a["api"], f["field"]) for a in doc["apis"] for f in a["fields"] if f["differ"] > f["known"]}
    assert differing == {("Fetch", "responses[].partitions[].high_watermark")}, differing
    assert doc["summary"]["fields_unexplained"] == 1
    assert "high_watermark" in (out / "index.html").read_text()


def test_machine_finds_and_shrinks_a_broken_field(tmp_path: Path) -> None:
    """The machine against a reference whose OffsetFetch answers 0 for never-committed partitions: the difference is
    shrunk to a program of a few steps naming OffsetFetch's committed_offset, and the written script reproduces it."""
    cfg = {"memory": "true", **SETTINGS}
    with ReferenceTarget(cfg, work_dir=tmp_path / "a") as a, \
            ReferenceTarget({**cfg, "faults": "offsets.uncommitted_is_zero"}, work_dir=tmp_path / "b") as b:
        # derandomize seeds hypothesis from the machine's source: an edit anywhere in it (a renamed constant) draws
        # other programs, and 40 of them once missed the uncommitted partition; 100 find it (6 s)
        found = run_machine(a.bootstrap, b.bootstrap, "ci", tmp_path, Tally(), examples=100, steps=8,
                            derandomize=True)
        assert found["differences"], "the machine did not notice OffsetFetch answering 0 instead of -1"
        first = found["differences"][0]
        assert "OffsetFetch" in first["message"] and "committed_offset" in first["message"], first["message"]
        calls = [s for s in first["steps"] if s.lstrip().startswith(("state.", "topics_", "members_"))]
        assert len(calls) <= 4, f"not shrunk: {first['steps']}"
        proc = subprocess.run([sys.executable, first["script"], "--a", a.bootstrap, "--b", b.bootstrap],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "committed_offset" in proc.stderr, proc.stderr[-2000:]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv, message", [
    (["--a", "nope", "--b", "reference"], "unknown target"),
    (["--a", "reference", "--b", "live"], "--b live needs --b-bootstrap"),
    (["--a", "reference", "--a-bootstrap", "127.0.0.1:1", "--b", "reference"], "only for --a live"),
    (["--a", "reference", "--b", "reference", "--parallel", "0"], "--parallel"),
    (["--a", "reference", "--b", "reference", "--conversations", "/no/such/file.jsonl"], "no such file"),
    (["--a", "reference", "--b", "reference", "--suites", "fetch,nosuch"], "unknown suite"),
    (["--a", "reference", "--b", "reference", "--b-config", "novalue"], "key=value"),
    (["--a", "reference", "--b", "reference", "--b-config", "no.such.key=1"], "unknown --target-config"),
])
def test_cli_bad_input_exits_2(argv: list[str], message: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_cli_unreachable_target_exits_2(conversation: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    code = main(["--a", "reference", "--b", "live", "--b-bootstrap", f"127.0.0.1:{_closed_port()}",
                 "--conversations", str(conversation), "--machine", "off", "--out", str(tmp_path)])
    assert code == 2 and "did not start" in capsys.readouterr().err
    assert time.monotonic() - t0 < 30


def test_cli_refuses_targets_with_other_group_timings(conversation: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--a", "reference", "--b", "reference", "--b-config", "kafka.group.min.session.timeout.ms=6000",
                 "--conversations", str(conversation), "--machine", "off", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "group.min.session.timeout.ms" in err and "6000" in err, err


def test_end_to_end_reference_vs_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Record two fetch checks, replay them on two reference brokers, run a few machine examples: no difference."""
    t0 = time.monotonic()
    out = tmp_path / "out"
    code = main(["--a", "reference", "--b", "reference", "--suites", "fetch", "-k",
                 "test_fetch_at_leo_is_empty_not_error or test_parked_fetch_wakes_on_append",
                 "--machine-examples", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    doc = json.loads((out / "diff.json").read_text())
    assert code == 0, printed[-3000:]
    assert doc["conversations"]["replayed"] == 2 and not doc["conversations"]["errors"]
    assert doc["summary"]["fields_differing"] == 0 and doc["summary"]["answers"] >= 8, doc["summary"]
    assert doc["machine"]["differences"] == [] and doc["machine"]["tally"]["summary"]["answers"] > 0
    assert (out / "index.html").exists() and (out / "conversations.jsonl").exists()
    assert time.monotonic() - t0 < 50, "the end-to-end run must stay well under a minute"
