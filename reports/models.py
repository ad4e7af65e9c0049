"""Linearizability models for Kafka histories: pure step functions plus compiled kernels (same transitions).

The extraction of their operations from a history is :mod:`reports.extract` (re-exported here for old callers).

``PARTITION_LOG``: each topic-partition is a log. ``append(value) -> offset`` is legal iff the offset is past every
offset already in the log (offsets strictly increase; holes are allowed, as transactions leave them), encoded as
"the n-th append has the n-th smallest offset" so that a wrong order fails at once; a poll is a
read of ``(offset, value)`` pairs, legal iff each pair is in the log. A poll that recorded its fetch position ``p``
for the partition (history/schema.py) says more: its first record is the first one in the log at or after ``p``,
and an empty read means the log held nothing at or after ``p`` (a consumer past the end legitimately reads
nothing; one below an offset acknowledged before it began does not: a stale read). The log's records at or after
``p`` are the appends ranked at or above ``below(p)``, the number of appends with a smaller offset, so an empty
read is legal iff the count of appends linearized is at most ``below(p)``; a non-empty one that skipped an append
between ``p`` and its first record never is. Sends invoked and never completed count as info sends. Failed sends
are dropped; info sends are kept (with the offset a poll saw them at) only if some poll read them, since an unread
info send may or may not have happened and an append nobody read is indistinguishable from a hole.

Empty reads and acks. An empty read is evidence only against records that were *visible* when it ran: Kafka
hands consumers records below the high watermark, which passes a record once every in-sync replica has it. An
``acks=all`` acknowledgement comes only after that (the produce waits in purgatory until the high watermark passes
the offset), so from then on a read from below it must return something. An ``acks=1`` (or 0) acknowledgement
says only that the leader appended the record to its own log: the high watermark may still be below it, and if
the leader fails before the followers copy it, it is truncated away and never visible at all. So in a run whose
header settings say ``acks`` other than -1/"all", empty positioned reads are dropped (no stale read is claimed
from them); runs that do not say are taken as acks=all. Non-empty positioned reads keep their check either way: a
read whose first record lies past an acknowledged append at or after its position skipped a record that sat
below a visible one, which no truncation explains (a truncated offset is reused by the next append, and the read
would return that).

``COMMITTED_OFFSETS``: each (group, topic-partition) is a register; ``commit`` writes, ``fetch_offsets`` reads;
unknown before the first commit reads as ``None``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from .evidence import short_repr
from .extract import log_operations, offset_operations
from .linearizability import NOT_LEGAL, Kernel, Model, Operation

# ---------------------------------------------------------------- partition log

def _log_init() -> tuple[int, int]:
    return (0, 0)  # (appends so far, bitmask of the (offset, value) pair ids in the log)


def _log_step(state: tuple[int, int], inp: tuple, out: Any) -> tuple[bool, Any]:
    count, mask = state
    if inp[0] == "append":
        # inp[4] is the append's rank among the part's append offsets (see log_operations): appends must land
        # in offset order, so the n-th append linearized must be the one with the n-th smallest offset.
        if inp[4] == count:
            return True, (count + 1, mask | (1 << inp[3]))
        return False, state
    if len(inp) > 3 and count > inp[3]:  # a positioned read (after rank_appends): records past ``upto``
        return False, state
    for _off, _v, pid in out:
        if not (mask >> pid) & 1:
            return False, state
    return True, state


def _by_key(ops: list[Operation]) -> list[tuple[Any, list[Operation]]]:
    parts: dict[Any, list[Operation]] = {}
    for op in ops:
        k = op.input[1]
        try:
            parts[k].append(op)
        except KeyError:
            parts[k] = [op]
    return sorted(parts.items(), key=lambda kv: str(kv[0]))


def _log_is_read(inp: tuple) -> bool:
    return inp[0] == "read"


def _log_describe(inp: tuple, out: Any) -> str:
    if inp[0] == "append":
        return f"append {inp[1]} {short_repr(inp[2])} -> offset {out}"
    pairs = " ".join(f"{o}:{short_repr(v)}" for o, v, _ in out)
    if len(inp) > 2 and inp[2] is not None:
        return f"read {inp[1]} from {inp[2]}: {pairs or 'nothing'}"
    return f"read {inp[1]} {pairs}"


def _upto(offs: list, pos: int, out: Any, n: int) -> int:
    """The most appends a read from fetch position ``pos`` allows (``offs``: the part's append offsets, sorted):
    ``below(pos)`` for an empty read, none (-1) for one whose first record skipped an append, else ``n``."""
    below = bisect_left(offs, pos)
    if not out:
        return below
    first = out[0][0]
    if first >= pos and bisect_left(offs, first) > below:
        return -1
    return n


def _log_state(state: tuple[int, int]) -> str:
    return f"{state[0]} appends, {bin(state[1]).count('1')} records"


def rank_appends(ops: list[Operation]) -> list[Operation]:
    """Give each append its rank among its partition's append offsets (equal offsets share a rank, so only one
    of them can ever be linearized). Equivalent to "offset above every offset in the log" with holes allowed,
    since every append in the part happened; but a wrong order now fails at once instead of deep in the search."""
    offsets: dict[str, list[int]] = {}
    for op in ops:
        if op.input[0] == "append":
            offsets.setdefault(op.input[1], []).append(op.output)
    rank: dict[str, dict[int, int]] = {}
    for k, offs in offsets.items():
        offs.sort()
        r: dict[int, int] = {}
        for i, o in enumerate(offs):
            r.setdefault(o, i)
        rank[k] = r
    n = len(ops)
    out = []
    for op in ops:
        inp = op.input
        if inp[0] == "append":
            op = Operation(op.client, (*inp[:4], rank[inp[1]][op.output]), op.output, op.call, op.ret, op.ref)
        elif len(inp) > 2 and inp[2] is not None:
            op = Operation(op.client, (*inp[:3], _upto(offsets.get(inp[1], []), inp[2], op.output, n)), op.output,
                           op.call, op.ret, op.ref)
        out.append(op)
    return out


def _log_compile(ops: Sequence[Operation]) -> Kernel:
    """``rank_appends`` + ``_log_step`` by index. Linearized appends are one per rank 0, 1, ..., count - 1 (the step
    demands rank == count), so the state is a function of the linearized set. When each append of a one-key part
    has a rank of its own they are exactly the appends ranked below the count: the state is just the count, and
    a read is legal once the count is past the rank of the first-ranked append of each pair it read."""
    n = len(ops)
    appends: list[tuple] = []  # (offset, position, pair id)
    reads: list[tuple] = []  # (position, pairs)
    positioned: list[tuple] = []  # (position, fetch position, pairs)
    key = keys = None
    for i, op in enumerate(ops):
        inp = op.input
        if inp[0] == "append":
            appends.append((op.output, i, inp[3]))
            if inp[1] != key:
                if keys is None:
                    key, keys = inp[1], 1
                else:
                    keys = 2  # (several keys: ranks per key, the bits kernel)
                    key = inp[1]
        else:
            reads.append((i, op.output))
            if len(inp) > 2 and inp[2] is not None:
                positioned.append((i, inp[2], op.output))
    if keys == 2 or len({a[0] for a in appends}) != len(appends):
        return _log_bits_kernel(ops)
    appends.sort()  # by offset (all distinct): by rank
    ranks = [-1] * n  # -1: a read
    first: dict[Any, int] = {}  # pair id -> lowest rank of an append of it
    for r, (_off, i, pid) in enumerate(appends):
        ranks[i] = r
        if pid not in first:
            first[pid] = r
    past = [0] * n  # a read's rank to be past; n: a pair nobody appended, never legal
    for i, pairs in reads:
        t = -1
        try:
            for _off, _v, pid in pairs:
                r = first[pid]
                if r > t:
                    t = r
        except KeyError:
            t = n
        past[i] = t
    if positioned:
        upto = [n] * n  # a read's most appends (positioned reads only; see _upto)
        offs = [a[0] for a in appends]
        for i, pos, pairs in positioned:
            upto[i] = _upto(offs, pos, pairs, n)

        def step(count: int, i: int) -> Any:
            r = ranks[i]
            if r < 0:
                return count if past[i] < count <= upto[i] else NOT_LEGAL
            return count + 1 if r == count else NOT_LEGAL
    else:
        def step(count: int, i: int) -> Any:
            r = ranks[i]
            if r < 0:
                return count if count > past[i] else NOT_LEGAL
            return count + 1 if r == count else NOT_LEGAL

    return Kernel(0, step, state_of_set=True)


def _log_bits_kernel(ops: Sequence[Operation]) -> Kernel:
    """The general case: state ``(count, bits of the pairs appended)``."""
    n = len(ops)
    ranked = rank_appends(list(ops))
    ranks = [-1] * n  # -1: a read
    bits = [0] * n
    upto = [n] * n  # a read's most appends (see _upto)
    for i, op in enumerate(ranked):
        inp = op.input
        if inp[0] == "append":
            ranks[i] = inp[4]
            bits[i] = 1 << inp[3]
        else:
            need = 0
            for _off, _v, pid in op.output:
                need |= 1 << pid
            bits[i] = need
            if len(inp) > 3:
                upto[i] = inp[3]

    def step(state: tuple[int, int], i: int) -> Any:
        r = ranks[i]
        if r < 0:
            need = bits[i]
            return state if state[1] & need == need and state[0] <= upto[i] else NOT_LEGAL
        if r == state[0]:
            return (r + 1, state[1] | bits[i])
        return NOT_LEGAL

    return Kernel((0, 0), step, state_of_set=True)


PARTITION_LOG = Model(
    name="partition-log",
    init=_log_init,
    step=_log_step,
    partition=_by_key,
    is_read=_log_is_read,
    prepare=rank_appends,
    describe_operation=_log_describe,
    describe_state=_log_state,
    compile=_log_compile,
)


# ---------------------------------------------------------------- committed offsets

def _reg_init() -> None:
    return None


def _reg_step(state: Any, inp: tuple, out: Any) -> tuple[bool, Any]:
    if inp[0] == "commit":
        return True, inp[2]
    return out == state, state


def _reg_is_read(inp: tuple) -> bool:
    return inp[0] == "fetch"


def _reg_describe(inp: tuple, out: Any) -> str:
    g, k = inp[1]
    if inp[0] == "commit":
        return f"commit {g} {k} {inp[2]}"
    return f"fetch {g} {k} -> {out}"


def _reg_compile(ops: Sequence[Operation]) -> Kernel:
    """``_reg_step`` by index: a commit's offset, or a fetch's result."""
    commits = [op.input[0] == "commit" for op in ops]
    values = [op.input[2] if c else op.output for op, c in zip(ops, commits, strict=True)]

    def step(state: Any, i: int) -> Any:
        if commits[i]:
            return values[i]
        return state if values[i] == state else NOT_LEGAL

    return Kernel(None, step)


COMMITTED_OFFSETS = Model(
    name="committed-offsets",
    init=_reg_init,
    step=_reg_step,
    partition=_by_key,
    is_read=_reg_is_read,
    describe_operation=_reg_describe,
    compile=_reg_compile,
)


MODELS = {"partition-log": (PARTITION_LOG, log_operations), "committed-offsets": (COMMITTED_OFFSETS, offset_operations)}
