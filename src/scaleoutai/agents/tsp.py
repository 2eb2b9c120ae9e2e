"""The symmetric travelling salesman problem of Chapter 31's ant colonies: instances, tours, 2-opt and the
exact references (Held-Karp dynamic programming in O(2^n n^2), and enumeration for tiny n to check it).

A tour is a permutation of the n cities, closed back to its start; ``canonical_tour`` starts it at city 0
in the direction of its smaller neighbour, so two equal tours compare equal.
"""
from __future__ import annotations

import itertools

import numpy as np

__all__ = ["euclidean_instance", "tour_length", "canonical_tour", "nearest_neighbour_tour", "two_opt", "held_karp",
           "brute_force_tsp", "reference_tsp"]


def euclidean_instance(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n cities uniform in the unit square and their distance matrix D (symmetric, zero diagonal)."""
    xy = np.random.default_rng(seed).random((int(n), 2))
    return xy, np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1))


def _check_D(D: np.ndarray) -> np.ndarray:
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] < 4:
        raise ValueError(f"D must be a square distance matrix of n >= 4 cities, got shape {D.shape}")
    off = ~np.eye(len(D), dtype=bool)
    if not (np.array_equal(D, D.T) and np.all(np.isfinite(D)) and np.all(D[off] > 0) and not D.diagonal().any()):
        raise ValueError("D must be symmetric and finite, with a zero diagonal and positive distances elsewhere")
    return D


def tour_length(tour: np.ndarray, D: np.ndarray) -> float:
    """ell(T) = sum_s D[T_s, T_{s+1}] around the cycle (one summation order, used everywhere)."""
    t = np.asarray(tour)
    return float(D[t, np.roll(t, -1)].sum())


def canonical_tour(tour: np.ndarray) -> np.ndarray:
    """The same cycle written from city 0, in the direction whose second city is the smaller neighbour."""
    t = np.roll(np.asarray(tour, dtype=np.int64), -int(np.argmin(tour)))
    return t if t[1] < t[-1] else np.concatenate([t[:1], t[1:][::-1]])


def nearest_neighbour_tour(D: np.ndarray) -> np.ndarray:
    """Greedy tour from city 0: always to the closest unvisited city (MMAS's first estimate of ell_bs)."""
    n, tour = len(D), [0]
    free = np.ones(len(D), dtype=bool)
    free[0] = False
    for _ in range(n - 1):
        j = int(np.argmin(np.where(free, D[tour[-1]], np.inf)))
        tour.append(j)
        free[j] = False
    return np.array(tour, dtype=np.int64)


def two_opt(tour: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Best-improvement 2-opt: reverse T[i+1..j] while some pair of edges (a b), (c d) has
    D_ac + D_bd < D_ab + D_cd; ends in a tour no single 2-opt move shortens."""
    t = np.array(tour, dtype=np.int64)
    n = len(t)
    i, j = np.triu_indices(n, 2)
    keep = ~((i == 0) & (j == n - 1))  # those two edges touch: reversing changes nothing
    i, j = i[keep], j[keep]
    tol = 1e-12 * float(D.max()) * n  # every move gains more than this, so the loop ends
    while len(i):
        a, b, c, d = t[i], t[i + 1], t[j], t[(j + 1) % n]
        gain = D[a, b] + D[c, d] - D[a, c] - D[b, d]
        k = int(np.argmax(gain))
        if gain[k] <= tol:
            break
        t[i[k] + 1:j[k] + 1] = t[i[k] + 1:j[k] + 1][::-1].copy()
    return t


def held_karp(D: np.ndarray) -> tuple[float, np.ndarray]:
    """Exact TSP by dynamic programming over subsets (Held and Karp 1962), O(2^n n^2): C(S, j) is the shortest
    path from city 0 through the set S ending at j, C(S, j) = min_{k in S - j} C(S - j, k) + D_kj."""
    D = _check_D(D)
    n = len(D)
    if n > 16:
        raise ValueError(f"Held-Karp holds 2^(n-1) (n-1) numbers: n = {n} is too large here (n <= 16)")
    m, E = n - 1, D[1:, 1:]
    C = np.full((1 << m, m), np.inf)
    parent = np.full((1 << m, m), -1, dtype=np.int64)
    C[1 << np.arange(m), np.arange(m)] = D[0, 1:]
    for S in range(1, 1 << m):
        if S & (S - 1) == 0:
            continue  # one city: the direct edge from 0
        ends = np.flatnonzero((S >> np.arange(m)) & 1)
        cand = C[S ^ (1 << ends)] + E[:, ends].T  # row: end j; column: the previous city k (inf if k not in S - j)
        k = np.argmin(cand, axis=1)
        C[S, ends], parent[S, ends] = cand[np.arange(len(ends)), k], k
    S, j = (1 << m) - 1, int(np.argmin(C[-1] + D[1:, 0]))
    tour = []
    while j >= 0:
        tour.append(j + 1)
        S, j = S ^ (1 << j), int(parent[S, j])
    t = canonical_tour(np.array([0] + tour[::-1]))
    return tour_length(t, D), t


def brute_force_tsp(D: np.ndarray) -> tuple[float, np.ndarray]:
    """Every tour from city 0 (each cycle once per direction): (n - 1)! / 2 of them, for n <= 9."""
    D = _check_D(D)
    n = len(D)
    if n > 9:
        raise ValueError(f"brute force enumerates (n - 1)! / 2 tours: n = {n} is too large (n <= 9)")
    P = np.array([p for p in itertools.permutations(range(1, n)) if p[0] < p[-1]], dtype=np.int64)
    T = np.column_stack([np.zeros(len(P), dtype=np.int64), P])
    t = canonical_tour(T[int(np.argmin(D[T, np.roll(T, -1, axis=1)].sum(axis=1)))])
    return tour_length(t, D), t


def reference_tsp(D: np.ndarray) -> tuple[float, np.ndarray]:
    """The exact optimum (length, canonical tour): Held-Karp, the single-machine reference of Chapter 31."""
    return held_karp(D)
