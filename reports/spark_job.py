"""The Spark job: check thousands of runs' histories and aggregate the verdicts into Parquet tables and HTML.

Run it embedded (``python -m reports spark --histories DIR_OR_GLOB --out DIR``, ``local[*]`` by default) or on a
cluster with the same file: ``spark-submit --master spark://host:7077 reports/spark_job.py --histories ... --out ...``.

Plan (DataFrames throughout):

1. ``binaryFile`` source: one row per history file (JSONL, JSONL.gz or Parquet, on any Hadoop file system).
2. ``mapInPandas``: each file is parsed and validated with :mod:`history` (the same code a direct check uses),
   and the executor checks each run's groups: one per topic-partition and one per (group, topic-partition)
   (P-compositionality, see :mod:`reports.analysis`), each with the anomaly checker's cases for its key and its
   own linearizability search; one row per (run, group), plus one ``run`` row per run with its latencies. Files
   are whole runs, so no shuffle is needed to form the groups.
3. ``groupBy`` aggregations into the tables ``runs``, ``targets``, ``anomalies``, ``rules`` and ``parts`` (Parquet),
   and ``report.html``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

if __package__ in (None, ""):  # run as a script by spark-submit: import from the project root, and do not let
    # this directory's modules (reports/html.py) shadow the standard library's.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

from history.io import CorruptLineWarning, gc_paused, read_bytes  # noqa: E402
from history.schema import HistoryError  # noqa: E402
from reports.analysis import PartVerdict, RunVerdict, part_verdicts  # noqa: E402
from reports.anomalies import RESTS_ON_ABSENCE, acceptable  # noqa: E402
from reports.fault_attribution import attribute, fault_intervals  # noqa: E402
from reports.fault_attribution import kinds as fault_kinds  # noqa: E402
from reports.latency import LAT_BINS, LAT_EDGES_NS, latency_histograms  # noqa: E402,F401 - re-exported

HISTORY_GLOB = "*.{jsonl,gz,parquet,pq}"
RESULT_SCHEMA = (
    "run_id string, target string, nemesis string, settings string, path string, kind string, key string, "
    "n_ops long, anomaly_counts map<string,long>, bad array<string>, cases string, lin_model string, "
    "lin_verdict string, lin_elapsed_s double, counterexample string, error string, skipped_lines long, "
    "lat_send array<long>, lat_poll array<long>, indeterminate array<string>, skipped_at array<long>"
)


# ---------------------------------------------------------------- executor side

def _part_row(common: dict, pv: PartVerdict, settings: dict, skipped: list[int]) -> dict:
    """One (run, part) row: its anomalies split into bad (proven, not acceptable under the run's settings) and
    indeterminate (resting on absence in a file with skipped lines), as reports.analysis.verdict_of does."""
    ok = acceptable(settings)
    unproven = [a for a in pv.anomaly_counts if skipped and a not in ok and a in RESTS_ON_ABSENCE]
    if skipped and pv.lin_verdict == "illegal":
        unproven.append(f"linearizable/{pv.lin_model}")
    return {
        **common, "kind": pv.kind, "key": pv.key, "n_ops": pv.ops, "skipped_lines": 0,
        "anomaly_counts": pv.anomaly_counts, "indeterminate": sorted(unproven),
        "bad": sorted(a for a in pv.anomaly_counts if a not in ok and a not in unproven),
        "cases": json.dumps(pv.cases, default=str) if pv.cases else None,
        "lin_model": pv.lin_model, "lin_verdict": pv.lin_verdict, "lin_elapsed_s": pv.lin_elapsed_s,
        "counterexample": json.dumps(pv.counterexample, default=str) if pv.counterexample else None,
    }


def process_files(batches: Iterator, skip_corrupt: bool = False, budget_s: float = 10.0) -> Iterator:
    """mapInPandas over (path[, content]) rows: parse and validate each file with :mod:`history` and check every
    (run, topic-partition) and (run, group-partition) group, here on the executor that read the file. Yields one
    ``run`` row per run (with latencies), one row per group, and one ``error`` row per unreadable file.

    The groups are checked in one pass per checker over the whole run (:func:`reports.analysis.part_verdicts`):
    the analyses partition by key themselves, so copying each group's operations into lists of their own first
    (:func:`reports.analysis.split_parts`, which the tests use to show the verdicts are the same) only cost time.

    Without a ``content`` column the executor reads each (``file:``) path itself: shipping every file's bytes
    from the JVM to Python in Arrow batches cost about as much as checking them (see :func:`run_job`)."""
    import pandas as pd

    cols = [c.split()[0] for c in RESULT_SCHEMA.split(", ")]
    for pdf in batches:
        rows = []
        # The collector stays off for the whole batch: re-enabled between files, it would scan the next file's
        # freshly parsed operations again and again (they are acyclic and freed by reference counting anyway).
        with gc_paused():
            contents = pdf["content"] if "content" in pdf else [None] * len(pdf)
            for path, content in zip(pdf["path"], contents, strict=True):
                try:
                    data = bytes(content) if content is not None else _read_local(path)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", CorruptLineWarning)   # each run names its skipped lines
                        runs = read_bytes(data, path, skip_corrupt=skip_corrupt)
                    if not runs:  # a 0-byte file (or one of blank lines) is an error, as in the CLI, never ignored
                        raise HistoryError("no runs: the file is empty (0 bytes)" if not data else
                                           "no runs in this file", path=path)
                except (HistoryError, RecursionError) as e:
                    err = str(e) if isinstance(e, HistoryError) else f"{path}: input nested too deeply to check"
                    rows.append({"path": path, "kind": "error", "key": "", "n_ops": 0, "error": err,
                                 "skipped_lines": 0, "anomaly_counts": {}, "bad": []})
                    continue
                for h in runs:
                    common = {"run_id": h.run_id, "target": h.target, "nemesis": h.nemesis,
                              "settings": json.dumps(h.settings, sort_keys=True), "path": path}
                    lat_send, lat_poll = latency_histograms(h.ops)
                    rows.append({**common, "kind": "run", "key": "", "n_ops": len(h.ops),
                                 "skipped_lines": len(h.skipped_lines), "skipped_at": list(h.skipped_lines),
                                 "lat_send": lat_send, "lat_poll": lat_poll, "anomaly_counts": {}, "bad": []})
                    faults = fault_intervals(h.ops)
                    cases: dict[str, list] = {}
                    for pv in part_verdicts(h, budget_s):
                        row = _part_row(common, pv, h.settings, h.skipped_lines)
                        rows.append(row)
                        bad = set(row["bad"])
                        for name, items in (pv.cases or {}).items():
                            if name in bad:
                                cases.setdefault(name, []).extend(items)
                    # one "fault" row per fault kind in the run: how many, and the bad cases each preceded
                    blame = attribute(faults, cases)
                    for kind, n in fault_kinds(faults).items():
                        rows.append({**common, "kind": "fault", "key": kind, "n_ops": n, "skipped_lines": 0,
                                     "anomaly_counts": blame.get(kind, {}), "bad": []})
        yield pd.DataFrame([[r.get(c) for c in cols] for r in rows], columns=cols, dtype=object)


def _read_local(uri: str) -> bytes:
    """The bytes of a ``file:`` URI as Spark lists it (percent-encoded), read on this executor."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname  # decodes the percent-escapes, once

    try:
        with open(url2pathname(urlparse(uri).path), "rb") as fh:
            return fh.read()
    except OSError as e:
        raise HistoryError(f"unreadable: {e.strerror or e}", path=uri) from None


# ---------------------------------------------------------------- driver side

@dataclass
class JobResult:
    """What the driver collected: per-run verdicts (same shape as a direct check) and the small tables."""

    runs: list[dict]
    targets: list[dict]
    anomalies: list[dict]
    rules: list[dict]
    errors: list[dict]
    latency: dict[str, dict[str, list[int]]]
    timeline: dict | None
    evidence: list[dict] = field(default_factory=list)
    nemesis_runs: list[dict] = field(default_factory=list)
    nemesis_anomalies: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    out: str = ""

    def verdicts(self) -> dict[str, RunVerdict]:
        """Per-run verdicts comparable (``.key()``) with :func:`reports.analysis.check_history`'s."""
        out = {}
        for r in self.runs:
            out[r["run_id"]] = RunVerdict(
                r["run_id"], r["target"], r["nemesis"], r["ops"],
                {a: n for a, n in sorted((r["anomaly_counts"] or {}).items()) if n},
                sorted(r["bad"] or []),
                {"partition-log": r["lin_partition_log"], "committed-offsets": r["lin_committed_offsets"],
                 **({"topic-metadata": r["lin_topic_metadata"]} if r["has_topic_metadata"] else {})},
                sorted(r["indeterminate"] or []), list(r["skipped_at"] or []),
            )
        return out


def build_session(master: str | None = None, app_name: str = "kafka-history-checks", extra_conf: dict | None = None):  # noqa: ANN201
    """A SparkSession: ``master`` if given, else whatever spark-submit set, else ``local[*]``."""
    from pyspark.sql import SparkSession

    # Executors (local or on this machine's standalone workers) must run this interpreter, which has pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    elif not _launched_by_spark_submit():
        master = "local[*]"
        b = b.master(master)
    if master and master.startswith("local"):
        # embedded: keep every socket on loopback (a cluster's driver must stay reachable, so only here)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    conf = {
        "spark.sql.execution.arrow.maxRecordsPerBatch": "16",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": os.environ.get("REPORTS_SHUFFLE_PARTITIONS", "8"),
        # Task sizes. Each history file counted 4 MB of "open cost" on top of its size, so 1,000 files of 2.4 MB
        # became 200 tasks of 5 files; every task pays scheduling, Python-worker and Arrow-stream setup, and every
        # later aggregation scans the cached results once per task. Files here are read whole and cheaply, so
        # count 1 MB per file, allow 64 MB splits, and let minPartitionNum (set below, a few tasks per core)
        # keep cores balanced: about 50 tasks on local[2], more on a bigger cluster.
        "spark.sql.files.maxPartitionBytes": os.environ.get("REPORTS_MAX_PARTITION_BYTES", str(64 << 20)),
        "spark.sql.files.openCostInBytes": os.environ.get("REPORTS_OPEN_COST_BYTES", str(1 << 20)),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.memory": os.environ.get("REPORTS_SPARK_DRIVER_MEMORY", "2g"),
    }
    conf.update(extra_conf or {})
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if "spark.sql.files.minPartitionNum" not in conf and spark.conf.get("spark.sql.files.minPartitionNum", None) is None:
        spark.conf.set("spark.sql.files.minPartitionNum", str(4 * spark.sparkContext.defaultParallelism))
    if not spark.sparkContext.master.startswith("local"):
        spark.sparkContext.addPyFile(_package_zip())
    return spark


def _launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands this process its gateway; its --master then applies."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


_ZIP: str | None = None


def _package_zip() -> str:
    """Zip history/ and reports/ so a cluster's executors can import them (sc.addPyFile)."""
    global _ZIP
    if _ZIP and os.path.exists(_ZIP):
        return _ZIP
    import tempfile
    import zipfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fd, path = tempfile.mkstemp(prefix="reports-pkg-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w") as z:
        for pkg in ("history", "reports"):
            for dirpath, _dirs, files in os.walk(os.path.join(root, pkg)):
                for f in files:
                    if f.endswith((".py", ".j2", ".html")):
                        full = os.path.join(dirpath, f)
                        z.write(full, os.path.relpath(full, root))
    _ZIP = path
    return path


class Progress:
    """Prints the active stages' task counts every few seconds (long jobs show they are moving)."""

    def __init__(self, spark, enabled: bool = True, every_s: float = 3.0) -> None:  # noqa: ANN001
        self.sc = spark.sparkContext
        self.enabled = enabled
        self.every_s = every_s
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()

    def say(self, msg: str) -> None:
        if self.enabled:
            print(f"[reports {time.monotonic() - self.t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def _run(self) -> None:
        tracker = self.sc.statusTracker()
        while not self._stop.wait(self.every_s):
            parts = []
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks"
                                 + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
            if parts:
                self.say("; ".join(parts))

    def __enter__(self) -> Progress:
        if self.enabled:
            self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


_VERDICT_RANK = {"ok": 0, "unknown": 1, "illegal": 2}


def run_job(
    spark,  # noqa: ANN001
    histories: str,
    out: str,
    *,
    budget_s: float = 10.0,
    skip_corrupt: bool = False,
    html: bool = True,
    progress: bool = True,
) -> JobResult:
    """Read every history under ``histories``, check each (run, part) on the executors, write tables + HTML."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.utils import AnalysisException

    timings: dict[str, float] = {}
    with Progress(spark, progress) as prog:
        t0 = time.monotonic()
        reader = spark.read.format("binaryFile").option("pathGlobFilter", HISTORY_GLOB)
        if not any(c in histories for c in "*?[{"):
            reader = reader.option("recursiveFileLookup", "true")
        try:
            listing = reader.load(histories)
        except AnalysisException as e:
            raise HistoryError(f"no history files at {histories}: {e.getMessage() if hasattr(e, 'getMessage') else e}") from None
        # Local files (file: URIs, which every executor of a local or single-machine cluster can open, as Spark's
        # own reader assumes) are read by the Python executors themselves: 1,000 files of 2.5 MB took 29 s on
        # local[2] to ship as Arrow content and 5 s as paths. Any other file system keeps Spark's reader.
        counts = listing.agg(F.count("*").alias("n"),
                             F.count(F.when(~F.col("path").startswith("file:"), 1)).alias("remote")).first()
        n_files = counts["n"]
        files = listing.select("path") if counts["remote"] == 0 else listing.select("path", "content")
        empty = _empty_files(listing, n_files)
        if n_files == 0:
            if empty:
                raise HistoryError(f"no runs: every history file at {histories} is empty (0 bytes)")
            raise HistoryError(f"no history files (.jsonl, .jsonl.gz, .parquet) at {histories}")
        prog.say(f"{n_files} history files")
        def _process(it: Iterator) -> Iterator:
            return process_files(it, skip_corrupt, budget_s)

        # No shuffle before checking: a file holds whole runs, so its groups are formed and checked by the task
        # that read it; moving every operation across the cluster to regroup them would only cost time.
        results = files.mapInPandas(_process, RESULT_SCHEMA).cache()
        n_rows = results.count()
        timings["check_s"] = time.monotonic() - t0
        prog.say(f"checked {n_rows} (run, part) groups in {timings['check_s']:.1f}s")

        errors = [r.asDict() for r in results.filter(F.col("kind") == "error").select("path", "error").collect()]
        errors += [{"path": p, "error": f"{p}: no runs: the file is empty (0 bytes)"} for p in empty]
        if errors and not skip_corrupt:
            results.unpersist()
            listing = "; ".join(e["error"] for e in errors[:5])
            raise HistoryError(f"{len(errors)} corrupt history file(s): {listing}"
                               + (" ..." if len(errors) > 5 else "") + " (use --skip-corrupt to skip bad lines)")

        t1 = time.monotonic()
        ok = results.filter(~F.col("kind").isin("error", "fault"))
        fault_rows = results.filter(F.col("kind") == "fault")
        rank = F.create_map(*[x for k, v in _VERDICT_RANK.items() for x in (F.lit(k), F.lit(v))])
        unrank = F.create_map(*[x for k, v in _VERDICT_RANK.items() for x in (F.lit(v), F.lit(k))])

        def lin_of(model: str):  # noqa: ANN202
            r = F.max(F.when(F.col("lin_model") == model, rank[F.col("lin_verdict")]))
            return F.coalesce(unrank[r], F.lit("ok"))

        # Each anomaly found is bad (proven, forbidden by the run's settings), indeterminate (rests on absence in
        # a file with skipped lines) or acceptable (the run's settings allow it, e.g. partial_reads).
        anomalies_long = ok.select(
            "run_id", "target", "nemesis", "settings", F.explode("anomaly_counts").alias("anomaly", "cases"),
            F.col("bad"), F.coalesce(F.col("indeterminate"), F.array().cast("array<string>")).alias("indeterminate"),
        ).withColumn(
            "verdict", F.when(F.array_contains("bad", F.col("anomaly")), F.lit("bad"))
            .when(F.array_contains("indeterminate", F.col("anomaly")), F.lit("indeterminate"))
            .otherwise(F.lit("acceptable")),
        ).withColumn("acceptable", F.col("verdict") == "acceptable")
        runs = (
            ok.groupBy("run_id").agg(
                F.first("target").alias("target"),
                F.first("nemesis").alias("nemesis"),
                F.first("settings").alias("settings"),
                F.first("path").alias("path"),
                F.sum(F.when(F.col("kind") == "run", F.col("n_ops"))).alias("ops"),
                F.sum(F.when(F.col("kind") == "run", F.col("skipped_lines"))).alias("skipped_lines"),
                F.first(F.when(F.col("kind") == "run", F.col("skipped_at")), ignorenulls=True).alias("skipped_at"),
                F.sort_array(F.array_distinct(F.flatten(F.collect_list("bad")))).alias("bad"),
                F.sort_array(F.array_distinct(F.flatten(F.collect_list(F.coalesce(
                    "indeterminate", F.array().cast("array<string>")))))).alias("indeterminate"),
                lin_of("partition-log").alias("lin_partition_log"),
                lin_of("committed-offsets").alias("lin_committed_offsets"),
                lin_of("topic-metadata").alias("lin_topic_metadata"),  # the metadata workload (reports.metadata)
                F.coalesce(F.max((F.col("lin_model") == "topic-metadata").cast("int")), F.lit(0))
                .cast("boolean").alias("has_topic_metadata"),
                F.sum(F.coalesce(F.col("lin_elapsed_s"), F.lit(0.0))).alias("lin_elapsed_s"),
            )
        )
        # Sum counts of the same anomaly across parts.
        summed = anomalies_long.groupBy("run_id", "anomaly").agg(F.sum("cases").alias("cases"))
        per_run_counts = summed.groupBy("run_id").agg(
            F.map_from_entries(F.collect_list(F.struct("anomaly", "cases"))).alias("anomaly_counts"))
        proven_illegal = (F.col("skipped_lines") == 0) & (
            (F.col("lin_partition_log") == "illegal") | (F.col("lin_committed_offsets") == "illegal")
            | (F.col("lin_topic_metadata") == "illegal"))
        runs = runs.join(per_run_counts, "run_id", "left").withColumn(
            "status", F.when((F.size("bad") > 0) | proven_illegal, F.lit("invalid"))
            .when(F.size("indeterminate") > 0, F.lit("indeterminate")).otherwise(F.lit("valid")),
        ).withColumn("valid", F.col("status") == "valid").cache()
        targets = runs.groupBy("target").agg(
            F.count("*").alias("runs"),
            F.sum(F.col("valid").cast("long")).alias("valid_runs"),
            F.sum((F.col("status") == "invalid").cast("long")).alias("failing_runs"),
            F.sum((F.col("status") == "indeterminate").cast("long")).alias("indeterminate_runs"),
            F.sum("ops").alias("ops"),
            F.sum((F.col("lin_partition_log") == "illegal").cast("long")).alias("log_illegal"),
            F.sum((F.col("lin_partition_log") == "unknown").cast("long")).alias("log_unknown"),
            F.sum((F.col("lin_committed_offsets") == "illegal").cast("long")).alias("offsets_illegal"),
            F.sum((F.col("lin_committed_offsets") == "unknown").cast("long")).alias("offsets_unknown"),
        )
        anomalies = (
            anomalies_long.groupBy("target", "nemesis", "anomaly", "verdict", "acceptable")
            .agg(F.countDistinct("run_id").alias("runs"), F.sum("cases").alias("cases"))
        )
        lin_rules = runs.select(
            "target", "run_id",
            F.explode(F.array(
                F.struct(F.lit("linearizable/partition-log").alias("rule"),
                         (F.col("lin_partition_log") == "illegal").alias("failed"),
                         (F.col("lin_partition_log") == "unknown").alias("unknown")),
                F.struct(F.lit("linearizable/committed-offsets").alias("rule"),
                         (F.col("lin_committed_offsets") == "illegal").alias("failed"),
                         (F.col("lin_committed_offsets") == "unknown").alias("unknown")),
            )).alias("r"),
        ).select("target", "run_id", "r.rule", "r.failed", "r.unknown")
        anomaly_rules = summed.join(runs.select("run_id", "target", "bad"), "run_id").select(
            "target", "run_id", F.concat(F.lit("anomaly/"), F.col("anomaly")).alias("rule"),
            F.array_contains("bad", F.col("anomaly")).alias("failed"), F.lit(False).alias("unknown"))
        n_runs_by_target = runs.groupBy("target").agg(F.count("*").alias("runs_checked"))
        rules = (
            lin_rules.unionByName(anomaly_rules)
            .groupBy("target", "rule")
            .agg(F.sum(F.col("failed").cast("long")).alias("failed_runs"),
                 F.sum(F.col("unknown").cast("long")).alias("unknown_runs"))
            .join(n_runs_by_target, "target")
        )
        # per nemesis: runs with each fault kind, how many of them failed, and which anomalies it preceded
        fault_runs = fault_rows.select("run_id", F.col("key").alias("fault"), F.col("n_ops").alias("faults"),
                                       "anomaly_counts").join(runs.select("run_id", "target", "status"), "run_id")
        nemesis_runs = fault_runs.groupBy("target", "fault").agg(
            F.countDistinct("run_id").alias("runs"), F.sum("faults").alias("faults"),
            F.sum((F.col("status") == "invalid").cast("long")).alias("failing_runs"))
        nemesis_blame = fault_runs.select("target", "fault", "run_id",
                                          F.explode("anomaly_counts").alias("anomaly", "cases")).groupBy(
            "target", "fault", "anomaly").agg(F.countDistinct("run_id").alias("runs_with"),
                                               F.sum("cases").alias("cases_sampled"))
        parts_table = ok.filter(F.col("kind") != "run").select(
            "run_id", "target", "nemesis", "kind", "key", "n_ops", "anomaly_counts", "bad", "lin_model",
            "lin_verdict", "lin_elapsed_s", "counterexample", "cases")

        if "://" not in out:
            os.makedirs(out, exist_ok=True)
        for name, df in (("runs", runs), ("targets", targets), ("anomalies", anomalies), ("rules", rules),
                         ("parts", parts_table), ("nemesis_runs", nemesis_runs), ("nemesis_anomalies", nemesis_blame)):
            df.write.mode("overwrite").parquet(os.path.join(out, name))
        if errors:
            spark.createDataFrame(errors, "path string, error string").write.mode("overwrite").parquet(
                os.path.join(out, "errors"))
        timings["aggregate_s"] = time.monotonic() - t1
        prog.say(f"wrote tables to {out} in {timings['aggregate_s']:.1f}s")

        run_rows = [r.asDict(recursive=True) for r in runs.collect()]
        lat_rows = ok.filter(F.col("kind") == "run").select("target", "nemesis", "lat_send", "lat_poll").collect()
        latency: dict[str, dict[str, list[int]]] = {}
        for r in lat_rows:
            d = latency.setdefault(r["target"], {"send": [0] * LAT_BINS, "poll": [0] * LAT_BINS})
            for kind in ("send", "poll"):
                for i, c in enumerate(r[f"lat_{kind}"] or []):
                    d[kind][i] += c
        failing = sorted((r for r in run_rows if r["status"] == "invalid"), key=lambda r: r["run_id"])
        timeline = None
        if failing:
            timeline = _timeline(spark, failing[0], ok)
        evidence = [
            r.asDict() for r in ok.filter((F.size("bad") > 0) | (F.col("lin_verdict") == "illegal"))
            .select("run_id", "key", "lin_model", "lin_verdict", "counterexample", "cases")
            .orderBy("run_id", "key").limit(50).collect()
        ]
        res = JobResult(
            runs=sorted(run_rows, key=lambda r: r["run_id"]),
            targets=[r.asDict() for r in targets.collect()],
            anomalies=[r.asDict() for r in anomalies.collect()],
            rules=[r.asDict() for r in rules.collect()],
            errors=errors,
            latency=latency,
            timeline=timeline,
            evidence=evidence,
            nemesis_runs=sorted((r.asDict() for r in nemesis_runs.collect()), key=lambda r: (r["target"], r["fault"])),
            nemesis_anomalies=sorted((r.asDict() for r in nemesis_blame.collect()),
                                     key=lambda r: (r["target"], r["fault"], r["anomaly"])),
            timings=timings,
            out=out,
        )
        runs.unpersist()
        results.unpersist()
        timings["total_s"] = time.monotonic() - t0      # before the page is written: the page shows it
        if html:
            from reports.html import write_report

            path = write_report(res, os.path.join(out, "report.html"))
            prog.say(f"HTML report: {path}")
    return res


def _empty_files(listing, n_listed: int) -> list[str]:  # noqa: ANN001
    """The 0-byte files the listing matched: Spark's file sources drop them from the rows (a 0-byte file has no
    splits) but its file index still names them. Each is an error row, as in the CLI, never silently ignored."""
    from urllib.parse import urlparse

    every = listing.inputFiles()
    if len(every) <= n_listed:
        return []
    listed = {urlparse(r["path"]).path for r in listing.select("path").collect()}
    return sorted(p for p in every if urlparse(p).path not in listed)


def _timeline(spark, run: dict, results) -> dict:  # noqa: ANN001
    """The operations of one failing run (read back from its file) and its flagged evidence, for the plot."""
    from pyspark.sql import functions as F  # noqa: N812

    content = spark.read.format("binaryFile").load(run["path"]).select("content").first()["content"]
    h = next(x for x in read_bytes(bytes(content), run["path"], skip_corrupt=True) if x.run_id == run["run_id"])
    flagged: set[int] = set()
    evidence = results.filter((F.col("run_id") == run["run_id"]) & (F.col("kind") != "run")).select(
        "cases", "counterexample").collect()
    for row in evidence:
        for blob in (row["cases"], row["counterexample"]):
            if blob:
                _collect_indices(json.loads(blob), flagged)
    calls: dict[int, dict] = {}
    ops = []
    for op in h.ops:
        if op["type"] == "invoke":
            calls[op["process"]] = op
        elif op["process"] >= 0:
            inv = calls.pop(op["process"], None)
            t_call = inv["time_ns"] if inv else op["time_ns"]
            ops.append({"process": op["process"], "call": t_call, "ret": op["time_ns"], "f": op["f"],
                        "type": op["type"], "index": op["index"], "flagged": op["index"] in flagged})
        else:
            ops.append({"process": -1, "call": op["time_ns"], "ret": op["time_ns"], "f": op["f"], "type": "info",
                        "index": op["index"], "flagged": False})
    return {"run_id": h.run_id, "target": h.target, "nemesis": h.nemesis, "ops": ops, "bad": run["bad"],
            "lin": {"partition-log": run["lin_partition_log"], "committed-offsets": run["lin_committed_offsets"]}}


def _collect_indices(x: object, out: set[int]) -> None:
    if isinstance(x, dict):
        if "index" in x and "process" in x and isinstance(x["index"], int):
            out.add(x["index"])
        if "ref" in x and isinstance(x["ref"], int):
            out.add(x["ref"])
        for v in x.values():
            _collect_indices(v, out)
    elif isinstance(x, list):
        for v in x:
            _collect_indices(v, out)


def add_arguments(p) -> None:  # noqa: ANN001
    """The job's options (shared by ``python -m reports spark`` and spark-submit)."""
    p.add_argument("--histories", required=True, help="directory (searched recursively) or glob of history files")
    p.add_argument("--out", required=True, help="output directory for Parquet tables and report.html")
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--budget", type=float, default=10.0, help="linearizability time budget per part, seconds")
    p.add_argument("--skip-corrupt", action="store_true", help="skip corrupt lines (with a count) instead of failing")
    p.add_argument("--no-html", action="store_true", help="write the Parquet tables only")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def run_from_args(args) -> JobResult:  # noqa: ANN001
    if args.budget <= 0:
        raise HistoryError("--budget must be positive")
    spark = build_session(args.master)
    try:
        res = run_job(spark, args.histories, args.out, budget_s=args.budget, skip_corrupt=args.skip_corrupt,
                      html=not args.no_html, progress=not args.quiet)
    finally:
        spark.stop()
    bad = [r for r in res.runs if r["status"] == "invalid"]
    unproven = [r for r in res.runs if r["status"] == "indeterminate"]
    print(f"{len(res.runs)} runs checked, {len(bad)} failing, {len(unproven)} indeterminate (skipped lines), "
          f"{len(res.errors)} unreadable files; tables in {res.out}")
    return res


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point."""
    import argparse

    p = argparse.ArgumentParser(prog="spark_job.py", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        run_from_args(args)
    except HistoryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
