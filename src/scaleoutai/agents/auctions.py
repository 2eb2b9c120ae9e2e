"""Auctions among agents (Chapter 29, Sections 2-7): sealed bids, an ascending clock, and VCG.

Single item, n bidders with private values v_i. Sealed bid: the highest bid wins (ties: lowest index);
first-price pays its bid, second-price (Vickrey 1961) pays the second-highest bid, so bidding v_i is a
dominant strategy there. In first-price with values i.i.d. U[0, 1] the symmetric Bayes-Nash equilibrium
shades: b(v) = (n - 1) / n * v, and both formats earn (n - 1) / (n + 1) in expectation (revenue
equivalence). The English auction raises a clock price until one bidder is left, who pays about the
second-highest value. VCG (Vickrey-Clarke-Groves) sells m items as bundles: the welfare-maximising
allocation a* (found here by enumerating all (n + 1)^m assignments), and the Clarke payment
p_i = max_a sum_{j != i} b_j(a) - sum_{j != i} b_j(a*): each bidder pays the harm it does to the others.

On the communicator rank 0 is the auctioneer and rank i = 1..n is bidder i - 1. The auctioneer receives
from the bidders in rank order, so it always knows whom it waits for; a bidder that crashed, or whose
bid was lost, has no bid.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm, MessageLostError, PeerCrashedError

__all__ = ["RULES", "truthful", "bne_first_price", "reference_auction", "sealed_bid_auction", "run_sealed_bid",
           "reference_english", "english_auction", "run_english", "utilities", "truthfulness_violations",
           "first_price_expected_utility", "simulate_first_price", "allocations", "vcg", "vcg_batch",
           "vcg_auction", "run_vcg", "vcg_violations"]

RULES = ("first", "second")
Strategy = Callable[[float, int], float]
_SILENT = (PeerCrashedError, MessageLostError)  # the peer crashed, or its message was lost on the link


def truthful(value: float, n: int) -> float:
    """Bid your value: dominant in second-price and VCG."""
    return float(value)


def bne_first_price(value: float, n: int) -> float:
    """The symmetric Bayes-Nash bid of first-price with n bidders and values i.i.d. U[0, 1]: (n - 1) / n v."""
    return (n - 1) / n * float(value)


def _rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"unknown auction rule {rule!r}: choose 'first' or 'second'")
    return rule


def reference_auction(bids: Sequence[float | None], rule: str = "second", reserve: float = 0.0) -> tuple[int, float]:
    """(winner, price) on one machine; None is a missing bid. No bid >= reserve: (-1, 0.0)."""
    rule = _rule(rule)
    valid = [(float(b), i) for i, b in enumerate(bids) if b is not None and float(b) >= reserve]
    if not valid:
        return -1, 0.0
    top = max(b for b, _ in valid)
    winner = min(i for b, i in valid if b == top)  # ties: the lowest index
    if rule == "first":
        return winner, top
    rest = [b for b, i in valid if i != winner]
    return winner, max(rest + [float(reserve)])


def sealed_bid_auction(comm: Comm, value: float, rule: str = "second", strategy: Strategy = truthful,
                       reserve: float = 0.0) -> dict[str, Any]:
    """Per rank. Bidders send [strategy(v, n)] to rank 0; rank 0 sends [winner, price] back. 2n messages."""
    n = comm.size - 1
    if n < 1:
        raise ValueError("an auction needs an auctioneer and at least one bidder: world size >= 2")
    if comm.rank > 0:
        comm.send(np.array([strategy(value, n)], dtype=np.float64), 0)
        winner, price = comm.recv(0)
        return {"winner": int(winner), "price": float(price)}
    bids: list[float | None] = []
    for i in range(1, n + 1):  # rank order: the auctioneer knows whom it waits for
        try:
            bids.append(float(comm.recv(i)[0]))
        except _SILENT:
            bids.append(None)
    winner, price = reference_auction(bids, rule, reserve)
    for i in range(1, n + 1):
        comm.send(np.array([winner, price], dtype=np.float64), i)
    return {"winner": winner, "price": price, "bids": bids}


def run_sealed_bid(values: Sequence[float], rule: str = "second", strategy: Strategy = truthful,
                   reserve: float = 0.0, **run_kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: n + 1 ranks (rank 0 the auctioneer); returns the auctioneer's outcome and the run."""
    _rule(rule)
    res = cluster.run(_sealed_rank, len(values) + 1, args=(list(map(float, values)), rule, strategy, reserve),
                      **{"timeout": 60, **run_kw})
    return res.values[0], res


def _sealed_rank(comm: Comm, values: list[float], rule: str, strategy: Strategy, reserve: float) -> dict:
    return sealed_bid_auction(comm, values[comm.rank - 1] if comm.rank else 0.0, rule, strategy, reserve)


def reference_english(values: Sequence[float], increment: float, reserve: float = 0.0) -> dict[str, Any]:
    """Clock price p_k = reserve + k * increment; bidders with v >= p_k stay. One left: it pays p_k; none
    left: the lowest index of the previous round pays p_{k-1}; none at the reserve: no sale (-1)."""
    if not increment > 0:
        raise ValueError(f"the clock needs increment > 0, got {increment}")
    active, k, polled = list(range(len(values))), 0, 0
    while True:
        price = reserve + k * increment
        polled += len(active)
        staying = [i for i in active if values[i] >= price]
        if len(staying) >= 2:
            active, k = staying, k + 1
            continue
        if staying:
            return {"winner": staying[0], "price": price, "rounds": k + 1, "polled": polled}
        if k == 0:
            return {"winner": -1, "price": 0.0, "rounds": 1, "polled": polled}
        return {"winner": active[0], "price": price - increment, "rounds": k + 1, "polled": polled}


def english_auction(comm: Comm, value: float, increment: float, reserve: float = 0.0) -> dict[str, Any]:
    """Per rank. Each round rank 0 sends [0, p] to every active bidder and receives [stay]; the end is
    announced as [1, winner, price] to all. Messages: 2 * (bidders polled) + n."""
    n = comm.size - 1
    if comm.rank > 0:
        while True:
            msg = comm.recv(0)
            if msg[0] == 1.0:
                return {"winner": int(msg[1]), "price": float(msg[2])}
            comm.send(np.array([1.0 if value >= msg[1] else 0.0]), 0)
    active, k, polled = list(range(n)), 0, 0
    while True:
        price = reserve + k * increment
        for i in active:
            comm.send(np.array([0.0, price, 0.0]), i + 1)
        polled += len(active)
        staying = []
        for i in active:
            try:
                if comm.recv(i + 1)[0] == 1.0:
                    staying.append(i)
            except _SILENT:
                pass  # a silent bidder has left the auction
        if len(staying) >= 2:
            active, k = staying, k + 1
            continue
        if staying:
            out = {"winner": staying[0], "price": price}
        elif k == 0:
            out = {"winner": -1, "price": 0.0}
        else:
            out = {"winner": active[0], "price": price - increment}
        break
    for i in range(n):
        comm.send(np.array([1.0, out["winner"], out["price"]]), i + 1)
    return {**out, "rounds": k + 1, "polled": polled}


def run_english(values: Sequence[float], increment: float, reserve: float = 0.0,
                **run_kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver for ``english_auction``: returns the auctioneer's outcome and the run."""
    if not increment > 0:
        raise ValueError(f"the clock needs increment > 0, got {increment}")
    res = cluster.run(_english_rank, len(values) + 1, args=(list(map(float, values)), increment, reserve),
                      **{"timeout": 120, **run_kw})
    return res.values[0], res


def _english_rank(comm: Comm, values: list[float], increment: float, reserve: float) -> dict:
    return english_auction(comm, values[comm.rank - 1] if comm.rank else 0.0, increment, reserve)


def utilities(values: Sequence[float], winner: int, price: float) -> np.ndarray:
    """Quasi-linear utilities: v_i - price for the winner, 0 for everyone else."""
    u = np.zeros(len(values))
    if winner >= 0:
        u[winner] = values[winner] - price
    return u


def truthfulness_violations(rule: str, grid: Sequence[float], n: int, tol: float = 1e-12) -> list[tuple]:
    """Every (bids, i, misreport, gain > tol) on the grid: bidder i of value bids[i] against the others'
    bids gains by bidding ``misreport`` instead. Empty means truthful bidding is dominant on the grid."""
    found = []
    for bids in itertools.product(grid, repeat=n):
        for i in range(n):
            honest = utilities(bids, *reference_auction(bids, rule))[i]
            for r in grid:
                lied = list(bids)
                lied[i] = r
                gain = utilities(bids, *reference_auction(lied, rule))[i] - honest  # true value bids[i]
                if gain > tol:
                    found.append((tuple(bids), i, r, float(gain)))
    return found


def first_price_expected_utility(shade: float, n: int) -> float:
    """E_v[(v - s v) P(win)] for a bidder who bids s v against n - 1 bidders at (n - 1) / n v, v ~ U[0, 1]."""
    if n < 2:
        raise ValueError(f"first-price shading needs n >= 2 bidders, got {n}")
    c = shade * n / (n - 1)  # P(win | v) = min(1, c v)^(n - 1)
    if c <= 1:
        return (1 - shade) * c ** (n - 1) / (n + 1)
    return (1 - shade) * (1 / (c * c * (n + 1)) + (1 - 1 / (c * c)) / 2)


def simulate_first_price(shades: Sequence[float], n: int, trials: int = 100_000, seed: int = 0) -> np.ndarray:
    """Monte Carlo of ``first_price_expected_utility`` for every shade: the same value draws for each."""
    v = np.random.default_rng(seed).random((int(trials), n))
    rival = bne_first_price(1.0, n) * v[:, 1:].max(axis=1)
    return np.array([np.mean(np.where(s * v[:, 0] > rival, (1 - s) * v[:, 0], 0.0)) for s in shades])


def allocations(n: int, m: int) -> np.ndarray:
    """(A, n) bundle masks, A = (n + 1)^m: item k goes to nobody or to one bidder; bit k of mask = item k."""
    rows = []
    for owner in itertools.product(range(-1, n), repeat=m):  # all unsold comes first: it wins ties
        rows.append([sum(1 << k for k in range(m) if owner[k] == i) for i in range(n)])
    return np.array(rows, dtype=np.int64).reshape(-1, n)


def vcg_batch(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """VCG for reports V (..., n, 2^m), V[..., i, S] = b_i(S): (bundles (..., n), payments (..., n), welfare)."""
    V = np.asarray(V, dtype=np.float64)
    n, size = V.shape[-2], V.shape[-1]
    m = size.bit_length() - 1
    if n < 1 or size != 1 << m:
        raise ValueError(f"valuations must be (n, 2^m) arrays with n >= 1, got shape {V.shape}")
    M = allocations(n, m)
    W = V[..., np.arange(n), M]  # (..., A, n): what bidder i reports for its bundle in allocation a
    total = W.sum(axis=-1)
    best = np.argmax(total, axis=-1)  # the first maximum in enumeration order
    W_best = np.take_along_axis(W, best[..., None, None], axis=-2)[..., 0, :]
    welfare = np.take_along_axis(total, best[..., None], axis=-1)[..., 0]
    without = (total[..., :, None] - W).max(axis=-2)  # max_a sum_{j != i} b_j(a)
    payments = without - (welfare[..., None] - W_best)
    return M[best], payments, welfare


def vcg(valuations: np.ndarray) -> dict[str, Any]:
    """One VCG auction: {"bundles": mask per bidder, "payments", "welfare"} (reported welfare of a*)."""
    bundles, payments, welfare = vcg_batch(valuations)
    return {"bundles": bundles.tolist(), "payments": payments, "welfare": float(welfare)}


def vcg_auction(comm: Comm, valuation: np.ndarray) -> dict[str, Any]:
    """Per rank. Bidders send their 2^m bundle values to rank 0; it answers [bundle, payment]. 2n messages.
    A silent bidder is left out of the auction (no items, no payment)."""
    n = comm.size - 1
    if comm.rank > 0:
        comm.send(np.asarray(valuation, dtype=np.float64), 0)
        bundle, pay = comm.recv(0)
        return {"bundle": int(bundle), "payment": float(pay)}
    got = {}
    for i in range(1, n + 1):
        try:
            got[i - 1] = comm.recv(i)
        except _SILENT:
            pass
    present = sorted(got)
    bundles, pays = [0] * n, [0.0] * n
    if present:
        out = vcg(np.stack([got[i] for i in present]))
        for k, i in enumerate(present):
            bundles[i], pays[i] = out["bundles"][k], float(out["payments"][k])
    for i in range(n):
        comm.send(np.array([bundles[i], pays[i]], dtype=np.float64), i + 1)
    return {"bundles": bundles, "payments": np.array(pays), "present": present}


def run_vcg(valuations: np.ndarray, **run_kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: bidder i on rank i + 1 holds row i of ``valuations`` (n, 2^m)."""
    V = np.asarray(valuations, dtype=np.float64)
    vcg_batch(V)  # validates the shape with a clear message before any rank starts
    res = cluster.run(_vcg_rank, len(V) + 1, args=(V,), **{"timeout": 60, **run_kw})
    return res.values[0], res


def _vcg_rank(comm: Comm, V: np.ndarray) -> dict:
    return vcg_auction(comm, V[comm.rank - 1] if comm.rank else np.zeros(V.shape[1]))


def vcg_violations(profiles: np.ndarray, reports: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Rows (profile, bidder, report, gain) where reporting ``reports[r]`` instead of the truth gains more
    than tol. profiles: (P, n, 2^m) true valuations; reports: (R, 2^m). Empty: truthful on this grid."""
    profiles, reports = np.asarray(profiles, np.float64), np.asarray(reports, np.float64)
    P, n, size = profiles.shape
    chunk = max(1, 2_000_000 // (len(reports) * len(allocations(n, size.bit_length() - 1)) * n))  # bounds memory
    found = [_violations(profiles[lo:lo + chunk], reports, tol, lo) for lo in range(0, P, chunk)]
    return np.concatenate(found) if found else np.zeros((0, 4))


def _violations(profiles: np.ndarray, reports: np.ndarray, tol: float, offset: int) -> np.ndarray:
    P, n, _ = profiles.shape
    honest_b, honest_p, _ = vcg_batch(profiles)
    honest = np.take_along_axis(profiles, honest_b[..., None], axis=-1)[..., 0] - honest_p  # (P, n)
    found = []
    for i in range(n):
        lied = np.repeat(profiles[:, None], len(reports), axis=1)  # (P, R, n, 2^m)
        lied[:, :, i] = reports[None]
        b, p, _ = vcg_batch(lied)
        u = profiles[np.arange(P)[:, None], i, b[..., i]] - p[..., i]  # the TRUE value of what i gets
        gain = u - honest[:, i:i + 1]
        for pi, r in zip(*np.nonzero(gain > tol)):
            found.append((offset + pi, i, r, gain[pi, r]))
    return np.array(found, dtype=np.float64).reshape(-1, 4)
