"""Cycles in a dependency graph between operations: strongly connected components, then one short cycle each.

Why this shape: a history of a million operations gives a graph of about as many vertices and edges. Searching
cycles directly (or recursively) does not scale; Elle's way does: (1) vertices that cannot lie on a cycle - no
edge in or no edge out - are peeled off with numpy, round after round, which empties the DAG-like bulk of a clean
history at C speed; (2) Tarjan's algorithm, iterative (an explicit stack, so no recursion limit), finds the
strongly connected components of what is left; (3) in each component of two or more vertices a breadth-first
search from a vertex back to itself gives the shortest cycle through it - from every vertex when the component is
small (so the cycle is the component's shortest), from a few vertices spread over it otherwise (each search cut
off at the best length so far), so the evidence stays short without a search per vertex.

Vertices are integers ``0..n-1``; edges two int64 arrays. Self-loops are ignored (an operation depending on
itself is no cycle between operations).
"""

from __future__ import annotations

from collections import deque

import numpy as np

EXACT_BELOW = 64  # components this small get a BFS from every vertex: their shortest cycle exactly
SAMPLES = 8  # larger ones: BFS from this many vertices spread over the component


def prune_by_order(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Which edges may lie on a cycle, judged by the vertices' numeric order alone (a mask).

    A cycle has a lowest and a highest vertex and must climb from one to the other and come back down, so every
    point between them is spanned by one of its *backward* edges (``src > dst``), and all its edges lie inside
    one interval of the union of the backward edges' spans. Edges outside such intervals, or crossing from one
    to another, are on no cycle. Vertices numbered in history order make this cheap and strong: in a clean run
    reads follow the writes they read (no backward write-read edge at all), and write-write edges go backward
    only between operations that overlapped in time."""
    back = src > dst
    if not back.any():
        return np.zeros(len(src), dtype=bool)
    lo, hi = dst[back], src[back]
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    new = np.ones(len(lo), dtype=bool)
    new[1:] = lo[1:] > hi[:-1]  # an interval that starts after every earlier one ended: a new merged interval
    starts, ends = lo[new], np.r_[hi[np.flatnonzero(new)[1:] - 1], hi[-1]]

    def label(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, x, "right") - 1
        inside = (i >= 0) & (x <= ends[np.maximum(i, 0)])
        return np.where(inside, i, -1)

    a, b = label(src), label(dst)
    return (a >= 0) & (a == b)


def _trim(n: int, src: np.ndarray, dst: np.ndarray, rounds: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Edges left once vertices without an in-edge or without an out-edge are removed, repeatedly (at most
    ``rounds`` times: the rest is Tarjan's, which is exact anyway)."""
    for _ in range(rounds):
        if not len(src):
            break
        has_out = np.zeros(n, dtype=bool)
        has_out[src] = True
        has_in = np.zeros(n, dtype=bool)
        has_in[dst] = True
        live = has_out & has_in
        keep = live[src] & live[dst]
        if keep.all():
            break
        src, dst = src[keep], dst[keep]
    return src, dst


def strongly_connected(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """``(components, adjacency)``: the strongly connected components with two or more vertices (each a list
    of vertices, in order of their lowest vertex), and the adjacency lists of the trimmed graph they live in."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    loop = src != dst
    src, dst = _trim(n, src[loop], dst[loop])
    adj: list[list[int]] = [[] for _ in range(n)]
    if not len(src):
        return [], adj
    order = np.lexsort((dst, src))
    s, d = src[order], dst[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    d_list = d.tolist()
    for v, a, b in zip(s[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        adj[v] = d_list[a:b]
    verts = np.unique(np.concatenate((s, d))).tolist()
    return _tarjan(verts, adj), adj


def _tarjan(verts: list[int], adj: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm without recursion: each frame is (vertex, next edge to follow)."""
    n = len(adj)
    index = [-1] * n
    low = [0] * n
    on_stack = bytearray(n)
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in verts:
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [[root, 0]]
        while work:
            frame = work[-1]
            v, i = frame
            nbrs = adj[v]
            if i < len(nbrs):
                frame[1] = i + 1
                w = nbrs[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append([w, 0])
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comp.sort()
                    out.append(comp)
    out.sort(key=lambda c: c[0])
    return out


def cycle_through(start: int, adj: list[list[int]], members: set[int], limit: int | None = None) -> list[int] | None:
    """The shortest cycle through ``start`` inside ``members`` (BFS): ``[start, v1, ..., start]``, or None
    (also when every cycle through it has more than ``limit`` edges)."""
    parent: dict[int, int] = {start: -1}
    depth = {start: 0}
    q = deque([start])
    while q:
        v = q.popleft()
        dv = depth[v]
        if limit is not None and dv + 1 > limit:
            return None
        for w in adj[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                path.reverse()
                return [*path, start]
            if w in members and w not in parent:
                parent[w] = v
                depth[w] = dv + 1
                q.append(w)
    return None


def shortest_cycles(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """One short cycle per strongly connected component (see the module docstring), as vertex lists that start
    and end at the same vertex. Large components: searches from a few vertices spread over it, each cut off at
    the shortest cycle found so far."""
    comps, adj = strongly_connected(n, src, dst)
    out = []
    for comp in comps:
        members = set(comp)
        best = None
        starts = comp if len(comp) <= EXACT_BELOW else comp[:: max(1, len(comp) // SAMPLES)][:SAMPLES]
        for v in starts:
            c = cycle_through(v, adj, members, None if best is None else len(best) - 2)
            if c is not None and (best is None or len(c) < len(best)):
                best = c
                if len(best) == 3:  # two vertices: nothing is shorter
                    break
        if best is not None:
            out.append(best)
    return out
