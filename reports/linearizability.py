"""Linearizability checking, Porcupine-style: a model is a bundle of pure functions, the checker knows no domain.

The search is Wing & Gong's, with Lowe's cache of (linearized set, state) pairs, as Porcupine does it. A model
may partition a history ("linearizable iff each part is"; P-compositionality); parts are checked separately,
optionally in parallel processes, and the search stops at the first illegal part. A time budget bounds the
search: when it runs out the verdict is ``unknown`` instead of hanging.

For an illegal part the counterexample is the smallest failing *prefix window*: the fewest completions k such
that the operations completed by then (plus those still pending, with reads dropped and writes left open) are
already not linearizable; the window is the k-th completed operation, everything concurrent with it, and the three operations that completed
just before it began (the realtime order it contradicts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, NamedTuple

OK, ILLEGAL, UNKNOWN = "ok", "illegal", "unknown"
INF = float("inf")


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


@dataclass(frozen=True)
class Model:
    """Pure functions: ``init() -> state``; ``step(state, input, output) -> (legal, state')`` (states hashable);
    ``partition(ops) -> [(part key, ops)]``; ``is_read(input)`` marks ops without effect (used to cut prefixes);
    ``prepare(ops) -> ops`` derives per-(sub)history data the step needs (run on each part and each prefix)."""

    name: str
    init: Callable[[], Any]
    step: Callable[[Any, Any, Any], tuple[bool, Any]]
    partition: Callable[[list[Operation]], list[tuple[Any, list[Operation]]]] = _no_partition
    is_read: Callable[[Any], bool] = _never_read
    prepare: Callable[[list[Operation]], list[Operation]] = _identity
    describe_operation: Callable[[Any, Any], str] = _describe
    describe_state: Callable[[Any], str] = repr


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


def _search(model: Model, ops: Sequence[Operation], deadline: float) -> str:
    """Wing-Gong-Lowe over one part. Returns OK, ILLEGAL or UNKNOWN (deadline passed)."""
    n = len(ops)
    if n == 0:
        return OK
    # Entries 1..2n; 0 is the head sentinel. Calls before returns at equal times (treated as concurrent).
    events = []
    for i, op in enumerate(ops):
        events.append((op.call, 0, i))
        events.append((op.ret, 1, i))
    events.sort()
    size = 2 * n + 1
    nxt = [0] * (size + 1)
    prv = [0] * (size + 1)
    op_of = [0] * size
    is_call = [False] * size
    match = [0] * size
    call_node = [0] * n
    ret_node = [0] * n
    for node, (_t, kind, i) in enumerate(events, 1):
        op_of[node] = i
        if kind == 0:
            is_call[node] = True
            call_node[i] = node
        else:
            ret_node[i] = node
    for i in range(n):
        match[call_node[i]] = ret_node[i]
    END = size  # noqa: N806 - sentinel index
    for node in range(size):
        nxt[node] = node + 1 if node + 1 < size else END
    for node in range(1, size):
        prv[node] = node - 1
    prv[END] = size - 1
    step = model.step
    inputs = [op.input for op in ops]
    outputs = [op.output for op in ops]
    state = model.init()
    linearized = 0
    cache: set = set()
    calls: list[tuple[int, Any]] = []
    entry = nxt[0]
    iters = 0
    while nxt[0] != END:
        iters += 1
        if iters & 1023 == 0 and time.monotonic() > deadline:
            return UNKNOWN
        if is_call[entry]:
            i = op_of[entry]
            legal, new_state = step(state, inputs[i], outputs[i])
            if legal:
                new_lin = linearized | (1 << i)
                ck = (new_lin, new_state)
                if ck not in cache:
                    cache.add(ck)
                    calls.append((entry, state))
                    state, linearized = new_state, new_lin
                    # lift the call and its return out of the list
                    m = match[entry]
                    nxt[prv[entry]] = nxt[entry]
                    prv[nxt[entry]] = prv[entry]
                    nxt[prv[m]] = nxt[m]
                    prv[nxt[m]] = prv[m]
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:
            if not calls:
                return ILLEGAL
            entry, state = calls.pop()
            linearized &= ~(1 << op_of[entry])
            # unlift: return first, then call
            m = match[entry]
            nxt[prv[m]] = m
            prv[nxt[m]] = m
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            entry = nxt[entry]
    return OK


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


def _counterexample(model: Model, ops: Sequence[Operation], deadline: float) -> dict:
    """Binary search for the smallest illegal prefix (monotone: an illegal prefix makes the whole illegal)."""
    by_ret = sorted((i for i, op in enumerate(ops) if op.ret != INF), key=lambda i: ops[i].ret)
    lo, hi = 1, len(by_ret)  # hi: known (or assumed) illegal
    exact = True
    while lo < hi:
        mid = (lo + hi) // 2
        sub, _ = _prefix(model, ops, mid, by_ret)
        v = _search(model, model.prepare(sub), deadline)
        if v == ILLEGAL:
            hi = mid
        else:
            if v == UNKNOWN:
                exact = False
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
    verdict = _search(model, model.prepare(list(ops)), deadline)
    cex = None
    if verdict == ILLEGAL:
        cex = _counterexample(model, ops, t0 + 2 * budget_s)
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
