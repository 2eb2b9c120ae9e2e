"""Communication graphs as neighbour lists (``nb[i]`` = the sorted neighbours of node i), for gossip
(Ch14) and consensus (Ch31): ring_graph, grid_graph (a torus when periodic), complete_graph,
random_regular_graph, random_geometric_graph, erdos_renyi_graph; check_neighbours and is_connected.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tabular import _positive

Neighbours = list[list[int]]


def from_edges(n: int, edges: Any) -> Neighbours:
    """Neighbour lists of the undirected graph on n nodes with these (a, b) edges; self-loops and repeats dropped."""
    nb: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        if a != b:
            nb[a].add(int(b))
            nb[b].add(int(a))
    return [sorted(x) for x in nb]


def ring_graph(n: int) -> Neighbours:
    """i joined to i - 1 and i + 1 mod n (one neighbour when n = 2, none when n = 1)."""
    n = _positive("a graph's node count n", n)
    return from_edges(n, ((i, (i + 1) % n) for i in range(n)))


def grid_graph(rows: int, cols: int, periodic: bool = True) -> Neighbours:
    """A rows x cols grid, node r * cols + c; ``periodic`` wraps both ways (a 2-D torus, up to 4 neighbours)."""
    rows, cols = _positive("rows", rows), _positive("cols", cols)
    edges = set()
    for r in range(rows):
        for c in range(cols):
            if periodic or c + 1 < cols:
                edges.add((r * cols + c, r * cols + (c + 1) % cols))
            if periodic or r + 1 < rows:
                edges.add((r * cols + c, ((r + 1) % rows) * cols + c))
    return from_edges(rows * cols, edges)


def complete_graph(n: int) -> Neighbours:
    """Every pair joined."""
    n = _positive("a graph's node count n", n)
    return [[j for j in range(n) if j != i] for i in range(n)]


def is_connected(nb: Neighbours) -> bool:
    """True when every node is reachable from node 0 (depth-first search)."""
    seen, stack = {0}, [0]
    while stack:
        for j in nb[stack.pop()]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return len(seen) == len(nb)


def check_neighbours(nb: Neighbours) -> Neighbours:
    """``nb`` itself if it is a simple undirected graph on nodes 0..n-1; else one clear ValueError."""
    n = len(nb)
    for i, row in enumerate(nb):
        if i in row or len(set(row)) != len(row) or any(not 0 <= j < n for j in row):
            raise ValueError(f"node {i}'s neighbours {row} must be distinct nodes 0..{n - 1} other than {i}")
        if any(i not in nb[j] for j in row):
            raise ValueError(f"the graph must be undirected: node {i} lists a neighbour that does not list it")
    return nb


def random_regular_graph(n: int, d: int, seed: int = 0, tries: int = 1000) -> Neighbours:
    """A random simple connected d-regular graph by the configuration model, redrawn until it is one."""
    n = _positive("a graph's node count n", n)
    if not 0 <= d < n or (n * d) % 2:
        raise ValueError(f"a d-regular graph on n nodes needs 0 <= d < n and n*d even, got n={n}, d={d}")
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        stubs = rng.permutation(np.repeat(np.arange(n), d)).reshape(-1, 2)
        edges = {tuple(sorted(map(int, e))) for e in stubs}
        if np.any(stubs[:, 0] == stubs[:, 1]) or len(edges) != len(stubs):
            continue
        nb = from_edges(n, edges)
        if n == 1 or is_connected(nb):
            return nb
    raise ValueError(f"no simple connected {d}-regular graph on {n} nodes found in {tries} tries: raise d")


def random_geometric_graph(n: int, radius: float, seed: int = 0, tries: int = 200) -> Neighbours:
    """n points uniform in the unit square, joined when closer than ``radius``; redrawn until connected."""
    n = _positive("a graph's node count n", n)
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        pts = rng.random((n, 2))
        d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
        nb = from_edges(n, zip(*np.nonzero(np.triu(d2 < radius ** 2, 1))))
        if is_connected(nb):
            return nb
    raise ValueError(f"no connected geometric graph on {n} nodes with radius {radius} in {tries} draws: raise it")


def erdos_renyi_graph(n: int, p: float, seed: int = 0, tries: int = 200) -> Neighbours:
    """Each pair joined with chance p; redrawn until connected."""
    n = _positive("a graph's node count n", n)
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        nb = from_edges(n, zip(*np.nonzero(np.triu(rng.random((n, n)) < p, 1))))
        if is_connected(nb):
            return nb
    raise ValueError(f"no connected G(n={n}, p={p}) in {tries} draws: raise p above about log(n)/n")

