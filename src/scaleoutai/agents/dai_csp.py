"""Distributed constraint satisfaction on graph colouring (Chapter 27): the agents and the graphs.

One agent per variable (a node to colour with one of k colours; an edge forbids equal colours). Agent
i's priority is its index (lower index = higher priority). Agents exchange logical messages; each
returns, per round, the messages it sends, and the round engine of ``dai_rounds`` carries them.

* Asynchronous backtracking (ABT; Yokoo, Durfee, Ishida, Kuwabara 1998, in the form of Bessiere,
  Maestre, Brito, Meseguer 2005): ``ok?`` tells lower-priority agents a value; a ``nogood`` (a set of
  assignments that cannot all hold) goes to its lowest-priority variable; ``add-link`` asks a variable
  named in a nogood for its value. A nogood is a logical consequence of the constraints whatever the
  views were, so an empty nogood proves that no colouring exists: ABT is sound and complete.
* Distributed breakout (DBA; Yokoo and Hirayama 1996): every cycle each agent sends ``ok?`` (its value)
  and then ``improve`` (how much it could cut its weighted conflicts); only an agent that beats every
  neighbour moves; in a quasi-local minimum (nobody can improve, conflicts remain) the weights of the
  violated constraints grow. Incomplete: it cannot prove that no colouring exists.
"""
from __future__ import annotations

import numpy as np

__all__ = ["OK", "NOGOOD", "ADDLINK", "IMPROVE", "Neighbours", "planted_graph", "complete_graph", "mycielski",
           "conflicts", "is_proper", "solve_colouring", "induced_graph", "ABTAgent", "DBAAgent"]

OK, NOGOOD, ADDLINK, IMPROVE = range(4)
Neighbours = list[list[int]]
Message = tuple[int, int, int, tuple[int, ...]]  # (to, from, kind, data)


# --- graphs --------------------------------------------------------------------------------------

def planted_graph(n: int, k: int = 3, degree: float = 4.0, seed: int = 0) -> Neighbours:
    """A random graph with a hidden proper k-colouring: m = round(degree n / 2) edges drawn uniformly
    among the pairs whose planted colours differ, so the graph is k-colourable by construction."""
    if n < 1 or k < 1 or degree < 0:
        raise ValueError(f"a planted graph needs n >= 1, k >= 1 and degree >= 0, got n={n}, k={k}, degree={degree}")
    rng = np.random.default_rng(seed)
    colour = rng.permutation(np.arange(n) % k)
    i, j = np.triu_indices(n, 1)
    ok = colour[i] != colour[j]
    i, j = i[ok], j[ok]
    m = min(int(round(degree * n / 2)), len(i))
    pick = rng.choice(len(i), size=m, replace=False)
    nb: Neighbours = [[] for _ in range(n)]
    for a, b in zip(i[pick], j[pick]):
        nb[a].append(int(b))
        nb[b].append(int(a))
    return [sorted(x) for x in nb]


def complete_graph(n: int) -> Neighbours:
    """K_n: colourable with n colours and no fewer (K_4 with 3 colours is the smallest no-instance)."""
    return [[j for j in range(n) if j != i] for i in range(n)]


def mycielski(nb: Neighbours) -> Neighbours:
    """Mycielski's construction: one more colour needed, no triangle added (C_5 -> the Groetzsch graph,
    11 nodes, triangle-free, not 3-colourable)."""
    n = len(nb)
    out: Neighbours = [list(x) for x in nb] + [[] for _ in range(n + 1)]
    for u in range(n):
        for v in nb[u]:
            out[n + u].append(v)  # u's shadow joins u's neighbours
            out[v].append(n + u)
        out[n + u].append(2 * n)  # and the apex
        out[2 * n].append(n + u)
    return [sorted(set(x)) for x in out]


def _check_graph(nb: Neighbours, k: int) -> None:
    if k < 1:
        raise ValueError(f"colouring needs k >= 1 colours, got {k}")
    for i, row in enumerate(nb):
        if i in row or any(not 0 <= j < len(nb) or i not in nb[j] for j in row):
            raise ValueError(f"node {i}'s neighbours {row} must be other nodes that list {i} back (undirected)")


def conflicts(nb: Neighbours, colours: np.ndarray) -> int:
    """The number of edges whose two ends have the same colour."""
    return sum(1 for i, row in enumerate(nb) for j in row if i < j and colours[i] == colours[j])


def is_proper(nb: Neighbours, colours: np.ndarray | None, k: int) -> bool:
    """A colouring with every colour in 0..k-1 and no edge inside a colour."""
    if colours is None or len(colours) != len(nb):
        return False
    c = np.asarray(colours)
    return bool(np.all((c >= 0) & (c < k))) and conflicts(nb, c) == 0


def solve_colouring(nb: Neighbours, k: int) -> np.ndarray | None:
    """The single-machine reference: depth-first search, most constrained node first (DSATUR order).
    Returns a proper k-colouring or None when there is none."""
    _check_graph(nb, k)
    n = len(nb)
    col = -np.ones(n, dtype=np.int64)

    def search(left: int) -> bool:
        if left == 0:
            return True
        free = np.flatnonzero(col < 0)
        sat = [len({int(col[j]) for j in nb[i] if col[j] >= 0}) for i in free]
        i = int(free[max(range(len(free)), key=lambda a: (sat[a], len(nb[free[a]])))])
        used = {int(col[j]) for j in nb[i]}
        for c in range(k):
            if c not in used:
                col[i] = c
                if search(left - 1):
                    return True
        col[i] = -1
        return False

    return col.copy() if search(n) else None


def induced_graph(nb: Neighbours) -> Neighbours:
    """The induced graph of the priority order (index order): from the last node back, a node's earlier
    neighbours are joined into a clique. Every link ABT ever adds stays inside it (a nogood of agent i
    names only i's induced parents), so it bounds whom a rank may have to talk to."""
    adj = [set(x) for x in nb]
    for v in range(len(nb) - 1, -1, -1):
        parents = sorted(u for u in adj[v] if u < v)
        for a in parents:
            adj[a].update(p for p in parents if p != a)
    return [sorted(x) for x in adj]


# --- the agents ----------------------------------------------------------------------------------

class ABTAgent:
    """Variable i of an ABT search. ``start()`` and ``receive(msg)`` return the messages to send."""

    def __init__(self, i: int, nb: Neighbours, k: int):
        self.i, self.k = i, k
        self.higher = [j for j in nb[i] if j < i]
        self.children = {j for j in nb[i] if j > i}  # whom to tell my value (ok?)
        self.parents = set(self.higher)  # whose value I am told
        self.value: int | None = None
        self.view: dict[int, int] = {}
        self.nogoods: dict[int, dict[int, int]] = {}  # eliminated value -> why (the nogood's other assignments)
        self.unsat = False
        self.out: list[Message] = []

    def start(self) -> list[Message]:
        self._check_view()
        return self._flush()

    def receive(self, msg: Message) -> list[Message]:
        _, src, kind, data = msg
        if kind == OK:
            self._update(src, data[0])
            self._check_view()
        elif kind == NOGOOD:
            ng = dict(zip(data[0::2], data[1::2]))
            lhs = {x: v for x, v in ng.items() if x != self.i}
            if self.value is not None and ng.get(self.i) == self.value and self._coherent(lhs):
                for x in sorted(lhs):
                    if x not in self.parents:  # a new link: ask x to keep me informed
                        self.parents.add(x)
                        self.out.append((x, self.i, ADDLINK, ()))
                    if x not in self.view:  # the nogood's value of x stands until x's own ok? arrives
                        self._update(x, lhs[x])
                self.nogoods[self.value] = lhs
                self.value = None
                self._check_view()
            elif self.value is not None and ng.get(self.i) == self.value:
                self.out.append((src, self.i, OK, (self.value,)))  # the sender's view is out of date
        elif kind == ADDLINK:
            self.children.add(src)
            if self.value is not None:
                self.out.append((src, self.i, OK, (self.value,)))
        return self._flush()

    def _flush(self) -> list[Message]:
        out, self.out = self.out, []
        return out

    def _coherent(self, lhs: dict[int, int]) -> bool:
        return all(self.view.get(x, v) == v for x, v in lhs.items())

    def _update(self, j: int, v: int | None) -> None:
        """Learn (or forget, v = None) j's value; drop every nogood that no longer matches the view."""
        if v is None:
            self.view.pop(j, None)
        else:
            self.view[j] = v
        self.nogoods = {a: ng for a, ng in self.nogoods.items() if all(self.view.get(x) == u for x, u in ng.items())}

    def _consistent(self, v: int) -> bool:
        return v not in self.nogoods and all(self.view.get(j) != v for j in self.higher)

    def _check_view(self) -> None:
        if self.unsat or (self.value is not None and self._consistent(self.value)):
            return
        self.value = None
        for v in range(self.k):
            if v in self.nogoods:
                continue
            clash = [j for j in self.higher if self.view.get(j) == v]
            if not clash:
                self.value = v
                self.out.extend((c, self.i, OK, (v,)) for c in sorted(self.children))
                return
            self.nogoods[v] = {min(clash): v}  # the highest-priority neighbour that holds v
        self._backtrack()

    def _backtrack(self) -> None:
        ng: dict[int, int] = {}
        for lhs in self.nogoods.values():  # every value is eliminated: resolve their reasons
            ng.update(lhs)
        if not ng:
            self.unsat = True  # the empty nogood: no colouring exists
            return
        x = max(ng)  # the lowest-priority variable in the nogood is the one to change
        self.out.append((x, self.i, NOGOOD, tuple(a for item in sorted(ng.items()) for a in item)))
        self._update(x, None)
        self._check_view()


class DBAAgent:
    """Variable i of the distributed breakout algorithm; weights on its constraints start at 1.

    Even rounds: read the neighbours' ``improve``, move if mine is the largest (ties: the smaller index),
    raise the weights in a quasi-local minimum, then send ``ok?``. Odd rounds: read the ``ok?``, find the
    best value and send ``improve``. The start value is drawn from (seed, i), so placement cannot change it.
    """

    def __init__(self, i: int, nb: Neighbours, k: int, seed: int = 0):
        self.i, self.k, self.nb = i, k, nb[i]
        self.value = int(np.random.default_rng([seed, i]).integers(k))
        self.weight = dict.fromkeys(self.nb, 1)
        self.view: dict[int, int] = {}
        self.improves: dict[int, int] = {}
        self.my_improve, self.new_value, self.violated = 0, self.value, 0

    def start(self) -> list[Message]:
        return [(j, self.i, OK, (self.value,)) for j in self.nb]

    def round(self, r: int, inbox: list[Message]) -> list[Message]:
        """Round r >= 1 with the messages of round r - 1."""
        if r % 2 == 1:
            self.view.update({src: data[0] for _, src, _, data in inbox})
            cost = np.zeros(self.k, dtype=np.int64)
            for j in self.nb:
                cost[self.view[j]] += self.weight[j]
            now = int(cost[self.value])
            best = int(cost.min())
            self.new_value = self.value if now == best else int(np.argmin(cost))
            self.my_improve = now - best
            self.violated = sum(1 for j in self.nb if self.view[j] == self.value)
            return [(j, self.i, IMPROVE, (self.my_improve,)) for j in self.nb]
        self.improves = {src: data[0] for _, src, _, data in inbox}
        wins = all(self.my_improve > m or (self.my_improve == m and self.i < j) for j, m in self.improves.items())
        if self.my_improve > 0 and wins:
            self.value = self.new_value
        elif self.violated and self.my_improve == 0 and all(m == 0 for m in self.improves.values()):
            for j in self.nb:  # quasi-local minimum: make the constraints that still fail weigh more
                if self.view[j] == self.value:
                    self.weight[j] += 1
        return [(j, self.i, OK, (self.value,)) for j in self.nb]
