"""The readers' fast path against their exact path (history.io): the same runs, errors and warnings.

The fast path takes blocks of lines (or a whole Parquet table) and gives a block back to the exact path when it
does not certainly accept it. These tests read well-formed and broken histories both ways (the module switch
``_FAST`` turns the fast path off) and require identical outcomes: the runs (compared as JSON text, so that
1, 1.0 and true stay apart), or the error's message and line, and every ``CorruptLineWarning``. Small block
sizes make hand-overs between the paths happen in the middle of runs.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
import warnings

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import history.io as hio
from history import CorruptLineWarning, History, HistoryError
from history.io import from_arrow, iter_lines_validated, read_bytes, read_jsonl, to_arrow
from history.schema import dumps
from reports import synth


@contextlib.contextmanager
def _exact_only():
    hio._FAST = False
    try:
        yield
    finally:
        hio._FAST = True


@contextlib.contextmanager
def _blocks(lines: int, nbytes: int):
    old = hio._BLOCK_LINES, hio._BLOCK_BYTES
    hio._BLOCK_LINES, hio._BLOCK_BYTES = lines, nbytes
    try:
        yield
    finally:
        hio._BLOCK_LINES, hio._BLOCK_BYTES = old


def _outcome(read) -> tuple:  # noqa: ANN001
    """What a reader gives: its runs or its error, and its warnings (all as comparable values)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            runs = read()
            got: tuple = ("runs", dumps([[h.run_id, h.target, h.nemesis, h.settings, h.ops] for h in runs]))
        except HistoryError as e:
            got = ("error", str(e), e.line, e.reason)
        except Exception as e:  # noqa: BLE001 - whatever the exact path does, the fast path must do too
            got = ("crash", type(e).__name__, str(e))
    return got, [str(w.message) for w in caught if issubclass(w.category, CorruptLineWarning)]


def _same_both_ways(read) -> tuple:  # noqa: ANN001
    fast = _outcome(read)
    with _exact_only():
        exact = _outcome(read)
    assert fast == exact
    return fast


class _ExactLines:
    """Counts the lines the exact path reads (to show the fast path really reads well-formed input)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = hio._LineReader.exact

        def exact(reader, numbered):  # noqa: ANN001, ANN202
            numbered = list(numbered)
            self.count += len(numbered)
            return original(reader, numbered)

        monkeypatch.setattr(hio._LineReader, "exact", exact)


def _history(seed: int = 1, n_ops: int = 60, run_id: str = "r") -> History:
    """A small well-formed run with every shape the fast path checks: batch sends, polls, commits, offset
    fetches, assign and subscribe, nemesis events (process -1), a crash, unknown functions, odd scalars."""
    h = synth.with_anomaly(synth.generate(run_id, seed=seed, n_ops=n_ops, processes=3, partitions=2,
                                          nemesis="pause"), "int-send-skip")
    t = h.ops[-1]["time_ns"]

    def add(process: int, typ: str, f: str, value: object) -> None:
        nonlocal t
        t += 10
        h.ops.append({"run_id": run_id, "index": len(h.ops), "time_ns": t, "process": process, "type": typ,
                      "f": f, "value": value})

    add(-1, "info", "nemesis", {"fault": "pause", "nodes": [1, 2]})
    add(-1, "invoke", "nemesis", None)
    add(-1, "invoke", "check", {"nodeid": "x", "rules": []})
    add(7, "invoke", "subscribe", {"topics": ["t"]})
    add(7, "ok", "subscribe", {"topics": ["t"]})
    add(7, "invoke", "fetch_offsets", {"group": "g", "partitions": ["t/0"]})
    add(7, "ok", "fetch_offsets", {"group": "g", "offsets": {"t/0": None, "t/1": 3}})
    add(7, "invoke", "send", {"topic": "t", "partition": 0, "key": None, "value": 1.5})
    add(7, "ok", "send", {"topic": "t", "partition": 0, "key": None, "value": 1.5, "offset": 9})
    add(7, "invoke", "send", {"records": [{"topic": "t", "partition": 1, "key": "k", "value": True},
                                          {"topic": "t", "partition": 1, "key": "k", "value": None}]})
    add(7, "info", "send", {"records": [{"topic": "t", "partition": 1, "key": "k", "value": True},
                                        {"topic": "t", "partition": 1, "key": "k", "value": None}]})
    add(7, "invoke", "poll", {"max_records": 5})
    add(7, "ok", "poll", {"records": [{"topic": "t", "partition": 1, "offset": 4, "key": "k", "value": "s"},
                                      {"topic": "t", "partition": 1, "offset": 5, "key": "k", "value": -2}]})
    add(7, "invoke", "poll", {})
    add(7, "fail", "poll", {"error": "timeout"})
    add(7, "invoke", "list_offsets", {"topic": "t", "partition": 0, "timestamp": -1})
    add(7, "ok", "list_offsets", {"topic": "t", "partition": 0, "timestamp": -1, "offset": 3, "error_code": 0})
    add(7, "invoke", "crash", None)
    add(7, "info", "crash", None)
    add(8, "invoke", "commit", {"group": "g", "offsets": {"t/0": 1}})
    return h


def _lines(*hs: History) -> list[str]:
    out = []
    for h in hs:
        out.append(dumps(h.header_line()))
        out += [dumps(op) for op in h.ops]
    return out


# ---------------------------------------------------------------- well-formed input

def test_well_formed_histories_are_read_by_the_fast_path_alone(monkeypatch, tmp_path):
    a, b = _history(1), _history(2, run_id="other")
    text = "\n".join(_lines(a, b)) + "\n"
    exact = _ExactLines(monkeypatch)
    (tmp_path / "h.jsonl").write_text(text)
    with gzip.open(tmp_path / "h.jsonl.gz", "wt") as fh:
        fh.write(text)
    for read in (lambda: read_bytes(text.encode(), "h.jsonl"),
                 lambda: hio.read(str(tmp_path / "h.jsonl")),
                 lambda: hio.read(str(tmp_path / "h.jsonl.gz")),
                 lambda: iter_lines_validated(text.splitlines())):
        runs = read()
        assert [(h.run_id, h.ops, h.target, h.nemesis, h.settings) for h in runs] == [
            (h.run_id, h.ops, h.target, h.nemesis, h.settings) for h in (a, b)]
    assert exact.count == 0
    _same_both_ways(lambda: read_bytes(text.encode(), "h.jsonl"))


def test_parquet_fast_path_gives_the_exact_runs(monkeypatch):
    a, b = _history(3), _history(4, run_id="other")
    table = to_arrow([a, b])
    calls = []
    monkeypatch.setattr(hio, "_from_arrow_exact", lambda *a, **k: calls.append(1))
    runs = from_arrow(table)
    assert not calls
    assert [(h.run_id, h.ops, h.target, h.nemesis, h.settings) for h in runs] == [
        (h.run_id, h.ops, h.target, h.nemesis, h.settings) for h in (a, b)]


def test_blank_lines_crlf_and_interleaved_runs():
    a, b = _history(5, n_ops=20), _history(6, n_ops=20, run_id="other")
    la, lb = _lines(a), _lines(b)
    mixed = [la[0], lb[0], "", "   "] + [x for pair in zip(la[1:], lb[1:], strict=False) for x in pair] + [""]
    for sep in ("\n", "\r\n"):
        data = sep.join(mixed).encode()
        out = _same_both_ways(lambda d=data: read_bytes(d, "h.jsonl"))
        assert out[0][0] == "runs"


def test_a_second_header_and_ops_before_the_header():
    h = _history(7, n_ops=20)
    lines = _lines(h)
    lines = lines[1:6] + [lines[0]] + lines[6:12] + [dumps({"run_id": "r", "header": {"target": "x"}})] + lines[12:]
    out = _same_both_ways(lambda: read_bytes("\n".join(lines).encode(), "h.jsonl"))
    assert out[0][0] == "runs"


# ---------------------------------------------------------------- malformed input, one case at a time

def _op_line(lines: list[str], f: str, typ: str) -> int:
    """The first operation line with this f and type (a single-record send, a poll that read something)."""
    for i, x in enumerate(lines):
        o = json.loads(x)
        if o.get("f") == f and o.get("type") == typ:
            v = o.get("value")
            if (f == "send" and "records" in v) or (f == "poll" and typ == "ok" and not v["records"]):
                continue
            return i
    raise AssertionError(f"no {typ} {f}")


def _poll_ok(o: dict) -> dict:
    return o["value"]["records"][0]


def _batch(o: dict) -> dict:
    return o["value"]["records"][0]


# (which line: f, type), mutation of the parsed line, what the exact path says
MALFORMED = [
    (("send", "invoke"), lambda o: o.update(index=float(o["index"])), "missing or non-integer index"),
    (("send", "invoke"), lambda o: o.update(index=True), "missing or non-integer index"),
    (("send", "invoke"), lambda o: o.update(time_ns=None), "missing or non-integer time_ns"),
    (("send", "invoke"), lambda o: o.update(process="1"), "missing or non-integer process"),
    (("send", "invoke"), lambda o: o.update(process=False), "missing or non-integer process"),
    (("send", "invoke"), lambda o: o.update(run_id=7), "missing or non-string run_id"),
    (("send", "invoke"), lambda o: o.update(type="Invoke"), "type must be one of"),
    (("send", "invoke"), lambda o: o.update(type=["invoke"]), "type must be one of"),
    (("send", "invoke"), lambda o: o.update(f=""), "missing f"),
    (("crash", "invoke"), lambda o: o.update(f=["crash"]), "missing f"),
    (("send", "invoke"), lambda o: o.pop("value"), "send value must be an object"),
    (("send", "invoke"), lambda o: o.update(value=[1]), "send value must be an object"),
    (("send", "invoke"), lambda o: o["value"].update(partition=True), "integer partition"),
    (("send", "invoke"), lambda o: o["value"].update(partition=1.0), "integer partition"),
    (("send", "invoke"), lambda o: o["value"].update(topic=None), "string topic"),
    (("send", "invoke"), lambda o: o["value"].pop("value"), "record needs a value"),
    (("send", "invoke"), lambda o: o["value"].update(value=[1]), "record value must be a scalar"),
    (("send", "invoke"), lambda o: o["value"].update(value={"a": 1}), "record value must be a scalar"),
    (("send", "ok"), lambda o: o["value"].update(offset=True), "offset must be an integer"),
    (("send", "ok"), lambda o: o["value"].update(offset=2.0), "offset must be an integer"),
    (("send", "ok"), lambda o: o["value"].update(offset="2"), "offset must be an integer"),
    (("send", "ok"), lambda o: o.update(value={"records": []}), "send records must be a non-empty list"),
    (("send", "ok"), lambda o: o.update(value={"records": {"a": 1}}), "send records must be a non-empty list"),
    (("send", "ok"), lambda o: o["value"].update(records=[1]) if "records" in o["value"] else o.update(
        value={"records": [1]}), "record must be an object"),
    (("poll", "ok"), lambda o: _poll_ok(o).update(offset=None), "polled record needs an integer offset"),
    (("poll", "ok"), lambda o: _poll_ok(o).pop("offset"), "polled record needs an integer offset"),
    (("poll", "ok"), lambda o: _poll_ok(o).update(offset=False), "polled record needs an integer offset"),
    (("poll", "ok"), lambda o: _poll_ok(o).update(partition=None), "integer partition"),
    (("poll", "ok"), lambda o: _poll_ok(o).update(topic=["t"]), "string topic"),
    (("poll", "ok"), lambda o: _poll_ok(o).update(value=[]), "record value must be a scalar"),
    (("poll", "ok"), lambda o: _poll_ok(o).pop("value"), "record needs a value"),
    (("poll", "ok"), lambda o: o["value"]["records"].append("x"), "record must be an object"),
    (("poll", "ok"), lambda o: o["value"]["records"].append([]), "record must be an object"),
    (("poll", "ok"), lambda o: o.update(value={"records": {}}), "poll ok needs records"),
    (("poll", "ok"), lambda o: o.update(value=[]), "poll ok needs records"),
    (("commit", "invoke"), lambda o: o["value"].update(group=1), "commit needs a group"),
    (("commit", "invoke"), lambda o: o["value"].update(offsets=[]), "commit needs offsets"),
    (("commit", "invoke"), lambda o: o["value"]["offsets"].update({"t0": 1}), "commit offsets map"),
    (("commit", "invoke"), lambda o: o["value"]["offsets"].update({"t/0": True}), "commit offsets map"),
    (("commit", "invoke"), lambda o: o["value"]["offsets"].update({"t/0": 1.0}), "commit offsets map"),
    (("fetch_offsets", "invoke"), lambda o: o["value"].pop("group"), "fetch_offsets needs a group"),
    (("fetch_offsets", "ok"), lambda o: o["value"].pop("offsets"), "fetch_offsets needs offsets"),
    (("fetch_offsets", "ok"), lambda o: o["value"]["offsets"].update({"t/0": "1"}), "fetch_offsets offsets map"),
    (("assign", "invoke"), lambda o: o["value"]["partitions"].append("t0"), "assign partitions"),
    (("assign", "invoke"), lambda o: o["value"]["partitions"].append(3), "assign partitions"),
    (("assign", "invoke"), lambda o: o.update(value={"partitions": "t/0"}), "assign needs partitions"),
    (("subscribe", "invoke"), lambda o: o.update(value={"topics": "t"}), "subscribe needs topics"),
    (("subscribe", "invoke"), lambda o: o.update(value=None), "subscribe needs topics"),
    # order and pairing
    (("send", "ok"), lambda o: o.update(index=o["index"] - 1), "does not increase"),
    (("send", "ok"), lambda o: o.update(time_ns=o["time_ns"] - 10**6), "goes backwards"),
    (("send", "ok"), lambda o: o.update(f="crash"), "completes an invoke of send"),
    (("send", "ok"), lambda o: o.update(process=55), "without an invoke"),
    (("poll", "invoke"), lambda o: o.update(type="ok", value={"records": []}), None),  # a completion out of turn
    (("send", "ok"), lambda o: o.update(type="invoke"), "in flight"),
    # not an operation at all
    (("send", "ok"), lambda o: o.update(header={"target": 1}), "header target must be a string"),
    (("send", "ok"), lambda o: o.update(header=[]), "header must be an object"),
]


@pytest.mark.parametrize("where, mutate, reason", MALFORMED)
@pytest.mark.parametrize("block", [1, 3, 512])
def test_malformed_operation_gets_the_exact_error(where, mutate, reason, block):
    lines = _lines(_history(11))
    i = _op_line(lines, *where)
    o = json.loads(lines[i])
    mutate(o)
    lines[i] = json.dumps(o)
    data = "\n".join(lines).encode()
    with _blocks(block, 1 << 20):
        out, _ = _same_both_ways(lambda: read_bytes(data, "h.jsonl"))
        assert out[0] == "error", out
        if reason is not None:
            assert reason in out[3]
        # and skipped with a warning when asked, the same way on both paths
        out, warned = _same_both_ways(lambda: read_bytes(data, "h.jsonl", skip_corrupt=True))
        assert out[0] == "runs" and warned


@pytest.mark.parametrize("raw", ["{", '{"run_id": "r"', "[]", "null", "1", '"x"', "\x00", "{}}", "\ufeff{}"])
def test_corrupt_line_gets_the_exact_error(raw):
    lines = _lines(_history(12))
    for i in (1, len(lines) // 2, len(lines) - 1):
        bad = lines[:i] + [raw] + lines[i:]
        out, _ = _same_both_ways(lambda b=bad: read_bytes("\n".join(b).encode(), "h.jsonl"))
        assert out[0] == "error" and out[2] == i + 1


def test_truncated_last_line_costs_only_its_block(monkeypatch):
    lines = _lines(_history(13, n_ops=400))
    lines[-1] = lines[-1][:-5]
    exact = _ExactLines(monkeypatch)
    data = "\n".join(lines).encode()
    with _blocks(64, 1 << 20):
        _outcome(lambda: read_bytes(data, "h.jsonl", skip_corrupt=True))
        assert 0 < exact.count <= 64  # the exact path read the last block only
        out, warned = _same_both_ways(lambda: read_bytes(data, "h.jsonl", skip_corrupt=True))
    assert out[0] == "runs" and len(warned) == 1 and f":{len(lines)}: skipped" in warned[0]


def test_corrupt_invoke_drops_its_completion_across_blocks():
    lines = _lines(_history(14, n_ops=200))
    i = next(n for n in range(1, len(lines)) if json.loads(lines[n])["type"] == "invoke"
             and json.loads(lines[n])["process"] != -1)
    lines[i] = lines[i][:-3]
    for block in (1, 2, 5, 512):
        with _blocks(block, 1 << 20):
            out, warned = _same_both_ways(lambda: read_bytes("\n".join(lines).encode(), "h.jsonl",
                                                             skip_corrupt=True))
        assert out[0] == "runs" and len(warned) == 2 and "without an invoke" in warned[1]


@pytest.mark.parametrize("sep", ["\r", "\x0b", "\x1c", "\x85", "\u2028"])
def test_unusual_line_breaks_split_lines_as_the_exact_path_does(tmp_path, sep):
    lines = _lines(_history(15, n_ops=30))
    i = _op_line(lines, "send", "invoke")
    lines[i] = lines[i].replace('"key":', f'"x":"a{sep}b","key":', 1)
    text = "\n".join(lines) + "\n"
    (tmp_path / "h.jsonl").write_text(text, newline="")
    _same_both_ways(lambda: read_bytes(text.encode(), "h.jsonl"))
    _same_both_ways(lambda: read_jsonl(str(tmp_path / "h.jsonl")))


def test_file_reader_hands_over_only_when_the_rest_of_the_file_decodes(tmp_path):
    lines = _lines(_history(16, n_ops=300))
    bad_line = len(lines) // 3
    lines[bad_line] = lines[bad_line][:-2]
    raw = ("\n".join(lines) + "\n").encode()
    cases = {
        "corrupt.jsonl": raw,
        "late-bad-utf8.jsonl": raw + b'{"run_id": "r", "x": "\xff"}\n',
        "early-bad-utf8.jsonl": raw[:200] + b"\xff" + raw[200:],
        "lone-cr.jsonl": raw + b"\r",
        "no-final-newline.jsonl": raw[:-1],
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress(content))
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(raw)[:-30])
    for block_lines, block_bytes in ((512, 1 << 22), (7, 300), (1, 64)):
        with _blocks(block_lines, block_bytes):
            for p in sorted(tmp_path.iterdir()):
                for skip in (False, True):
                    _same_both_ways(lambda p=p, s=skip: read_jsonl(str(p), skip_corrupt=s))


def test_parquet_malformed_rows_get_the_exact_error():
    import pyarrow as pa

    h = _history(17)
    base = to_arrow([h])
    n = base.num_rows
    vals = base.column("value").to_pylist()
    idx = base.column("index").to_pylist()
    cases = []
    for bad in ('{"topic": ', "[1]", '{"topic":"t","partition":true,"key":null,"value":1}', None):
        v = list(vals)
        v[5] = bad
        cases.append(base.set_column(base.schema.get_field_index("value"), "value", pa.array(v, pa.string())))
    i2 = list(idx)
    i2[7] = i2[6]
    cases.append(base.set_column(1, "index", pa.array(i2, pa.int64())))
    cases.append(base.set_column(1, "index", pa.array([float(x) for x in idx], pa.float64())))
    cases.append(base.set_column(1, "index", pa.array(idx[:3] + [None] + idx[4:], pa.int64())))
    s = base.column("settings").to_pylist()
    cases.append(base.set_column(base.schema.get_field_index("settings"), "settings",
                                 pa.array(["{"] * n, pa.string())))
    cases.append(base.drop_columns(["target", "nemesis", "settings"]))
    cases.append(base.set_column(base.schema.get_field_index("settings"), "settings",
                                 pa.array([None] + s[1:], pa.string())))
    for t in cases:
        for skip in (False, True):
            _same_both_ways(lambda t=t, s=skip: from_arrow(t, path="x.parquet", skip_corrupt=s))


# ---------------------------------------------------------------- malformed input, generated

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4) | st.sampled_from(["t/0", "invoke", "ok", "send", "poll", "r"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=4,
)
_keys = st.sampled_from(["run_id", "index", "time_ns", "process", "type", "f", "value", "header", "records",
                         "topic", "partition", "offset", "key", "group", "offsets", "partitions", "topics"])
_raw_lines = st.sampled_from(["", "   ", "\t", "\xa0", "{", "}", "[]", "null", "{}", '{"header": {}}',
                              '{"run_id": "r", "header": {"target": 5}}', '{"run_id": "r", "header": {}}',
                              '{"run_id": "other", "header": {"settings": {"a": 1}}}', "\ufeff{}"])
_affixes = st.sampled_from(["", " ", "\t", "\r", "\xa0", "\x0b", "\x1f", "\u3000", "\u2028", "\ufeff"])


def _containers(o: object) -> list:
    """Every dict and list inside a parsed line (the line itself included)."""
    out = [o]
    for c in (o.values() if isinstance(o, dict) else o if isinstance(o, list) else ()):
        out += _containers(c)
    return out


@st.composite
def _mutation(draw):  # noqa: ANN001, ANN202
    kind = draw(st.sampled_from(["set", "set", "set", "del", "truncate", "swap", "dup", "drop", "raw", "affix",
                                 "run"]))
    return (kind, draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6)), draw(_keys), draw(_json_values),
            draw(_raw_lines), draw(_affixes), draw(_affixes))


def _apply(lines: list[str], m: tuple) -> list[str]:
    kind, a, b, key, value, raw, pre, post = m
    lines = list(lines)
    i, j = a % len(lines), b % len(lines)
    if kind in ("set", "del", "run"):
        try:
            o = json.loads(lines[i])
        except ValueError:
            return lines
        if kind == "run":
            o["run_id"] = ["r", "other", "r2"][b % 3] if isinstance(o, dict) else o
        else:
            dicts = [c for c in _containers(o) if isinstance(c, dict)]
            if not dicts:
                return lines
            d = dicts[b % len(dicts)]
            if kind == "set":
                d[key] = copy.deepcopy(value)
            else:
                d.pop(key, None)
        lines[i] = dumps(o)
    elif kind == "truncate":
        lines[i] = lines[i][: b % (len(lines[i]) + 1)]
    elif kind == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "dup":
        lines.insert(j, lines[i])
    elif kind == "drop" and len(lines) > 1:
        del lines[i]
    elif kind == "raw":
        lines.insert(i, raw)
    elif kind == "affix":
        lines[i] = pre + lines[i] + post
    return lines


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation(), min_size=1, max_size=3), st.integers(1, 9), st.booleans(), st.integers(0, 3))
@example([("set", 4, 0, "partition", True, "", "", "")], 3, False, 0)
def test_generated_malformations_read_the_same_both_ways(mutations, block, skip, seed):
    lines = _lines(_history(seed, n_ops=25))
    for m in mutations:
        lines = _apply(lines, m)
    data = "\n".join(lines).encode()
    with _blocks(block, 1 << 20):
        _same_both_ways(lambda: read_bytes(data, "h.jsonl", skip_corrupt=skip))
        _same_both_ways(lambda: iter_lines_validated(data.decode().split("\n"), skip_corrupt=skip))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(_mutation(), min_size=1, max_size=2), st.integers(1, 5), st.integers(40, 400), st.booleans())
def test_generated_malformations_read_the_same_from_files(tmp_path, mutations, block, nbytes, skip):
    lines = _lines(_history(1, n_ops=25))
    for m in mutations:
        lines = _apply(lines, m)
    p = tmp_path / "h.jsonl"
    p.write_bytes(("\n".join(lines) + "\n").encode())
    with _blocks(block, nbytes):
        _same_both_ways(lambda: read_jsonl(str(p), skip_corrupt=skip))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation(), min_size=1, max_size=2), st.booleans())
def test_generated_malformations_read_the_same_from_parquet(mutations, skip):
    import pyarrow as pa

    h = _history(2, n_ops=25)
    base = to_arrow([h])
    # mutate the value column as JSON lines of values, and the other columns through whole-operation lines
    lines = [dumps(op) for op in h.ops]
    for m in mutations:
        lines = _apply(lines, m)
    rows = []
    for x in lines:
        try:
            o = json.loads(x)
        except ValueError:
            o = {"value_raw": x}
        rows.append(o if isinstance(o, dict) else {"value_raw": x})
    cols = {}
    for c in ("run_id", "index", "time_ns", "process", "type", "f"):
        vals = [r.get(c) for r in rows]
        typ = base.schema.field(c).type
        try:
            cols[c] = pa.array(vals, typ)
        except (pa.ArrowException, OverflowError):
            cols[c] = pa.array([json.dumps(v) for v in vals], pa.string())
    cols["value"] = pa.array([r["value_raw"] if "value_raw" in r else dumps(r.get("value")) for r in rows],
                             pa.string())
    n = len(rows)
    cols["target"] = pa.array([h.target] * n, pa.string())
    cols["nemesis"] = pa.array([h.nemesis] * n, pa.string())
    cols["settings"] = pa.array([dumps(h.settings)] * n, pa.string())
    table = pa.table(cols)
    _same_both_ways(lambda: from_arrow(table, path="x.parquet", skip_corrupt=skip))
