"""The Spark executor's work, without Spark: the same rows whether the JVM ships a file's bytes or the executor
reads the file: path itself, and an error row (not a crash) for a file that cannot be read."""

from __future__ import annotations

import os
from urllib.parse import quote

import pandas as pd

from history import write_jsonl
from reports import synth
from reports.spark_job import process_files


def test_rows_are_the_same_from_shipped_bytes_and_from_the_path(tmp_path):
    paths = []
    for i in range(3):
        h = synth.generate(f"p{i}", seed=i, n_ops=1500, processes=4, partitions=3)
        if i == 1:
            h = synth.with_anomaly(h, "lost-write")
        d = os.path.join(tmp_path, "with space%41")  # decoded once: "%41" must stay, not become "A"
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"r{i}.jsonl")
        write_jsonl(h, p)
        paths.append(p)
    uris = ["file:" + quote(p) for p in paths]  # percent-encoded, as Spark lists local files
    shipped = pd.DataFrame({"path": uris, "content": [open(p, "rb").read() for p in paths]})
    by_path = pd.DataFrame({"path": uris})
    (a,) = process_files(iter([shipped]))
    (b,) = process_files(iter([by_path]))
    a, b = a.drop(columns=["lin_elapsed_s"]), b.drop(columns=["lin_elapsed_s"])
    assert a.to_dict("records") == b.to_dict("records")
    assert (a["kind"] == "run").sum() == 3 and (a["kind"] == "tp").sum() == 3 + 4 + 3  # run 1 has the scenario's partition too
    bad = a[a["kind"] == "tp"]["bad"].map(len).sum()
    assert bad == 1  # the lost write, in its one partition


def test_a_file_that_vanished_gives_an_error_row(tmp_path):
    (out,) = process_files(iter([pd.DataFrame({"path": ["file:" + os.path.join(tmp_path, "gone.jsonl")]})]))
    row = out.iloc[0]
    assert row["kind"] == "error" and "unreadable" in row["error"] and "gone.jsonl" in row["error"]
