"""The history contract: what every workload and suite records and every checker reads.

This docstring is the specification (in the spirit of Jepsen's ``jepsen.tests.kafka`` namespace docstring).

Model
=====
A Kafka cluster is, for our purposes, a set of totally ordered append-only logs called *partitions*, named
``"topic/partition"`` (the *key*, e.g. ``"orders/3"``). A *send* appends one unique value to a partition and is
acknowledged with the *offset* it got; offsets in one partition strictly increase but need not be contiguous
(transaction markers and compaction leave holes). A *poll* returns records ``(offset, value)`` from the partitions
the consumer is assigned, continuing where the previous poll of that consumer stopped. Consumer groups commit the
next offset to read per partition; an offset fetch reads it back.

Encoding
========
One operation per JSON line (one Parquet row with the same columns, ``value`` stored as JSON text)::

    {"run_id": "r1", "index": 7, "time_ns": 1234, "process": 2, "type": "ok", "f": "send",
     "value": {"topic": "t", "partition": 0, "key": "k", "value": 17, "offset": 4}}

- ``run_id`` (str) names the run; ``index`` (int) is the position in the run, strictly increasing from 0;
  ``time_ns`` (int) is a monotonic clock reading, non-decreasing along ``index``; ``process`` (int) is the logical
  client (nemesis events use process ``-1``).
- ``type`` is Jepsen's: ``invoke`` starts an operation; ``ok`` = it happened, ``fail`` = it certainly did not
  happen, ``info`` = outcome unknown (timeout, crash: it may or may not have happened). A completion (ok/fail/info)
  follows the invoke of the same process with the same ``f``; a process has at most one operation in flight.
  An invoke with no completion (the client crashed, the run ended, or with ``skip_corrupt`` its completion line
  was damaged) is indeterminate exactly like ``info``: it may have taken effect at any time after its invoke.
  Every checker treats the two alike.
- ``f`` and ``value``:

  ``send``      invoke ``{topic, partition, key, value}``; ok adds ``offset``. A batch is
                ``{records: [{topic, partition, key, value}, ...]}`` and its ok gives each record an ``offset``.
                Values are unique per run, so each write is identifiable.
  ``poll``      invoke ``{}`` (or ``{max_records: n}``); ok ``{records: [{topic, partition, offset, key, value}, ...]}``
                in the order the client returned them, and optionally ``positions: {"t/0": 12, ...}``: per
                partition, the fetch position the poll read from, listed only where the poll returned records
                of that partition or the recorder knows an answer for it came back during this poll (clients
                that fetch in the background, kafka-python and librdkafka, list only the former: their empty
                polls say nothing). A listed partition's records are what the log
                held from that position on: the first one is the first record at or after it, and none at all
                means nothing was there yet (below the high watermark). That makes empty reads evidence (a
                stale read of an offset acknowledged long before is caught); a position past the end reading
                nothing is legal. Polls without ``positions`` (every file written before it existed) say nothing
                about what they did not read.
  ``assign``    ``{partitions: ["t/0", ...]}``: replaces the consumer's partitions (Jepsen's ``:assign``).
  ``subscribe`` ``{topics: ["t", ...]}``: the group decides which partitions (Jepsen's ``:subscribe``).
  ``commit``    ``{group, offsets: {"t/0": 12, ...}}``: commit of the next offset to read; an ok completion's
                ``offsets`` are the ones committed (a partly refused commit lists only the accepted partitions).
  ``fetch_offsets``  invoke ``{group, partitions: [...]}``; ok ``{group, offsets: {"t/0": 12 or null}}``.
  ``txn``       one operation per transaction, on the process that runs the transactional producer::

                  {"txn_id": "tp-3", "abort": false,
                   "ops": [{"f": "send", "topic": "t", "partition": 0, "key": "k", "value": "v17"},
                           {"f": "poll", "records": [{topic, partition, offset, key, value}, ...]}, ...],
                   "offsets": {"group": "g", "offsets": {"t/0": 12}}}

                ``ops`` are the micro-operations in program order: a ``send`` is a record (an ok completion adds
                its ``offset`` when known), a ``poll`` lists the ``records`` the transaction read (read_committed
                input of consume-transform-produce; required in an ok completion, optional elsewhere).
                ``offsets`` (optional) are the consumer offsets sent with the transaction
                (send_offsets_to_transaction); ``abort`` (optional) says the transaction was aborted on purpose.
                ``txn_id`` is the transactional.id. ``ok`` = committed (commit_transaction returned); ``fail`` =
                certainly not committed: aborted on purpose, or a definite error followed by a successful abort,
                or any error before commit was asked for (``error``; ``abort_error`` if the abort then failed
                too: without EndTxn(commit) no transaction commits, the coordinator aborts it on timeout or at
                the next InitProducerId); a consume-transform-produce transaction that read nothing is ``fail``
                with ``abort: true`` and an empty poll. ``info``, or an invoke never completed = unknown:
                neither committed nor aborted.
  Metadata operations (``chaos run --workload metadata``; checked by ``reports.metadata``), one per admin
  request, sent at protocol level so every answer is recorded. ``node`` is the broker the request went to;
  ``code`` the Kafka error code of a ``fail`` (a definite answer: nothing changed) or ``info``:

  ``create_topic``       invoke ``{topic, partitions, replication}``; ok as invoke; ``fail`` with ``code``
                         TOPIC_ALREADY_EXISTS is an observation (the topic exists after the request).
  ``delete_topic``       invoke ``{topic}``; ``fail`` with UNKNOWN_TOPIC_OR_PARTITION observes it absent.
  ``create_partitions``  invoke ``{topic, count}`` (the new total); ``fail`` with INVALID_PARTITIONS observes at
                         least ``count`` partitions, with UNKNOWN_TOPIC_OR_PARTITION the topic absent.
  ``elect_leaders``      invoke ``{topic, partition}`` (preferred election); ok (NONE or ELECTION_NOT_NEEDED,
                         ``code`` says which) and ``fail`` PREFERRED_LEADER_NOT_AVAILABLE observe the partition;
                         ``fail`` UNKNOWN_TOPIC_OR_PARTITION observes it missing.
  ``metadata``           invoke ``{topics: [...], node}``; ok ``{node, topics: {name: partition count or null
                         (absent)}, leaders: {name: [leader per partition]}}``; ``final: true`` on the reads
                         after every fault was healed. A read changes nothing: its errors are ``fail``.
  ``list_offsets``, ``nemesis``, ``crash`` (a client was torn down and replaced; its consumer position is gone),
  and others: recorded, ignored by the analyses below unless they say otherwise.

Files: a file holds one or more *whole* runs (a run is never split across files; the Spark job checks each file's
runs where it reads them). ``history.Recorder`` writes this format and enforces the pairing rules as it records.

A run starts with one *header* line, ``{"run_id": ..., "header": {"target": ..., "nemesis": ..., "settings":
{...}}}``, giving the target (``reference``, ``tansu``, ``docker``, ``live``, ...), the fault schedule and the
settings that decide which anomalies are acceptable (``sub_via``: ``["assign"]`` or ``["subscribe"]``). In
Parquet every row carries ``target`` and ``nemesis`` and the header settings are in the ``settings`` column.

Analyses (``reports.checkers``; names and meanings are Jepsen's Kafka checker's)
==============================================================================
The *version order* of a key is built from every ok poll and every send that must have happened (ok, or info
and read by someone): offset -> value. Dense indices number the observed offsets 0, 1, 2, ... skipping holes;
a value's index is the index of the first offset it was seen at.

- ``inconsistent-offsets``  two different values observed at one offset of a key.
- ``duplicate``             one value observed at more than one offset of a key.
- ``lost-write``            an acknowledged (or info but read) send whose index is below the highest index any
                            ok poll read, yet no ok poll ever read it.
- ``unseen``                an acknowledged send never read by any ok poll and *not* below the highest read
                            index (the tail nobody caught up with). Jepsen's count includes lost writes; ours
                            keeps the two apart so each case is reported once.
- ``G1a``                   aborted read: an ok poll read a value whose send failed.
- ``nonmonotonic-send``     one process's successive sends to a key went backwards (or stayed) in the order.
- ``int-nonmonotonic-send`` the same within one batch send.
- ``nonmonotonic-poll``     one process's poll started at or before where its previous poll of that key ended.
- ``int-nonmonotonic-poll`` the same within one poll (records out of order or repeated).
- ``poll-skip``             a process's poll started past the value right after where its previous poll of
                            that key ended: some observed values were skipped. An ``assign``/``subscribe`` that
                            drops the key, a ``crash`` of the process, or a poll of the process whose outcome is
                            unknown (``info``, or an invoke never completed: it may have fetched and moved the
                            position without returning what it read) resets this tracking; a ``fail`` poll does
                            not.
- ``int-poll-skip``         the same within one poll.
- ``int-send-skip``         a batch's sends to a key were not adjacent (normal in Kafka; always acceptable).

A ``txn`` takes part in every analysis above as one operation: its sends as a batch send of its outcome (ok =
committed, fail = aborted, info = unknown), the records its polls read (ok only) as one poll of its process; a
``fail`` or ``info`` txn that polled resets that process's poll tracking (the consumer is rewound on abort).
``G1a`` is then Jepsen's aborted read. The transactional analyses (``reports.txn``) add:

- ``precommitted-read``     a read of a value before its writing transaction could have committed: the
                            transaction read its own write (Jepsen), or the read completed before the writing
                            transaction was even invoked.
- ``torn``                  an intermediate read: an operation read some of a committed transaction's records
                            but not one that lay inside the offset range it read of that partition.
- ``G1c``                   circular information flow: a cycle of write-read edges between committed operations
                            (T1 read a value T2 wrote, ..., Tn read a value T1 wrote).
- ``G0``                    a write cycle: a cycle of write-write edges (log order of successive values of a
                            partition); only with the header setting ``ww_deps`` (Jepsen's ``:ww-deps``), and
                            always acceptable: Kafka does not isolate the writes of open transactions.

Which anomalies are acceptable under which settings is decided in one place: ``reports.checkers.ACCEPTABLE``.

Linearizability (``reports.linearizability``): each partition's log (send = append returning an offset, poll =
reads of offsets returning values) and each (group, partition)'s committed offset (commit = write,
fetch_offsets = read) are checked with a Wing-Gong-Lowe search, one part at a time (P-compositionality),
under a time budget; verdicts are ``ok``, ``illegal`` (with the smallest failing prefix window) or ``unknown``.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_VERSION = 1

TYPES = ("invoke", "ok", "fail", "info")
COMPLETIONS = frozenset(("ok", "fail", "info"))
KNOWN_FS = frozenset(
    ("send", "poll", "assign", "subscribe", "commit", "fetch_offsets", "list_offsets", "nemesis", "crash", "txn")
)
# The metadata workload's operations (validated here; not in KNOWN_FS, so the typed fast path leaves their runs to
# the generic reader, which keeps every field of their values).
METADATA_FS = frozenset(("create_topic", "delete_topic", "create_partitions", "elect_leaders", "metadata"))
NEMESIS_PROCESS = -1

# Column order for Parquet and for the Spark job's tables.
COLUMNS = ("run_id", "index", "time_ns", "process", "type", "f", "value", "target", "nemesis", "settings")


class HistoryError(ValueError):
    """A history breaks the contract; ``line`` (1-based, when known) points at the offending record."""

    def __init__(self, message: str, *, line: int | None = None, path: str | None = None) -> None:
        self.line = line
        self.path = path
        where = ""
        if path is not None:
            where += f"{path}"
        if line is not None:
            where += f":{line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = message


def key_of(topic: str, partition: int) -> str:
    """The key of a topic-partition: ``"topic/partition"``."""
    return f"{topic}/{partition}"


def split_key(key: str) -> tuple[str, int]:
    """Inverse of :func:`key_of` (topics may contain ``/``; the partition is after the last one)."""
    topic, _, part = key.rpartition("/")
    return topic, int(part)


_SCALARS = (str, int, float)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise HistoryError(msg)


def _check_record(rec: Any, *, completed: bool, polled: bool) -> None:
    # Plain ifs with constant messages: this runs for every record of every operation read.
    if not isinstance(rec, dict):
        raise HistoryError("record must be an object")
    if not isinstance(rec.get("topic"), str):
        raise HistoryError("record needs a string topic")
    part = rec.get("partition")
    if part.__class__ is not int:
        raise HistoryError("record needs an integer partition")
    if "value" not in rec:
        raise HistoryError("record needs a value")
    v = rec["value"]
    if v is not None and not isinstance(v, _SCALARS):
        raise HistoryError("record value must be a scalar (str/int/float)")
    off = rec.get("offset")
    if polled:
        if off.__class__ is not int:
            raise HistoryError("polled record needs an integer offset")
    elif off is not None and off.__class__ is not int:
        raise HistoryError("offset must be an integer")


def validate_value(f: str, typ: str, value: Any) -> None:
    """Check ``value`` against the encoding for ``f`` (unknown ``f`` values are accepted as recorded)."""
    if f == "send":
        if not isinstance(value, dict):
            raise HistoryError("send value must be an object")
        if "records" in value:
            recs = value["records"]
            if not (isinstance(recs, list) and recs):
                raise HistoryError("send records must be a non-empty list")
            for r in recs:
                _check_record(r, completed=typ == "ok", polled=False)
        else:
            _check_record(value, completed=typ == "ok", polled=False)
    elif f == "poll":
        if typ == "ok":
            if not (isinstance(value, dict) and isinstance(value.get("records"), list)):
                raise HistoryError("poll ok needs records")
            for r in value["records"]:
                _check_record(r, completed=True, polled=True)
            if "positions" in value:
                check_positions(value["positions"])
    elif f == "txn":
        check_txn(typ, value)
    elif f in METADATA_FS:
        check_metadata(f, typ, value)
    elif f == "assign":
        _need(isinstance(value, dict) and isinstance(value.get("partitions"), list), "assign needs partitions")
        for k in value["partitions"]:
            _need(isinstance(k, str) and "/" in k, "assign partitions are 'topic/partition' strings")
    elif f == "subscribe":
        _need(isinstance(value, dict) and isinstance(value.get("topics"), list), "subscribe needs topics")
    elif f in ("commit", "fetch_offsets"):
        if not (isinstance(value, dict) and isinstance(value.get("group"), str)):
            raise HistoryError(f"{f} needs a group")
        if f == "commit" or typ == "ok":
            offs = value.get("offsets")
            if not isinstance(offs, dict):
                raise HistoryError(f"{f} needs offsets")
            for k, o in offs.items():
                if "/" not in k or not (o is None or _is_int(o)):
                    raise HistoryError(f"{f} offsets map 'topic/partition' to int")


def check_txn(typ: str, value: Any) -> None:
    """A ``txn`` value: ``txn_id``, ``ops`` (send and poll micro-operations), optional ``abort`` and ``offsets``."""
    if not isinstance(value, dict):
        raise HistoryError("txn value must be an object")
    if not isinstance(value.get("txn_id"), str):
        raise HistoryError("txn needs a string txn_id (the transactional.id)")
    mops = value.get("ops")
    if not (isinstance(mops, list) and mops):
        raise HistoryError("txn needs a non-empty list of ops")
    for i, m in enumerate(mops):
        if not isinstance(m, dict):
            raise HistoryError(f"txn op {i} must be an object")
        f = m.get("f")
        if f == "send":
            try:
                _check_record(m, completed=typ == "ok", polled=False)
            except HistoryError as e:
                raise HistoryError(f"txn op {i} (send): {e.reason}") from None
        elif f == "poll":
            recs = m.get("records")
            if recs is None and typ != "ok":
                continue
            if not isinstance(recs, list):
                raise HistoryError(f"txn op {i} (poll) needs records (a list) in an ok txn")
            for r in recs:
                try:
                    _check_record(r, completed=True, polled=True)
                except HistoryError as e:
                    raise HistoryError(f"txn op {i} (poll): {e.reason}") from None
        else:
            raise HistoryError(f"txn op {i}: f must be send or poll, got {f!r}")
    if "abort" in value and not isinstance(value["abort"], bool):
        raise HistoryError("txn abort must be true or false")
    if "offsets" in value:
        o = value["offsets"]
        if not (isinstance(o, dict) and isinstance(o.get("group"), str) and isinstance(o.get("offsets"), dict)):
            raise HistoryError("txn offsets must be {group, offsets: {'topic/partition': offset}}")
        for k, n in o["offsets"].items():
            if "/" not in k or not _is_int(n):
                raise HistoryError("txn offsets map 'topic/partition' to int")


def check_metadata(f: str, typ: str, value: Any) -> None:
    """A metadata operation's value (see the ``create_topic`` ... ``metadata`` entries above)."""
    _need(isinstance(value, dict), f"{f} value must be an object")
    if f == "metadata":
        _need(isinstance(value.get("topics"), (list, dict)), "metadata needs topics")
        if typ == "ok":
            _need(_is_int(value.get("node")) and isinstance(value["topics"], dict),
                  "metadata ok needs node and topics {name: count or null}")
            for n in value["topics"].values():
                _need(n is None or (_is_int(n) and n >= 0), "metadata topics map a name to a count or null")
        return
    _need(isinstance(value.get("topic"), str), f"{f} needs a string topic")
    if f == "create_topic":
        _need(_is_int(value.get("partitions")), "create_topic needs partitions")
    elif f == "create_partitions":
        _need(_is_int(value.get("count")), "create_partitions needs count")
    elif f == "elect_leaders":
        _need(_is_int(value.get("partition")), "elect_leaders needs partition")
    if typ in ("fail", "info") and "code" in value:
        _need(_is_int(value["code"]), f"{f} code must be an integer")


def check_positions(positions: Any) -> None:
    """A poll's ``positions``: ``{"topic/partition": fetch offset}`` (non-negative integers)."""
    if not isinstance(positions, dict):
        raise HistoryError("poll positions must map 'topic/partition' to an offset")
    for k, o in positions.items():
        if "/" not in k or o.__class__ is not int or o < 0:
            raise HistoryError("poll positions map 'topic/partition' to a non-negative integer offset")


_TYPES = frozenset(TYPES)


def validate_op(op: Any) -> dict:
    """Validate one operation dict; returns it. Raises :class:`HistoryError` with the reason."""
    if not isinstance(op, dict):
        raise HistoryError("operation must be a JSON object")
    if not isinstance(op.get("run_id"), str):
        raise HistoryError("missing or non-string run_id")
    if op.get("index").__class__ is not int:
        raise HistoryError("missing or non-integer index")
    if op.get("time_ns").__class__ is not int:
        raise HistoryError("missing or non-integer time_ns")
    if op.get("process").__class__ is not int:
        raise HistoryError("missing or non-integer process")
    typ = op.get("type")
    if not isinstance(typ, str) or typ not in _TYPES:  # (an unhashable type, e.g. a list, is no TypeError)
        raise HistoryError(f"type must be one of {'|'.join(TYPES)}, got {typ!r}")
    f = op.get("f")
    if not (isinstance(f, str) and f):
        raise HistoryError("missing f")
    validate_value(f, typ, op.get("value"))
    return op


def validate_header(h: Any) -> dict:
    """Validate a header line ``{"run_id", "header": {...}}``; returns the header dict."""
    _need(isinstance(h, dict) and isinstance(h.get("run_id"), str), "header needs a run_id")
    body = h.get("header")
    _need(isinstance(body, dict), "header must be an object")
    _need(isinstance(body.get("target", ""), str), "header target must be a string")
    _need(isinstance(body.get("settings", {}), dict), "header settings must be an object")
    return body


try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _orjson = None


def dumps(obj: Any) -> str:
    """Compact JSON (keys in insertion order) used for every line and for Parquet's ``value`` column."""
    if _orjson is not None:
        try:
            return _orjson.dumps(obj).decode()
        except TypeError:  # e.g. integers beyond 64 bits: the standard library copes
            pass
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)
