"""One history per pytest session and target: every send, fetch, poll, commit and offset lookup a check makes.

Why: the conformance suites are also workloads, and their operations go through the same checkers as chaos runs
(``python -m reports check HISTORY``). One run id per session and target; each client a check opens is its own
*process* (Jepsen's meaning), so the one-operation-in-flight rule of the history contract holds per client.

Encoding (history/schema.py is the contract; additions here are plain extra ``f`` values):
- ``send`` — records we produce carry a unique integer value; the payload bytes are that integer in ASCII,
  padded with ``.`` to the size a check asks for, so a fetched record maps back to its write.
- ``poll`` — only for real consumer polls that continue from the previous position (kafka-python,
  confluent-kafka, the reference Consumer). ``positions`` (the contract's per-partition fetch offsets, which make
  empty reads evidence) are recorded only where the client can vouch for them: the reference Consumer's
  ``history_positions()`` after each poll. kafka-python and librdkafka fetch in the background, so an empty poll
  of theirs does not show that any answer came back during it: their polls list, with ``reset=none`` only (no
  reset can move a position inside ``poll``), the position read before the poll for each partition it returned
  records of. That catches a read that skipped a record, not a stale empty read.
- ``fetch`` — a raw Fetch request at explicit offsets (checks re-read and jump on purpose, so these are not
  polls): invoke ``{partitions: {"t/0": offset}, max_wait_ms, min_bytes}``, ok ``{records: [...], errors: {...}}``.
- ``list_offsets`` invoke ``{topic, partition, timestamp}``, ok adds ``offset``; ``delete_records`` invoke
  ``{topic, partition, offset}``, ok adds ``low_watermark``; ``commit`` / ``fetch_offsets`` as in the contract.
- header settings: ``partial_reads: true`` — checks read selectively on purpose (DeleteRecords, resets to
  latest, raw fetches recorded as ``fetch``), so Jepsen's ``lost-write``/``unseen`` (which assume every value is
  eventually polled) do not apply to these histories; ``duplicate``, ``inconsistent-offsets``,
  ``nonmonotonic-send`` and the poll-order anomalies do.
- ``check`` — a bookkeeping event (process -1) at the start of each check with its node id and rules, so a
  history line can be traced to the check that made it.
"""
from __future__ import annotations

import itertools
import os
import secrets
import threading
import time
from typing import Any

from history.recorder import Recorder
from history.schema import NEMESIS_PROCESS

PAD = b"."


def new_run_id(target_name: str) -> str:
    """``<target>-<UTC time>-<random>``: sortable, unique, says which target."""
    return f"{target_name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


def encode_value(n: int, size: int = 0) -> bytes:
    """Payload for unique value ``n``, padded to ``size`` bytes (never shorter than the number itself)."""
    return str(n).encode().ljust(size, PAD)


def decode_value(payload: bytes | None) -> int | str | None:
    """Inverse of :func:`encode_value`; payloads written by others come back as text (truncated)."""
    if payload is None:
        return None
    head = bytes(payload).rstrip(PAD)
    if head.isdigit():
        return int(head)
    return bytes(payload[:64]).decode("utf-8", "replace")


class SessionHistory:
    """The session's recorder plus process ids for each client; thread-safe (real clients run in threads)."""

    def __init__(self, run_id: str, target: str, path: str | None, settings: dict[str, Any] | None = None) -> None:
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.run_id = run_id
        self.path = path
        self.recorder = Recorder(run_id, target=target, sink=path,
                                 settings={"source": "conformance", "sub_via": ["assign"], "partial_reads": True,
                                           **(settings or {})})
        self._processes = itertools.count(0)
        self._lock = threading.Lock()

    def process(self) -> int:
        """A fresh process id for a new client."""
        with self._lock:
            return next(self._processes)

    def unique_value(self) -> int:
        return self.recorder.unique_value()

    def check_started(self, nodeid: str, rules: list[str]) -> None:
        self.recorder.event("check", {"nodeid": nodeid, "rules": rules}, process=NEMESIS_PROCESS)

    def close(self) -> None:
        self.recorder.close()


class Op:
    """Records one operation: ``with history.op(process, "send", value) as op: ...; op.ok(result)``.

    Leaving the block without ``ok``/``fail`` records ``info`` (outcome unknown), which is the honest answer when
    the broker closed the connection or a timeout fired mid-request.
    """

    def __init__(self, history: SessionHistory | None, process: int, f: str, value: Any) -> None:
        self._h = history
        self._p = process
        self._f = f
        self._value = value
        self._done = history is None

    def __enter__(self) -> Op:
        if self._h is not None:
            self._h.recorder.invoke(self._p, self._f, self._value)
        return self

    def ok(self, value: Any) -> None:
        if not self._done:
            self._done = True
            self._h.recorder.ok(self._p, self._f, value)  # type: ignore[union-attr]

    def fail(self, value: Any) -> None:
        if not self._done:
            self._done = True
            self._h.recorder.fail(self._p, self._f, value)  # type: ignore[union-attr]

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._done:
            self._done = True
            v = dict(self._value) if isinstance(self._value, dict) else {}
            if exc is not None:
                v["error"] = repr(exc)[:200]
            self._h.recorder.info(self._p, self._f, v)  # type: ignore[union-attr]


def record_id(key: bytes | None, value: bytes | None) -> int | str | None:
    """The history value of a record whose value or key starts with a unique number (``<n>|<anything>``):
    records with a null or empty value, or binary payloads, carry their number in the key or the value's head,
    so every record still maps back to its write. Falls back to :func:`decode_value` of the value."""
    for part in (value, key):
        if part:
            head = bytes(part).split(b"|", 1)[0].rstrip(PAD)
            if head.isdigit():
                return int(head)
    return decode_value(value)
