"""`chaos run --workload txn` (chaos/txn.py) with real client stacks against a real broker: transactions recorded as
TXN_SPEC's ``txn`` ops (ok = committed, fail = certainly not, info = unknown), consume-transform-produce with its
offsets in the transaction, read_committed polls and final read.

CI runs the (client, target) pairs that each test something the others do not (PAIRS): the reference client
stack against Apache Kafka (the arbiter judges our client), confluent-kafka (librdkafka) and Kafka's own Java
client against the reference broker (real clients judge our broker); one run each, no fault. The fault runs
(kill, pause, partition) are `chaos run` commands in the README, not CI. KCT_TXN_TARGETS=kafka,reference runs
every client stack against each listed target instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_TARGETS = [t for t in os.environ.get("KCT_TXN_TARGETS", "").split(",") if t]
PAIRS = ([(c, t) for t in _TARGETS for c in ("reference", "confluent", "java")] if _TARGETS else
         [("reference", "kafka"), ("confluent", "reference"), ("java", "reference")])
TXN_TARGETS = _TARGETS or ["reference"]
pytestmark = pytest.mark.timeout(300)


def _history(out: Path) -> tuple[dict, list[dict]]:
    lines = next(out.glob("*.jsonl")).read_text().splitlines()
    return json.loads(lines[0])["header"], [json.loads(line) for line in lines[1:]]


@pytest.mark.parametrize(("client", "target"), PAIRS)
def test_txn_run_records_transactions_and_reads_only_committed(tmp_path: Path, target: str, client: str) -> None:
    out = tmp_path / "out"
    small = ["--producers", "1", "--consumers", "1"] if client == "java" else []   # a JVM per process
    # 15 s: the consume-transform-produce stage first joins its group (initial rebalance delay 3 s, a JVM start);
    # with 10 s, under a load of 8-10 on 2 cores, some runs ended before its first commit; a Java one at 15 s under a
    # load of 13 (its JVMs start and join the group first: ~5 s on a quiet machine)
    proc = subprocess.run(
        [sys.executable, "-m", "chaos", "run", "--workload", "txn", "--target", target, "--brokers", "1",
         "--client", client, "--nemesis", "none", "--duration", "25s" if client == "java" else "15s", "--rate", "15", "--partitions", "2",
         "--abort-prob", "0.3", "--seed", "5", "--quiet", "--out", str(out), *small],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    header, ops = _history(out)
    assert header["settings"]["workload"] == "txn" and header["settings"]["isolation"] == "read_committed"
    txns = [o for o in ops if o["f"] == "txn"]
    done = [o for o in txns if o["type"] != "invoke"]
    assert len(done) == len([o for o in txns if o["type"] == "invoke"])      # every transaction completed
    committed = [o["value"] for o in done if o["type"] == "ok"]
    aborted = [o["value"] for o in done if o["type"] == "fail" and o["value"].get("abort")
               and any(m["f"] == "send" for m in o["value"]["ops"])]
    assert len(committed) >= 20 and aborted, (len(committed), len(aborted))
    assert not [o for o in done if o["type"] == "info"]                        # no fault: every outcome known
    assert all(1 <= len(v["ops"]) <= 4 for v in committed if v["ops"][0]["f"] == "send")
    assert all(m.get("offset", -1) >= 0 for v in committed for m in v["ops"] if m["f"] == "send")
    ctp = [v for v in committed if v["ops"][0]["f"] == "poll"]
    assert ctp and all(v["offsets"]["offsets"] for v in ctp), "no consume-transform-produce transaction committed"
    # read_committed: no plain poll and no final read ever returns a value of an aborted transaction
    aborted_values = {m["value"] for v in aborted for m in v["ops"] if m["f"] == "send"}
    read = [r for o in ops if o["f"] == "poll" and o["type"] == "ok" for r in o["value"]["records"]]
    assert read and not aborted_values & {r["value"] for r in read}
    # ... and the final read holds every committed value
    committed_values = {m["value"] for v in committed for m in v["ops"] if m["f"] == "send"}
    assert committed_values <= {r["value"] for r in read}
    # the log read_uncommitted (evidence beside the history): each committed send's reported offset holds its value
    raw = {(r["partition"], r["offset"]): r["value"] for r in json.loads(next(out.glob("*.uncommitted.json")).read_text())}
    sent = {(m["partition"], m["offset"]): m["value"] for v in committed for m in v["ops"]
            if m["f"] == "send" and m["topic"] == header["settings"]["topics"][0]}
    assert sent and all(raw.get(k) == v for k, v in sent.items())
    result = json.loads(next(out.glob("*.result.json")).read_text())
    assert result["final"]["complete"] and result["stable"]["stable"], result
    assert result["stats"]["txns"]["committed"] == len(committed)


@pytest.mark.parametrize("target", TXN_TARGETS)
def test_a_commit_whose_answer_is_lost_is_info_and_really_committed(tmp_path: Path, target: str) -> None:
    """ok/fail/info: a commit that raised (here: the answer is dropped after EndTxn(commit) succeeded, as a timeout
    would) is `info` — the abort that follows is refused, the outcome is unknown — and indeed it committed: the
    final read_committed read has its values. An abort on purpose is `fail` with abort: true."""
    from chaos.clients import ClientConfig
    from chaos.run import ensure_topic
    from chaos.txn import TxnSpec, TxnWorkload
    from chaos.txn_clients import ReferenceTxnClient
    from fixtures import make_target
    from history import Recorder

    class LostCommitAnswers(ReferenceTxnClient):
        commits = 0

        def commit(self) -> bool:
            super().commit()
            type(self).commits += 1
            if type(self).commits % 3 == 0:
                raise TimeoutError("commit answer lost (test)")
            return True

    def factory(name: str, cfg: ClientConfig) -> Any:
        return LostCommitAnswers(cfg)

    with make_target(target, config={"memory": "true"} if target == "reference" else {},
                     work_dir=tmp_path / "cluster") as t:
        spec = TxnSpec(topic="lost", partitions=2, replication=1, producers=1, transformers=0, consumers=0, rate=20,
                       abort_prob=0.2)
        for topic in spec.topics:
            ensure_topic(t.bootstrap, topic, 2, 1, {})
        rec = Recorder("lost-commit", target=target, settings={"workload": "txn"})
        w = TxnWorkload(spec, rec, "reference", ClientConfig(bootstrap=t.bootstrap, group="g"), seed=2,
                        client_factory=factory)
        w.start()
        time.sleep(6)
        w.stop()
        final = w.final_read()
        assert final["complete"], final
    ops = rec.history.ops
    done = [o for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    info = [o["value"] for o in done if o["type"] == "info"]
    assert info and all("commit answer lost" in v["error"] and "abort_error" in v for v in info)
    assert any(o["type"] == "fail" and o["value"]["abort"] for o in done)
    read = {r["value"] for o in ops if o["f"] == "poll" and o["type"] == "ok" for r in o["value"]["records"]}
    assert {m["value"] for v in info for m in v["ops"]} <= read                   # they did commit
    aborted = {m["value"] for o in done if o["type"] == "fail" for m in o["value"]["ops"]}
    assert not aborted & read
