"""Multi-agent systems (Chapter 29): agents that bargain, agents that agree despite crashes, and a market.

Negotiation. Two agents split a pie of size 1 by alternating offers (Rubinstein 1982). In round t the
player t mod 2 proposes (x_1, 1 - x_1) and the other accepts or rejects; a deal in round t is worth
delta_i^t x_i to player i, no deal after the horizon T is worth 0. With T = infinity the unique subgame-
perfect equilibrium (SPE) is an immediate deal in which the first proposer gets
x* = (1 - delta_2) / (1 - delta_1 delta_2). With T rounds backward induction gives the proposer's share
v_t = 1 - delta_j v_{t+1} (j the responder, v_T = 0) and |v_0 - x*| <= (delta_1 delta_2)^floor((T-1)/2).
The heuristic alternative is a time-dependent concession (Faratin, Sierra and Jennings 1998).

Consensus. FloodSet (Lynch 1996, Section 6.2): each agent floods the set W of values it has seen to every
other agent for f + 1 synchronous rounds and decides min(W). With at most f crashes some round has no
crash, after which every survivor holds the same W: agreement, validity (the decision is some agent's
input) and termination. With f + 1 crashes, or with lost messages, agreement can fail.

Market. A continuous double auction with zero-intelligence traders (Gode and Sunder 1993): buyers with
values, sellers with costs, each trading one unit at random prices. Even so the market reaches most of
the competitive surplus; ``competitive_equilibrium`` gives the benchmark.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm, MessageLostError, PeerCrashedError

__all__ = ["rubinstein_split", "bargaining_shares", "Negotiator", "reference_negotiation", "negotiate",
           "run_negotiation", "reference_floodset", "floodset", "run_floodset", "crash_patterns",
           "consensus_properties", "competitive_equilibrium", "zi_market"]

_TOL = 1e-12  # shares computed as 1 - v and as delta * v differ by rounding; accept within it


def _deltas(deltas: Sequence[float]) -> tuple[float, float]:
    d = tuple(float(x) for x in deltas)
    if len(d) != 2 or not all(0 <= x < 1 for x in d):
        raise ValueError(f"give two discount factors 0 <= delta < 1, got {deltas!r}")
    return d  # type: ignore[return-value]


def rubinstein_split(delta1: float, delta2: float) -> float:
    """x* = (1 - delta_2) / (1 - delta_1 delta_2): the first proposer's share in the infinite-horizon SPE."""
    d1, d2 = _deltas((delta1, delta2))
    return (1 - d2) / (1 - d1 * d2)


def bargaining_shares(deltas: Sequence[float], horizon: int) -> np.ndarray:
    """Backward induction: v[t] = the share the proposer of round t takes (v[T - 1] = 1, v[T] = 0)."""
    d = _deltas(deltas)
    if int(horizon) < 1:
        raise ValueError(f"the horizon needs at least one round, got {horizon}")
    v = np.zeros(int(horizon) + 1)
    for t in range(int(horizon) - 1, -1, -1):
        v[t] = 1 - d[1 - t % 2] * v[t + 1]  # offer the responder exactly its discounted continuation
    return v


@dataclass(frozen=True)
class Negotiator:
    """One bargainer. kind "spe": backward induction (knows both deltas); "concession": demands
    s(t) = reserve + (1 - reserve)(1 - (t / (T - 1))^(1/e)) (e < 1 Boulware, e > 1 Conceder) and accepts
    what it would demand next round; "fixed": demands ``demand`` and accepts no less."""

    kind: str = "spe"
    reserve: float = 0.0
    e: float = 1.0
    demand: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in ("spe", "concession", "fixed"):
            raise ValueError(f"unknown negotiator kind {self.kind!r}: choose 'spe', 'concession' or 'fixed'")
        if not (0 <= self.reserve <= 1 and 0 <= self.demand <= 1 and self.e > 0):
            raise ValueError("a negotiator needs 0 <= reserve <= 1, 0 <= demand <= 1 and e > 0")

    def target(self, t: int, deltas: Sequence[float], horizon: int) -> float:
        """The share of the pie it asks for itself when it proposes in round t."""
        if self.kind == "spe":
            return float(bargaining_shares(deltas, horizon)[t])
        if self.kind == "fixed":
            return self.demand
        late = 1.0 if horizon <= 1 else min(t / (horizon - 1), 1.0)
        return self.reserve + (1 - self.reserve) * (1 - late ** (1 / self.e))

    def accepts(self, player: int, t: int, share: float, deltas: Sequence[float], horizon: int) -> bool:
        """Whether the responder ``player`` takes ``share`` in round t."""
        if self.kind == "spe":  # at least what proposing next round is worth today
            return share >= _deltas(deltas)[player] * bargaining_shares(deltas, horizon)[t + 1] - _TOL
        if self.kind == "fixed":
            return share >= self.demand - _TOL
        return share >= (self.target(t + 1, deltas, horizon) if t + 1 < horizon else self.reserve) - _TOL


def _deal(t: int | None, x1: float, deltas: Sequence[float]) -> dict[str, Any]:
    d = _deltas(deltas)
    if t is None:
        return {"round": None, "x1": None, "utility": (0.0, 0.0)}
    return {"round": t, "x1": x1, "utility": (d[0] ** t * x1, d[1] ** t * (1 - x1))}


def reference_negotiation(a: Negotiator, b: Negotiator, deltas: Sequence[float], horizon: int) -> dict[str, Any]:
    """Alternating offers on one machine; "messages" = 2 per round played (an offer and an answer)."""
    players = (a, b)
    for t in range(int(horizon)):
        p = t % 2
        mine = players[p].target(t, deltas, horizon)
        x1 = mine if p == 0 else 1.0 - mine
        if players[1 - p].accepts(1 - p, t, x1 if p == 1 else 1.0 - x1, deltas, horizon):
            return {**_deal(t, x1, deltas), "messages": 2 * (t + 1)}
    return {**_deal(None, 0.0, deltas), "messages": 2 * int(horizon)}


def negotiate(comm: Comm, me: Negotiator, deltas: Sequence[float], horizon: int) -> dict[str, Any]:
    """Per rank of 2: in round t rank t mod 2 sends [t, x_1] and the other answers [1] (accept) or [0].
    A partner that crashes ends the talks without a deal."""
    if comm.size != 2:
        raise ValueError(f"alternating offers is a two-agent protocol: run it on 2 ranks, not {comm.size}")
    p, other = comm.rank, 1 - comm.rank
    try:
        for t in range(int(horizon)):
            if t % 2 == p:
                mine = me.target(t, deltas, horizon)
                x1 = mine if p == 0 else 1.0 - mine
                comm.send(np.array([t, x1]), other)
                if comm.recv(other)[0] == 1.0:
                    return _deal(t, x1, deltas)
            else:
                _, x1 = comm.recv(other)
                ok = me.accepts(p, t, float(x1) if p == 0 else 1.0 - float(x1), deltas, horizon)
                comm.send(np.array([1.0 if ok else 0.0]), other)
                if ok:
                    return _deal(t, float(x1), deltas)
    except PeerCrashedError:
        pass  # the partner is gone: the talks end with no deal
    return _deal(None, 0.0, deltas)


def run_negotiation(a: Negotiator, b: Negotiator, deltas: Sequence[float], horizon: int,
                    **run_kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: player 1 (``a``, first proposer) on rank 0, player 2 on rank 1; adds "messages" sent."""
    _deltas(deltas)
    res = cluster.run(_negotiate_rank, 2, args=((a, b), tuple(deltas), int(horizon)), **{"timeout": 60, **run_kw})
    out = res.values[0] if isinstance(res.values[0], dict) else res.values[1]
    return {**out, "messages": sum(s.messages_sent for s in res.stats)}, res


def _negotiate_rank(comm: Comm, players: tuple[Negotiator, Negotiator], deltas: tuple, horizon: int) -> dict:
    return negotiate(comm, players[comm.rank], deltas, horizon)


def reference_floodset(values: Sequence[int], f: int, crash: dict[int, int] | None = None,
                       drop: dict[int, set[int]] | None = None, rounds: int | None = None) -> list[int | None]:
    """FloodSet on one machine with the simulator's fault semantics: rank i sends to the others in rank
    order; crash {i: n} stops i before its n-th send (0-based), drop {i: {n}} loses i's n-th send.
    Returns each rank's decision min(W), None for a crashed rank."""
    K, R = len(values), f + 1 if rounds is None else int(rounds)
    crash, drop = crash or {}, drop or {}
    W = [{int(v)} for v in values]
    sent, alive = [0] * K, [True] * K
    for _ in range(R):
        inbox: list[set[int]] = [set() for _ in range(K)]
        for i in range(K):
            for j in (j for j in range(K) if j != i and alive[i]):
                if sent[i] >= crash.get(i, sent[i] + 1):
                    alive[i] = False
                    break
                if sent[i] not in drop.get(i, ()):
                    inbox[j] |= W[i]
                sent[i] += 1
        for j in range(K):
            W[j] |= inbox[j]
    return [min(W[i]) if alive[i] else None for i in range(K)]


def floodset(comm: Comm, value: int, f: int, rounds: int | None = None) -> dict[str, Any]:
    """Per rank: f + 1 rounds (or ``rounds``) of sending sorted(W) to every other rank, then receiving
    from each; a silent peer (crashed, or its message lost) adds nothing. Decides min(W)."""
    if f < 0 or (rounds is not None and rounds < 0):
        raise ValueError(f"FloodSet needs f >= 0 (and rounds >= 0), got f={f}, rounds={rounds}")
    r, K = comm.rank, comm.size
    W, silent = {int(value)}, 0
    for _ in range(f + 1 if rounds is None else int(rounds)):
        msg = np.array(sorted(W), dtype=np.int64)
        for j in range(K):  # rank order: a crash in mid-round reaches a prefix of the peers
            if j != r:
                comm.send(msg, j)
        heard: set[int] = set()
        for j in range(K):
            if j != r:
                try:
                    heard.update(int(x) for x in comm.recv(j))
                except (PeerCrashedError, MessageLostError):
                    silent += 1  # the synchronous model's timeout: nothing from j this round
        W |= heard
    return {"decision": min(W), "W": sorted(W), "silent": silent}


def run_floodset(values: Sequence[int], f: int, rounds: int | None = None,
                 **run_kw: Any) -> tuple[list[int | None], Any]:
    """Driver: rank i starts with values[i]; returns each rank's decision (None: it crashed) and the run."""
    res = cluster.run(_floodset_rank, len(values), args=([int(v) for v in values], f, rounds),
                      **{"timeout": 60, **run_kw})
    return [v["decision"] if isinstance(v, dict) else None for v in res.values], res


def _floodset_rank(comm: Comm, values: list[int], f: int, rounds: int | None) -> dict:
    return floodset(comm, values[comm.rank], f, rounds)


def crash_patterns(K: int, crashes: int, rounds: int) -> Iterator[dict[int, int]]:
    """Every crash dict with at most ``crashes`` crashed ranks, each stopping before one of its
    rounds * (K - 1) sends: every round and every prefix of the peers reached in that round."""
    points = range(rounds * (K - 1))
    for c in range(min(crashes, K) + 1):
        for who in itertools.combinations(range(K), c):
            for when in itertools.product(points, repeat=c):
                yield dict(zip(who, when))


def consensus_properties(values: Sequence[int], decisions: Sequence[int | None]) -> dict[str, bool]:
    """Agreement (the survivors decide alike), validity (each decision is an input; all inputs v: v)
    and termination (every survivor decided) of one run."""
    alive = [d for d in decisions if d is not None]
    valid = all(d in set(values) for d in alive) and (len(set(values)) > 1 or all(d == values[0] for d in alive))
    return {"agreement": len(set(alive)) <= 1, "validity": valid, "termination": len(alive) > 0 or not values}


def competitive_equilibrium(values: Sequence[float], costs: Sequence[float]) -> dict[str, float]:
    """Where demand meets supply: quantity q, the price interval [low, high] that clears the market, its
    midpoint ``price`` and the largest surplus sum_{k <= q} (v_(k) - c_(k)) any allocation can reach."""
    v, c = np.sort(np.asarray(values, float))[::-1], np.sort(np.asarray(costs, float))
    if not len(v) or not len(c):
        raise ValueError("a market needs at least one buyer value and one seller cost")
    q = int(np.sum(v[:min(len(v), len(c))] >= c[:min(len(v), len(c))]))
    low = max(c[q - 1] if q else -np.inf, v[q] if q < len(v) else -np.inf)
    high = min(v[q - 1] if q else np.inf, c[q] if q < len(c) else np.inf)
    return {"quantity": q, "low": float(low), "high": float(high), "price": float((low + high) / 2),
            "surplus": float(np.sum(v[:q] - c[:q]))}


def zi_market(values: Sequence[float], costs: Sequence[float], rounds: int, seed: int = 0,
              price_max: float | None = None, constrained: bool = True) -> dict[str, Any]:
    """A continuous double auction with zero-intelligence traders (Gode and Sunder 1993), one unit each.
    Each round every trader still holding its unit, in a random order, posts a price: ZI-C buyers draw
    U[0, value], sellers U[cost, price_max]; ZI-U (``constrained=False``) draw U[0, price_max]. A bid at
    or above the standing ask trades at the ask (an ask at or below the standing bid, at the bid), after
    which the book is cleared; otherwise a better bid (ask) replaces the standing one."""
    v, c = np.asarray(values, float), np.asarray(costs, float)
    top = float(price_max if price_max is not None else max(v.max(), c.max()))
    rng = np.random.default_rng(seed)
    nb, active = len(v), np.ones(len(v) + len(c), dtype=bool)
    bid, ask, trades = None, None, []  # standing (price, trader)
    for _ in range(int(rounds)):
        for k in rng.permutation(len(active)):
            if not active[k]:
                continue
            if k < nb:
                p = rng.uniform(0.0, v[k] if constrained else top)
                if ask is not None and p >= ask[0]:
                    trades.append((ask[0], int(k), ask[1] - nb))
                    active[[k, ask[1]]], bid, ask = False, None, None
                elif bid is None or p > bid[0]:
                    bid = (p, k)
            else:
                p = rng.uniform(c[k - nb] if constrained else 0.0, top)
                if bid is not None and p <= bid[0]:
                    trades.append((bid[0], bid[1], int(k) - nb))
                    active[[k, bid[1]]], bid, ask = False, None, None
                elif ask is None or p < ask[0]:
                    ask = (p, k)
        if not active[:nb].any() or not active[nb:].any():
            break
    surplus = sum(v[b] - c[s] for _, b, s in trades)
    best = competitive_equilibrium(v, c)["surplus"]
    return {"trades": trades, "prices": np.array([t[0] for t in trades]), "surplus": float(surplus),
            "efficiency": float(surplus / best) if best > 0 else 1.0}
