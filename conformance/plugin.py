"""pytest plugin for conformance checks: the ``rule`` marker, per-check evidence, a session history, results JSON.

Load it with ``-p conformance.plugin`` (or the ``kct_conformance`` pytest11 entry point). It stays passive unless
the session collects a check marked ``@pytest.mark.rule(...)``; then it

- checks the rule ids against the catalogue (``conformance.rules``): an unknown id, or a check under
  ``conformance/`` without a rule, is a harness *error* for that check, never a silent pass;
- gives each check an ``evidence`` fixture (:class:`conformance.evidence.Evidence`), a session ``history``
  (:class:`conformance.recording.SessionHistory`, one run id per session and target) and a connected
  ``wire`` (:class:`conformance.wire.Wire`) that records into both;
- classifies every check: ``pass``; ``divergence`` (an ``AssertionError``, including ``TargetDiverged`` — the
  target disagrees with the rule); ``skipped`` (with the reason, e.g. a missing capability); ``error`` (any other
  exception: the harness or the environment failed, which says nothing about the target);
- writes ``<results dir>/<run id>.json`` (``--kct-results DIR``, default ``conformance-results``; or an exact
  ``--kct-results-file PATH``) and the history next to it (``histories/<run id>.jsonl``);
- with ``--alluredir`` (allure-pytest), labels each result with its rules and target and attaches the evidence.
"""
from __future__ import annotations

import json
import os
import time
import traceback
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from . import rules as catalogue
from .evidence import Evidence, jsonable
from .recording import SessionHistory, new_run_id

# The property machines' hypothesis profiles (kct-ci, thorough) must exist before --hypothesis-profile is read.
pytest_plugins = ["conformance.properties.plugin"]

# Third-party deprecation noise, filtered where it arises (module regex) so our own warnings still show. kafka-python
# 3.0's schema loader calls importlib.resources.read_text (deprecated, legacy API) once per request class; that
# legacy read_text calls open_text, which warns again from inside importlib.resources._legacy.
THIRD_PARTY_WARNINGS = [
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
]
for _spec in THIRD_PARTY_WARNINGS:   # outside pytest too (replay scripts, `python -m conformance`)
    _action, _message, _category, _module = _spec.split(":")
    warnings.filterwarnings(_action, message=_message, category=DeprecationWarning, module=_module)  # type: ignore[arg-type]

RESULTS_SCHEMA = "kct-conformance-results/1"
MARKER = "rule"
_EVIDENCE = pytest.StashKey[Evidence]()
_RESULT = pytest.StashKey[dict[str, Any]]()
_PROBLEM = pytest.StashKey[str]()
_STATE = pytest.StashKey["_Collector"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kct-conformance", "conformance results (conformance.plugin)")
    g.addoption("--kct-results", default="conformance-results", metavar="DIR",
                help="directory for the results JSON (<run id>.json) and histories (default: conformance-results)")
    g.addoption("--kct-results-file", default=None, metavar="PATH",
                help="exact path of the results JSON (its history goes to PATH with .history.jsonl)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*ids): the catalogue rule ids (conformance.rules) a check checks")
    # pytest resets warning filters around every test ("always" for DeprecationWarning, then ini filters), so the
    # import-time filters above do not reach tests; ini lines do (a user's -W option still wins).
    for spec in THIRD_PARTY_WARNINGS:
        config.addinivalue_line("filterwarnings", spec)
    # The checks are `async def`; run them without per-check markers also where no project ini sets the mode
    # (e.g. `pytest --pyargs conformance.suites` from an installed package). An explicit choice always wins.
    with warnings.catch_warnings():      # inicfg is the only way to tell "unset" from "set to strict"
        warnings.simplefilter("ignore", DeprecationWarning)
        ini_has_mode = "asyncio_mode" in config.inicfg
    if getattr(config.option, "asyncio_mode", None) is None and not ini_has_mode:
        config.option.asyncio_mode = "auto"
    if not config.stash.get(_STATE, None):
        config.stash[_STATE] = _Collector(config)
        config.pluginmanager.register(config.stash[_STATE], "kct-conformance-collector")


def rule_ids(item: pytest.Item) -> list[str]:
    """The rule ids named by an item's ``rule`` markers, in order, without repeats."""
    out: list[str] = []
    for mark in item.iter_markers(MARKER):
        out += [a for a in mark.args if a not in out]
    return out


def _in_conformance(item: pytest.Item) -> bool:
    """Checks in the ``conformance`` package must name a rule (project tests elsewhere are left alone)."""
    mod = getattr(item, "module", None)
    return bool(mod) and getattr(mod, "__name__", "").startswith("conformance.")


class _Collector:
    """Gathers one result per check and writes the results file at session end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.active = False
        self.results: list[dict[str, Any]] = []
        self.history: SessionHistory | None = None
        self.target_desc: dict[str, Any] | None = None
        self.started = time.time()
        self.run_id: str | None = None
        self.results_path: str | None = None

    # -- collection ------------------------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        for item in items:
            ids = rule_ids(item)
            if not ids and not _in_conformance(item):
                continue
            self.active = True
            unknown = [i for i in ids if i not in catalogue.RULES]
            if not ids:
                item.stash[_PROBLEM] = "check names no rule: add @pytest.mark.rule('RULE-ID')"
            elif unknown:
                item.stash[_PROBLEM] = f"unknown rule id(s) {unknown}; declare them with conformance.rules.rule()"
            if config.pluginmanager.hasplugin("allure_pytest"):
                for i in ids:
                    item.add_marker(pytest.mark.allure_label(i, label_type="rule"))
                    item.add_marker(pytest.mark.allure_label(i, label_type="tag"))
            fixturenames = getattr(item, "fixturenames", None)
            if isinstance(fixturenames, list) and "_kct_check" not in fixturenames:
                fixturenames.append("_kct_check")  # records the check's start in the session history

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        problem = item.stash.get(_PROBLEM, None)
        if problem:
            raise _HarnessError(problem)

    # -- outcomes --------------------------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if not self.active or not (rule_ids(item) or _in_conformance(item)):
            return
        res = item.stash.get(_RESULT, None)
        if res is None:
            res = item.stash[_RESULT] = {
                "nodeid": item.nodeid, "name": item.name, "suite": _suite_of(item), "rules": rule_ids(item),
                "params": _params(item), "outcome": "pass", "message": None, "longrepr": None, "duration_s": 0.0,
                "phase": None}
        res["duration_s"] = round(res["duration_s"] + report.duration, 4)
        kind, message = _classify(report, call)
        if kind != "pass" and res["outcome"] == "pass":
            res.update(outcome=kind, message=message, phase=report.when,
                       longrepr=None if kind == "skipped" else _clip(report.longreprtext, 6000))
        if report.when == "call":
            self._allure(item)
        if report.when == "teardown":
            ev = item.stash.get(_EVIDENCE, None)
            res["evidence"] = ev.to_json() if ev is not None else {}
            self.results.append(res)

    def _allure(self, item: pytest.Item) -> None:
        if not self.config.getoption("allure_report_dir", default=None):
            return
        try:
            import allure
        except ImportError:
            return
        desc = self.target_desc or {}
        allure.dynamic.parameter("target", desc.get("name", "?"))
        allure.dynamic.description("\n\n".join(
            f"**{r}** — {d['statement']} (source: {d['source']})" for r, d in
            ((r, _rule_json(r)) for r in rule_ids(item))))
        ev = item.stash.get(_EVIDENCE, None)
        body = {"rules": {r: _rule_json(r) for r in rule_ids(item)},
                "target": {k: desc.get(k) for k in ("name", "version", "bootstrap", "capabilities")},
                "evidence": ev.to_json() if ev is not None else {}}
        allure.attach(json.dumps(body, indent=1, default=str), name="evidence",
                      attachment_type=allure.attachment_type.JSON)

    # -- output ----------------------------------------------------------------------------------------------
    def paths(self) -> tuple[str, str]:
        """(results file, history file) for this run."""
        assert self.run_id is not None
        exact = self.config.getoption("kct_results_file")
        if exact:
            base = str(exact)
            return base, os.path.splitext(base)[0] + ".history.jsonl"
        d = Path(self.config.getoption("kct_results"))
        if not d.is_absolute():
            d = Path(self.config.invocation_params.dir) / d
        return str(d / f"{self.run_id}.json"), str(d / "histories" / f"{self.run_id}.jsonl")

    def open_history(self, target: Any) -> SessionHistory:
        if self.history is None:
            self.target_desc = jsonable(target.describe())
            self.run_id = new_run_id(target.name)
            self.results_path, hist_path = self.paths()
            self.history = SessionHistory(self.run_id, target.name, hist_path,
                                          settings={"faults": (self.target_desc.get("config") or {}).get("faults")})
        return self.history

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.active:
            return
        if self.history is not None:
            self.history.close()
        if self.target_desc is None:  # no check got as far as the target: describe the planned one
            try:
                from fixtures.plugin import build_target

                t = build_target(self.config)
                self.target_desc = jsonable(t.describe())
                self.run_id = new_run_id(t.name)
            except Exception as exc:  # noqa: BLE001 - a results file without a target beats none at all
                self.target_desc = {"name": "unknown", "error": repr(exc)}
                self.run_id = new_run_id("unknown")
            self.results_path, _ = self.paths()
        counts = {k: sum(1 for r in self.results if r["outcome"] == k) for k in ("pass", "divergence", "skipped",
                                                                                 "error")}
        used = sorted({r for res in self.results for r in res["rules"]} | set(catalogue.RULES))
        doc = {
            "schema": RESULTS_SCHEMA,
            "run_id": self.run_id,
            "started_at": _iso(self.started),
            "finished_at": _iso(time.time()),
            "duration_s": round(time.time() - self.started, 3),
            "target": self.target_desc,
            "history": self.history.path if self.history is not None else None,
            "summary": counts,
            "rules": {r: _rule_json(r) for r in used},
            "checks": self.results,
        }
        assert self.results_path is not None
        os.makedirs(os.path.dirname(os.path.abspath(self.results_path)), exist_ok=True)
        tmp = self.results_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, default=str)
        os.replace(tmp, self.results_path)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.active or not self.results_path:
            return
        c = {k: sum(1 for r in self.results if r["outcome"] == k) for k in ("pass", "divergence", "skipped",
                                                                           "error")}
        terminalreporter.write_sep("-", "conformance results")
        terminalreporter.write_line(", ".join(f"{k}: {v}" for k, v in c.items()))
        terminalreporter.write_line(f"results: {self.results_path}")
        if self.history is not None:
            terminalreporter.write_line(f"history: {self.history.path}")


class _HarnessError(Exception):
    """The check itself is malformed (no rule, unknown rule): an error, not a divergence."""


def _classify(report: pytest.TestReport, call: pytest.CallInfo[None]) -> tuple[str, str | None]:
    if report.passed:
        return "pass", None
    if report.skipped:
        lr = report.longrepr
        reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
        return "skipped", reason.removeprefix("Skipped: ")
    exc = call.excinfo
    if exc is not None and isinstance(exc.value, AssertionError):
        if type(exc.value) is not AssertionError:  # TargetDiverged & co: their text is the whole story
            return "divergence", _clip(f"{type(exc.value).__name__}: {exc.value}", 2000)
        return "divergence", _clip(exc.exconly().removeprefix("AssertionError: "), 2000)
    if exc is not None:
        return "error", _clip(exc.exconly(), 2000)
    return "error", _clip(report.longreprtext, 2000)


def _clip(text: str | None, n: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= n else text[: n // 2] + f"\n... ({len(text) - n} chars cut) ...\n" + text[-n // 2:]


def _suite_of(item: pytest.Item) -> str:
    mod = getattr(item, "module", None)
    name = getattr(mod, "__name__", "") if mod else ""
    return name.rsplit(".", 1)[-1].removeprefix("test_") or "?"


def _params(item: pytest.Item) -> dict[str, Any] | None:
    cs = getattr(item, "callspec", None)
    return jsonable(dict(cs.params)) if cs is not None else None


def _rule_json(rule_id: str) -> dict[str, Any]:
    r = catalogue.RULES.get(rule_id)
    if r is None:
        return {"id": rule_id, "statement": "(not in the catalogue)", "source": "", "suite": "?"}
    from .coverage import switches_by_rule

    # "switches": the reference broker's fault switches shown to break this rule (the report's rule coverage)
    return {"id": r.id, "statement": r.statement, "source": r.source, "suite": r.suite,
            "switches": switches_by_rule([r.id])[r.id]}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


# -- fixtures -----------------------------------------------------------------------------------------------------
@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Evidence:
    """This check's evidence: ``evidence.note(k, v)``, ``evidence.timing(label, ms, expect_min_ms=..)``."""
    ev = request.node.stash.get(_EVIDENCE, None)
    if ev is None:
        ev = request.node.stash[_EVIDENCE] = Evidence()
    return ev


@pytest.fixture(scope="session")
def history(request: pytest.FixtureRequest, target: Any) -> Iterator[SessionHistory]:
    """The session's history (one run id per session and target); ``history.process()`` for a new client."""
    state = request.config.stash[_STATE]
    h = state.open_history(target)
    yield h
    h.close()


@pytest.fixture
def _kct_check(request: pytest.FixtureRequest, evidence: Evidence) -> None:
    """Added to every rule-marked check: marks its start in the session history (when one is open)."""
    state = request.config.stash[_STATE]
    if state.history is not None:
        state.history.check_started(request.node.nodeid, rule_ids(request.node))


@pytest_asyncio.fixture
async def wire(bootstrap: str, evidence: Evidence, history: SessionHistory) -> AsyncIterator[Any]:
    """A :class:`conformance.wire.Wire` to the session target, recording into ``evidence`` and ``history``."""
    from .wire import Wire

    w = await Wire.connect(bootstrap, evidence=evidence, history=history)
    w.pin_leader = True        # a multi-broker session target: the checks' topics are led by this Wire's broker
    try:
        yield w
    finally:
        await w.close()


@pytest.fixture
def wire_factory(bootstrap: str, evidence: Evidence, history: SessionHistory) -> Any:
    """``async with await wire_factory() as w``: a second client (e.g. a producer beside a parked fetch);
    ``wire_factory(target=fresh_target)`` for another target. The caller closes it."""
    from .wire import Wire

    async def make(target: Any = None) -> Wire:
        w = await Wire.connect(target.bootstrap if target is not None else bootstrap, evidence=evidence,
                               history=history)
        w.pin_leader = target is None    # the session target's wires, as the `wire` fixture's
        return w

    return make


def format_exception(exc: BaseException) -> str:
    """One-line-per-frame text of an exception, for evidence notes."""
    return "".join(traceback.format_exception(exc))[-3000:]
