"""Linearizability checking, Porcupine-style: a model is a bundle of pure functions, the checker knows no domain.

The search is Wing & Gong's, with Lowe's cache of (linearized set, state) pairs, as Porcupine does it. A model
may partition a history ("linearizable iff each part is"; P-compositionality); parts are checked separately,
optionally in parallel processes, and the search stops at the first illegal part. A time budget bounds the
search: when it runs out the verdict is ``unknown`` instead of hanging.

For speed a model may also ``compile`` a part into a :class:`Kernel` (an initial state and a step by operation
index over data it precomputed once), which then replaces ``prepare`` + ``step`` in the search; it must define
the same transitions, so verdicts and counterexamples do not depend on which one the search uses.

For an illegal part the counterexample is the smallest failing *prefix window*: the fewest completions k such
that the operations completed by then (plus those still pending, with reads dropped and writes left open) are
already not linearizable; the window is the k-th completed operation, everything concurrent with it, and the three operations that completed
just before it began (the realtime order it contradicts).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

OK, ILLEGAL, UNKNOWN = "ok", "illegal", "unknown"
INF = float("inf")
_CALL, _RET = itemgetter(3), itemgetter(4)  # Operation.call, Operation.ret (in C)


class Operation(NamedTuple):
    """One operation as the search sees it: ``ret`` is ``INF`` when the outcome is unknown (info)."""

    client: int
    input: Any
    output: Any
    call: float
    ret: float
    ref: int = -1  # the completion's history index, for evidence


def _no_partition(ops: list[Operation]) -> list[tuple[Any, list[Operation]]]:
    return [(None, ops)]


def _never_read(_input: Any) -> bool:
    return False


def _identity(ops: list[Operation]) -> list[Operation]:
    return ops


def _describe(i: Any, o: Any) -> str:
    return f"{i!r} -> {o!r}"


NOT_LEGAL: Any = object()  # a Kernel step's answer for an operation that cannot be linearized in this state


class Kernel(NamedTuple):
    """A part compiled for the search: ``step(state, i)`` is the new state after operation ``i`` of the part, or
    ``NOT_LEGAL``. ``state_of_set``: the state is a function of the set of linearized operations (true of every
    state reachable from ``init``), so the search's cache may key on the set alone."""

    init: Any
    step: Callable[[Any, int], Any]
    state_of_set: bool = False


@dataclass(frozen=True)
class Model:
    """Pure functions: ``init() -> state``; ``step(state, input, output) -> (legal, state')`` (states hashable);
    ``partition(ops) -> [(part key, ops)]``; ``is_read(input)`` marks ops without effect (used to cut prefixes);
    ``prepare(ops) -> ops`` derives per-(sub)history data the step needs (run on each part and each prefix);
    ``compile(ops) -> Kernel`` (optional) does ``prepare``'s work and gives the search an index-based step with
    the same transitions as ``step`` (run on each part and each prefix, instead of ``prepare``)."""

    name: str
    init: Callable[[], Any]
    step: Callable[[Any, Any, Any], tuple[bool, Any]]
    partition: Callable[[list[Operation]], list[tuple[Any, list[Operation]]]] = _no_partition
    is_read: Callable[[Any], bool] = _never_read
    prepare: Callable[[list[Operation]], list[Operation]] = _identity
    describe_operation: Callable[[Any, Any], str] = _describe
    describe_state: Callable[[Any], str] = repr
    compile: Callable[[Sequence[Operation]], Kernel] | None = None


def _generic_kernel(model: Model, ops: Sequence[Operation]) -> Kernel:
    inputs = [op.input for op in ops]
    outputs = [op.output for op in ops]
    mstep = model.step

    def step(state: Any, i: int) -> Any:
        legal, new_state = mstep(state, inputs[i], outputs[i])
        return new_state if legal else NOT_LEGAL

    return Kernel(model.init(), step)


@dataclass
class PartResult:
    key: Any
    verdict: str
    ops: int
    elapsed_s: float
    counterexample: dict | None = None


@dataclass
class LinResult:
    model: str
    verdict: str
    parts: list[PartResult] = field(default_factory=list)

    @property
    def illegal_parts(self) -> list[PartResult]:
        return [p for p in self.parts if p.verdict == ILLEGAL]


def _search(model: Model, ops: Sequence[Operation], deadline: float, frontier: list | None = None) -> str:
    """Wing-Gong-Lowe over one part (as recorded: ``prepare`` or ``compile`` is applied here).
    Returns OK, ILLEGAL or UNKNOWN (deadline passed). ``frontier``: a list to which an ILLEGAL search appends the
    latest return time that ever stopped it (where the history stopped being linearizable, as far as this search
    got: the counterexample's binary search starts there)."""
    if model.compile is None:
        ops = model.prepare(list(ops))
        kernel = _generic_kernel(model, ops)
    else:
        kernel = model.compile(ops)
    n = len(ops)
    if n == 0:
        return OK
    # Events e: e < n is the call of op e, e >= n the return of op e - n; they are the nodes of a doubly linked
    # list in time order, calls before returns at equal times (treated as concurrent), then by op: a stable sort
    # on the time alone (events are numbered in that tie order), no tuples. HEAD and END are sentinels.
    times = list(map(_CALL, ops))
    times += map(_RET, ops)
    HEAD, END = 2 * n, 2 * n + 1  # noqa: N806 - sentinel indices
    nxt = [0] * (2 * n + 2)
    prv = [0] * (2 * n + 2)
    a = HEAD
    for e in sorted(range(2 * n), key=times.__getitem__):
        nxt[a] = e
        prv[e] = a
        a = e
    nxt[a] = END
    prv[END] = a
    step = kernel.step
    state = kernel.init
    by_set = kernel.state_of_set
    # Lowe's cache holds (linearized set, state) pairs already explored, so that the search does not explore
    # them again. A step forward reaches a set one larger than any on the current path, so the only states it
    # can meet in the cache are those it has backtracked out of: caching states as they are left, not as they
    # are entered, gives the same search. And it can only meet one of its own size: while it is past the
    # largest size cached (at first, with nothing cached, always), it need not look, nor keep the set, which
    # is the stack's calls anyway; the set is brought up to date from the stack when it is needed.
    calls: list[int] = []  # the stack: call events (= ops) linearized, in order
    befores: list[Any] = []  # and the state before each
    linearized = 0  # the ops of calls[:known]
    known = 0
    cache: set = set()
    cached_max = 0  # the largest set size in the cache
    entry = nxt[HEAD]
    far = -INF  # the latest return event that stopped the search
    tick = 1024  # the clock is read every 1024 iterations
    while True:
        tick -= 1
        if not tick:
            if time.monotonic() > deadline:
                return UNKNOWN
            tick = 1024
        if entry < n:  # a call
            new_state = step(state, entry)
            if new_state is not NOT_LEGAL:
                if cached_max and len(calls) < cached_max:
                    depth = len(calls)
                    while known < depth:
                        linearized |= 1 << calls[known]
                        known += 1
                    new_lin = linearized | (1 << entry)
                    if (new_lin if by_set else (new_lin, new_state)) in cache:
                        entry = nxt[entry]
                        continue
                    linearized = new_lin
                    known = depth + 1
                calls.append(entry)
                befores.append(state)
                state = new_state
                # lift the call and its return out of the list
                a, b = prv[entry], nxt[entry]
                nxt[a] = b
                prv[b] = a
                m = entry + n
                a, b = prv[m], nxt[m]
                nxt[a] = b
                prv[b] = a
                entry = nxt[HEAD]
                if entry == END:
                    return OK
            else:
                entry = nxt[entry]
        else:
            if times[entry] > far:
                far = times[entry]
            if not calls:
                if frontier is not None:
                    frontier.append(far)
                return ILLEGAL
            depth = len(calls)
            while known < depth:
                linearized |= 1 << calls[known]
                known += 1
            cache.add(linearized if by_set else (linearized, state))  # explored: every way on from it failed
            if depth > cached_max:
                cached_max = depth
            entry = calls.pop()
            state = befores.pop()
            linearized ^= 1 << entry
            known = depth - 1
            # unlift: return first, then call
            m = entry + n
            nxt[prv[m]] = m
            prv[nxt[m]] = m
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            entry = nxt[entry]


def _prefix(model: Model, ops: Sequence[Operation], k: int, by_ret: list[int]) -> tuple[list[Operation], float]:
    """Operations completed by the k-th completion, plus those pending then (reads dropped, writes left open)."""
    cut = ops[by_ret[k - 1]].ret
    out = []
    for op in ops:
        if op.ret <= cut:
            out.append(op)
        elif op.call <= cut and not model.is_read(op.input):
            out.append(Operation(op.client, op.input, op.output, op.call, INF, op.ref))
    return out, cut


def _counterexample(model: Model, ops: Sequence[Operation], deadline: float, hint: float | None = None) -> dict:
    """Search for the smallest illegal prefix (monotone: an illegal prefix makes the whole illegal).

    Binary search over the number of completions, but galloping out from ``hint`` (the whole search's frontier,
    see :func:`_search`) instead of halving from the middle: the smallest failing prefix is almost always at or
    just after it, so a few prefix searches settle it where halving took log2(n), and only one of them is an
    illegal one (the expensive kind: exhaustive). Every probe is a real search, so the answer does not depend
    on the hint, only the time does."""
    by_ret = sorted((i for i, op in enumerate(ops) if op.ret != INF), key=lambda i: ops[i].ret)
    lo, hi = 1, len(by_ret)  # hi: known (or assumed) illegal
    exact = True
    probed: dict[int, str] = {}

    def probe(k: int) -> str:
        nonlocal exact
        if k not in probed:
            sub, _ = _prefix(model, ops, k, by_ret)
            v = probed[k] = _search(model, sub, deadline)
            if v == UNKNOWN:
                exact = False
        return probed[k]

    if hint is not None and hi > 1:
        rets = [ops[i].ret for i in by_ret]
        k = min(max(bisect_right(rets, hint), lo), hi)
        if probe(k) == ILLEGAL:
            hi, step = k, 1
            while lo < hi:  # gallop down to a prefix that is not illegal
                k = max(hi - step, lo)
                if probe(k) == ILLEGAL:
                    hi = k
                else:
                    lo = k + 1
                    break
                step *= 2
        else:
            # Up to an illegal prefix: one step at a time at first, since a prefix that is linearizable is
            # settled in one pass while an illegal one costs a whole exhaustive search; then galloping.
            lo, step, steps = k + 1, 1, 0
            while lo < hi:
                k = min(lo + step - 1, hi)
                if probe(k) == ILLEGAL:
                    hi = k
                    break
                lo = k + 1
                steps += 1
                if steps > 16:
                    step *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if probe(mid) == ILLEGAL:
            hi = mid
        else:
            lo = mid + 1
    failing = ops[by_ret[hi - 1]]
    window = [op for op in ops if op.call <= failing.ret and op.ret >= failing.call]
    # plus the few operations that completed just before it began: the realtime order it contradicts
    before = sorted((op for op in ops if op.ret < failing.call), key=lambda o: o.ret)[-3:]
    window = sorted(set(window) | set(before), key=lambda o: (o.call, o.ret))
    return {
        "prefix_completions": hi,
        "minimal": exact,
        "failing": {"ref": failing.ref, "client": failing.client,
                    "op": model.describe_operation(failing.input, failing.output)},
        "window": [
            {"ref": o.ref, "client": o.client, "call": o.call, "ret": None if o.ret == INF else o.ret,
             "op": model.describe_operation(o.input, o.output)}
            for o in window
        ],
    }


def check_part(model: Model, key: Any, ops: Sequence[Operation], budget_s: float) -> PartResult:
    """Check one part within ``budget_s`` seconds; illegal parts get a counterexample window."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    frontier: list = []
    verdict = _search(model, ops, deadline, frontier)
    cex = None
    if verdict == ILLEGAL:
        cex = _counterexample(model, ops, t0 + 2 * budget_s, frontier[0] if frontier else None)
    return PartResult(key, verdict, len(ops), time.monotonic() - t0, cex)


def _combine(results: list[PartResult]) -> str:
    if any(r.verdict == ILLEGAL for r in results):
        return ILLEGAL
    if any(r.verdict == UNKNOWN for r in results):
        return UNKNOWN
    return OK


def check_operations(
    model: Model, ops: list[Operation], *, budget_s: float = 10.0, workers: int = 1, stop_on_illegal: bool = False
) -> LinResult:
    """Partition with the model, check each part (in ``workers`` processes if > 1), combine verdicts."""
    parts = model.partition(ops)
    results: list[PartResult] = []
    if workers <= 1 or len(parts) <= 1:
        for key, part in parts:
            r = check_part(model, key, part, budget_s)
            results.append(r)
            if stop_on_illegal and r.verdict == ILLEGAL:
                break
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            pending = {pool.submit(check_part, model, key, part, budget_s) for key, part in parts}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    results.append(fut.result())
                if stop_on_illegal and any(r.verdict == ILLEGAL for r in results):
                    for fut in pending:
                        fut.cancel()
                    break
    results.sort(key=lambda r: str(r.key))
    return LinResult(model.name, _combine(results), results)
