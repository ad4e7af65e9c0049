"""The HTML conformance report with Apache Kafka as the column of truth: Kafka's runs first, each divergence of
another target beside Kafka's answer to the same check, and a check Kafka itself fails marked as suspect."""
from __future__ import annotations

import html
import json
from pathlib import Path

from reports.conformance_report import SCHEMA, build, write_report


def _run(name: str, version: str, checks: list[tuple[str, str, str]]) -> dict:
    """A minimal results document: checks as (nodeid, outcome, response error code of its last exchange)."""
    return {
        "schema": SCHEMA, "run_id": f"{name}-1", "target": {"name": name, "version": version, "config": {}},
        "rules": {"R-ONE": {"id": "R-ONE", "statement": "one", "source": "s", "suite": "x"},
                  "R-TWO": {"id": "R-TWO", "statement": "two", "source": "s", "suite": "x"}},
        "checks": [{"nodeid": nodeid, "name": nodeid.rsplit("::", 1)[-1], "suite": "x", "rules": [rule],
                    "outcome": outcome,
                    "message": f"{name} said {code}" if outcome != "pass" else None, "duration_s": 0.1,
                    "evidence": {"exchanges": [{"at_ms": 1, "api": "Fetch", "version": 12, "request": {},
                                                "response": {"error_code": code}, "rtt_ms": 1}]}}
                   for nodeid, outcome, code, rule in checks],
    }


def test_kafka_comes_first_and_divergences_sit_beside_kafkas_answer(tmp_path: Path) -> None:
    tansu = _run("tansu", "tansu 0.6.0", [
        ("conformance/suites/test_x.py::test_one", "divergence", "1", "R-ONE"),
        ("conformance/suites/test_x.py::test_two", "divergence", "6", "R-TWO")])
    # --pyargs runs name the same check with another directory prefix: still the same check
    kafka = _run("kafka", "Apache Kafka 4.4.0", [
        ("../../tmp/x::test_one", "pass", "0", "R-ONE"),
        ("conformance/suites/test_x.py::test_two", "divergence", "7", "R-TWO")])
    view = build([tansu, kafka])
    assert view["columns"] == ["kafka", "tansu"] and view["kafka_columns"] == ["kafka"]
    cards = {f["check"]["name"]: f for f in view["findings"]["divergence"] if f["column"] == "tansu"}
    assert cards["test_one"]["kafka"]["outcome"] == "pass"
    assert cards["test_one"]["kafka"]["recent"][-1]["response"] == {"error_code": "0"}
    assert cards["test_two"]["kafka"]["outcome"] == "divergence"      # the check is suspect
    cells = {row["id"]: row["cells"] for rows in view["suites"].values() for row in rows}
    assert cells["R-TWO"][1]["kafka_too"] and not cells["R-ONE"][1]["kafka_too"]
    assert not [f for f in view["findings"]["divergence"] if f["column"] == "kafka" and f["kafka"]]

    paths = []
    for doc in (tansu, kafka):
        p = tmp_path / f"{doc['target']['name']}.json"
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    page = html.unescape(Path(write_report(paths, str(tmp_path / "out"))).read_text())
    assert page.index("<th>kafka</th>") < page.index("<th>tansu</th>")
    assert "Apache Kafka on the same check (kafka): ✓ pass" in page
    assert "Kafka diverges too: the check, not this target, is" in page
    assert "Apache Kafka diverges here too" in page


def test_without_a_kafka_run_the_page_says_divergences_are_unchecked(tmp_path: Path) -> None:
    tansu = _run("tansu", "tansu 0.6.0", [("t.py::test_one", "divergence", "1", "R-ONE")])
    view = build([tansu])
    assert view["kafka_columns"] == [] and view["findings"]["divergence"][0]["kafka"] == {"ran": False}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(tansu))
    page = Path(write_report([str(p)], str(tmp_path / "out"))).read_text()
    assert "No Apache Kafka run among" in page
