"""Replicated model servers: arrivals, routing policies, hedged requests and tail latency (Chapter 23).

A discrete-event simulation of c replicas, each a single FIFO server. Requests arrive at given times
with given service times (a replica's ``slow`` factor stretches them); a router picks a replica when a
request arrives. Because each replica is FIFO, a request's finish time is fixed the moment it is
assigned: start = max(arrival, replica free), finish = start + service. That makes the simulation exact
and fast, and lets a hedge (a duplicate sent after ``hedge_after`` if the first copy has not finished)
be decided at its own time.

Policies: ``random``; ``round_robin``; ``least_outstanding`` (fewest requests assigned and not
finished); ``power_of_two`` (sample two replicas, take the less loaded: Mitzenmacher's power of two
choices); ``central_queue`` (one FIFO queue feeding whichever replica frees first: the M/M/c system).
A hedge goes to the least loaded replica other than the first copy's, whatever the policy.

Queueing references (exponential service of rate mu, Poisson arrivals of rate lambda, load
rho = lambda / (c mu)): with random routing each replica is M/M/1 at lambda / c and the sojourn time is
exponential with rate mu - lambda / c, so its p-quantile is -ln(1 - p) / (mu - lambda / c); the
central queue is M/M/c with Erlang C waiting probability and mean sojourn C / (c mu - lambda) + 1 / mu.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

POLICIES = ("random", "round_robin", "least_outstanding", "power_of_two", "central_queue")


@dataclass
class ServeResult:
    latency: np.ndarray        # finish of the first copy to finish - arrival, per request
    replica: np.ndarray        # replica of the first copy
    hedged: int                # duplicates sent
    busy: np.ndarray           # service seconds per replica (duplicates included)

    def percentile(self, p: float) -> float:
        return float(np.percentile(self.latency, p))


def simulate(arrivals: np.ndarray, services: np.ndarray, c: int, policy: str = "random",
             slow: dict[int, float] | None = None, hedge_after: float | None = None,
             hedge_services: np.ndarray | None = None, seed: int = 0) -> ServeResult:
    """Serve every request on c replicas under ``policy``; see the module docstring for the model."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if c < 1 or len(arrivals) != len(services):
        raise ValueError("c must be >= 1 and arrivals, services the same length")
    if hedge_after is not None and policy == "central_queue":
        raise ValueError("hedging needs a per-replica router; the central queue has no replica to pick")
    n = len(arrivals)
    factor = np.ones(c)
    for r, f in (slow or {}).items():
        factor[r] = f
    rng = np.random.default_rng(seed)
    free = np.zeros(c)                                   # when each replica's queue drains
    live: list[list[float]] = [[] for _ in range(c)]     # finish times not yet passed, per replica
    finish, replica = np.empty(n), np.empty(n, dtype=np.int64)
    busy = np.zeros(c)
    hedges: list[tuple[float, int]] = []
    extra = hedge_services if hedge_services is not None else services
    sent = 0

    def outstanding(t: float) -> np.ndarray:
        for q in live:
            while q and q[0] <= t:
                heapq.heappop(q)
        return np.array([len(q) for q in live])

    def pick(t: float, i: int, exclude: int = -1) -> int:
        """A replica for request i; a hedge (exclude >= 0) goes to the least loaded other replica."""
        if exclude < 0 and policy == "random":
            return int(rng.integers(c))
        if exclude < 0 and policy == "round_robin":
            return i % c
        if policy == "central_queue":
            return int(np.argmin(free))
        load = outstanding(t).astype(float)
        if exclude >= 0 and c > 1:
            load[exclude] = np.inf
        if policy == "least_outstanding" or exclude >= 0:
            return int(np.argmin(load))
        a, b = rng.choice(c, size=2, replace=c < 2)      # power of two choices
        return int(a if load[a] <= load[b] else b)

    def assign(t: float, j: int, s: float) -> float:
        start = max(t, free[j])
        free[j] = start + s * factor[j]
        busy[j] += s * factor[j]
        heapq.heappush(live[j], free[j])
        return free[j]

    def fire_hedges(until: float) -> None:
        """Send the hedges due by ``until``, in time order, for requests whose first copy is still running."""
        nonlocal sent
        while hedges and hedges[0][0] <= until:
            th, k = heapq.heappop(hedges)
            if finish[k] > th:
                j2 = pick(th, k, exclude=int(replica[k]))
                f2 = assign(th, j2, float(extra[k]))
                sent += 1
                if f2 < finish[k]:
                    finish[k], replica[k] = f2, j2

    for i in range(n):
        t = float(arrivals[i])
        fire_hedges(t)
        j = pick(t, i)
        finish[i], replica[i] = assign(t, j, float(services[i])), j
        if hedge_after is not None:
            heapq.heappush(hedges, (t + hedge_after, i))
    fire_hedges(math.inf)
    return ServeResult(finish - arrivals, replica, sent, busy)


def mm1_sojourn_quantile(p: float, lam: float, mu: float) -> float:
    """p-quantile of the M/M/1 FIFO sojourn time: Exp(mu - lam), so -ln(1 - p) / (mu - lam)."""
    if lam >= mu:
        raise ValueError(f"unstable queue: arrival rate {lam} >= service rate {mu}")
    return -math.log(1.0 - p) / (mu - lam)


def erlang_c(c: int, lam: float, mu: float) -> float:
    """Probability that an arrival waits in M/M/c (Erlang C), offered load a = lam / mu < c."""
    a = lam / mu
    if a >= c:
        raise ValueError(f"unstable queue: offered load {a:.3f} >= {c} servers")
    terms = sum(a ** k / math.factorial(k) for k in range(c))
    top = a ** c / math.factorial(c) * c / (c - a)
    return top / (terms + top)


def mmc_mean_sojourn(c: int, lam: float, mu: float) -> float:
    """Mean time in system of M/M/c: C(c, a) / (c mu - lam) + 1 / mu."""
    return erlang_c(c, lam, mu) / (c * mu - lam) + 1.0 / mu


def mmc_wait_quantile(p: float, c: int, lam: float, mu: float) -> float:
    """p-quantile of the M/M/c waiting time: P(W > t) = C exp(-(c mu - lam) t); 0 when p <= 1 - C."""
    C = erlang_c(c, lam, mu)
    return 0.0 if p <= 1.0 - C else math.log(C / (1.0 - p)) / (c * mu - lam)
