"""Nash equilibria of two-player games: support enumeration, vertex enumeration, Lemke-Howson (Chapter 28).

Labels follow von Stengel (2007) and nashpy: 0..m-1 name the row player's actions, m..m+n-1 the column
player's. With A, B shifted to be positive (equilibria do not change), the best-response polytopes are

    P = {x in R^m : x >= 0, B^T x <= 1}       x has label i if x_i = 0,   label m+j if (B^T x)_j = 1
    Q = {y in R^n : A y <= 1, y >= 0}         y has label i if (A y)_i = 1, label m+j if y_j = 0

and (x, y) != (0, 0) is an equilibrium (after normalising) exactly when every label is in the union of
the two. A game is non-degenerate when no vertex has more labels than its dimension; then equilibria are
isolated, there is an odd number of them, and each has supports of equal size.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

__all__ = ["support_enumeration", "polytope_vertices", "vertex_enumeration", "is_nondegenerate",
           "lemke_howson", "lemke_howson_all", "sort_equilibria", "same_equilibria"]

Equilibrium = tuple[np.ndarray, np.ndarray]


def _matrices(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape or 0 in A.shape:
        raise ValueError(f"A and B must be non-empty matrices of one shape (m, n), got {A.shape} and {B.shape}")
    return A, B


def _indifferent(M: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Solve M z = v 1, 1^T z = 1 for the k x k block M: the mix z that makes the k rows of M pay the same v."""
    k = M.shape[0]
    lhs = np.zeros((k + 1, k + 1))
    lhs[:k, :k], lhs[:k, k], lhs[k, :k] = M, -1.0, 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(lhs, rhs)
    except np.linalg.LinAlgError:
        return None
    return sol[:k], float(sol[k])


def support_enumeration(A: np.ndarray, B: np.ndarray, tol: float = 1e-9) -> list[Equilibrium]:
    """Every equilibrium whose supports I, J have equal size k (all of them in a non-degenerate game).

    For each pair (I, J): y on J makes the rows I of A indifferent, x on I makes the columns J of B
    indifferent, both strictly positive there, and no action outside pays more (Nisan et al. 2007, Alg. 3.4).
    """
    A, B = _matrices(A, B)
    m, n = A.shape
    found = []
    for k in range(1, min(m, n) + 1):
        for I in combinations(range(m), k):
            for J in combinations(range(n), k):
                ys = _indifferent(A[np.ix_(I, J)])
                xs = _indifferent(B[np.ix_(I, J)].T)
                if ys is None or xs is None or ys[0].min() <= tol or xs[0].min() <= tol:
                    continue
                x, y = np.zeros(m), np.zeros(n)
                x[list(I)], y[list(J)] = xs[0], ys[0]
                if (A @ y).max() <= ys[1] + tol and (x @ B).max() <= xs[1] + tol:
                    found.append((x, y))
    return found


def polytope_vertices(G: np.ndarray, h: np.ndarray, tol: float = 1e-9) -> list[tuple[np.ndarray, frozenset]]:
    """The vertices z of {z : G z <= h} with their labels (the rows tight at z): every choice of d rows
    of G (d = dimension) that has one solution and satisfies all the rows. Brute force: C(rows, d) solves."""
    rows, d = G.shape
    out: dict[tuple, tuple[np.ndarray, frozenset]] = {}
    for tight in combinations(range(rows), d):
        sub = G[list(tight)]
        if abs(np.linalg.det(sub)) < 1e-12:
            continue
        z = np.linalg.solve(sub, h[list(tight)])
        slack = h - G @ z
        if slack.min() < -tol:
            continue
        key = tuple(np.round(z, 9))
        if key not in out:
            out[key] = (z, frozenset(np.flatnonzero(np.abs(slack) <= tol).tolist()))
    return list(out.values())


def _polytopes(A: np.ndarray, B: np.ndarray) -> tuple[tuple, tuple]:
    A, B = _matrices(A, B)
    m, n = A.shape
    Ap, Bp = A - A.min() + 1.0, B - B.min() + 1.0  # positive payoffs: P and Q are bounded
    P = (np.vstack([-np.eye(m), Bp.T]), np.concatenate([np.zeros(m), np.ones(n)]))  # rows = labels 0..m+n-1
    Q = (np.vstack([Ap, -np.eye(n)]), np.concatenate([np.ones(m), np.zeros(n)]))
    return P, Q


def vertex_enumeration(A: np.ndarray, B: np.ndarray, tol: float = 1e-9) -> list[Equilibrium]:
    """Every completely labelled pair of vertices of P and Q (Alg. 3.5): all equilibria of a non-degenerate
    game, and the extreme points of every component of equilibria of a degenerate one."""
    P, Q = _polytopes(A, B)
    m, n = np.shape(A)
    everything = frozenset(range(m + n))
    px = [(x, L) for x, L in polytope_vertices(*P, tol) if x.sum() > tol]  # not the artificial vertex 0
    qy = [(y, L) for y, L in polytope_vertices(*Q, tol) if y.sum() > tol]
    return [(x / x.sum() + 0.0, y / y.sum() + 0.0) for x, Lx in px for y, Ly in qy if Lx | Ly == everything]


def is_nondegenerate(A: np.ndarray, B: np.ndarray, tol: float = 1e-9) -> bool:
    """No vertex of P or Q has more tight rows (labels) than the polytope's dimension."""
    P, Q = _polytopes(A, B)
    return all(len(L) == G.shape[1] for G, h in (P, Q) for _, L in polytope_vertices(G, h, tol))


def _pivot(T: np.ndarray, basis: list[int], enter: int, order: list[int], tol: float = 1e-12) -> int:
    """Bring column ``enter`` into the basis of tableau T = [M | rhs]; return the label that leaves.

    Minimum-ratio test, ties broken lexicographically on the columns ``order`` (the starting basis), which
    keeps the path well defined on degenerate games.
    """
    col = T[:, enter]
    cand = np.flatnonzero(col > tol)
    if cand.size == 0:
        raise ValueError("Lemke-Howson found an unbounded ray: the payoffs must be finite and the game well formed")
    for c in [T.shape[1] - 1] + order:
        ratios = T[cand, c] / col[cand]
        cand = cand[ratios <= ratios.min() + tol]
        if cand.size == 1:
            break
    r = int(cand[0])
    T[r] /= T[r, enter]
    for q in range(T.shape[0]):
        if q != r and T[q, enter] != 0.0:
            T[q] -= T[q, enter] * T[r]
    leaving, basis[r] = basis[r], enter
    return leaving


def lemke_howson(A: np.ndarray, B: np.ndarray, label: int = 0, max_pivots: int = 10_000) -> Equilibrium:
    """Complementary pivoting from the artificial equilibrium (0, 0) by dropping ``label`` (Alg. 3.6).

    Two tableaux, one column per label: P's is [B^T | I | 1] (x_i has label i, slack s_j label m+j), Q's is
    [I | A | 1] (slack r_i has label i, y_j label m+j). The variable with ``label`` enters its tableau; the
    one that leaves duplicates a label, so the other tableau's variable with that label enters next, until
    ``label`` itself leaves. Each label's path ends at an equilibrium (not always the same one).
    """
    A, B = _matrices(A, B)
    m, n = A.shape
    if isinstance(label, bool) or not 0 <= int(label) < m + n:
        raise ValueError(f"label must be one of 0..{m + n - 1} (rows first, then columns), got {label!r}")
    Ap, Bp = A - A.min() + 1.0, B - B.min() + 1.0
    TP = np.hstack([Bp.T, np.eye(n), np.ones((n, 1))])
    TQ = np.hstack([np.eye(m), Ap, np.ones((m, 1))])
    basis = {"P": list(range(m, m + n)), "Q": list(range(m))}
    tabs = {"P": TP, "Q": TQ}
    side, enter = ("P" if label < m else "Q"), int(label)
    for _ in range(max_pivots):
        leaving = _pivot(tabs[side], basis[side], enter, list(range(m, m + n)) if side == "P" else list(range(m)))
        if leaving == label:
            break
        side, enter = ("Q" if side == "P" else "P"), leaving
    else:
        raise ValueError(f"Lemke-Howson did not finish in {max_pivots} pivots")
    x, y = np.zeros(m), np.zeros(n)
    for r, v in enumerate(basis["P"]):
        if v < m:
            x[v] = TP[r, -1]
    for r, v in enumerate(basis["Q"]):
        if v >= m:
            y[v - m] = TQ[r, -1]
    return x / x.sum(), y / y.sum()


def lemke_howson_all(A: np.ndarray, B: np.ndarray) -> list[Equilibrium]:
    """The distinct equilibria that Lemke-Howson reaches from the m + n labels."""
    m, n = np.shape(A)
    return sort_equilibria([lemke_howson(A, B, k) for k in range(m + n)])


def sort_equilibria(eqs: list[Equilibrium], decimals: int = 8) -> list[Equilibrium]:
    """Equilibria without duplicates (to ``decimals`` places), in lexicographic order: comparable lists."""
    seen: dict[tuple, Equilibrium] = {}
    for x, y in eqs:
        key = tuple(np.round(np.concatenate([x, y]), decimals) + 0.0)
        seen.setdefault(key, (np.asarray(x, float), np.asarray(y, float)))
    return [seen[k] for k in sorted(seen)]


def same_equilibria(a: list[Equilibrium], b: list[Equilibrium], tol: float = 1e-8) -> bool:
    """The two lists hold the same set of equilibria, each strategy within ``tol``."""
    a, b = sort_equilibria(a), sort_equilibria(b)
    return len(a) == len(b) and all(np.allclose(x1, x2, rtol=0, atol=tol) and np.allclose(y1, y2, rtol=0, atol=tol)
                                    for (x1, y1), (x2, y2) in zip(a, b))
