"""Workload traces, each a pure function of its seed (Appendix D).

    poisson_arrivals, service_times  request arrivals and service demands        (Ch23 replicas)
    Request, request_trace           LLM requests: arrival iteration, prompt, output length (Ch24)
    JobTrace, job_trace              rigid batch jobs for a cluster scheduler     (Ch33)
    markov_link                      a link's bandwidth, a Markov chain over a few states (Ch34)

The schedulers, routers and servers that consume them stay in their parts (``infra.scheduling``,
``serving.replicas``, ``serving.llm``, ``infra.offload``) and import the record types from here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


def poisson_arrivals(n: int, rate: float, seed: int = 0) -> np.ndarray:
    """n arrival times of a Poisson process of ``rate`` per second: the cumulative sum of Exp(rate) gaps."""
    if n < 0 or rate <= 0:
        raise ValueError(f"need n >= 0 and rate > 0, got n={n}, rate={rate}")
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, size=n))


def service_times(n: int, mean: float, dist: str = "exp", sigma: float = 1.0, seed: int = 1) -> np.ndarray:
    """n service times with the given mean: ``exp``, ``lognormal`` (heavy tail, shape sigma) or ``const``."""
    rng = np.random.default_rng(seed)
    if dist == "exp":
        return rng.exponential(mean, size=n)
    if dist == "lognormal":
        return rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, size=n)
    if dist == "const":
        return np.full(n, float(mean))
    raise ValueError(f"dist must be 'exp', 'lognormal' or 'const', got {dist!r}")


@dataclass
class Request:
    """One LLM request: ``arrival`` is the server iteration at which it arrives."""

    id: int
    arrival: int
    prompt: np.ndarray
    max_new: int


def request_trace(n: int, rate: float, prompt_len: tuple[int, int] = (4, 24), output_len: tuple[int, int] = (4, 32),
                  vocab: int = 64, shared_prefix: int = 0, seed: int = 0) -> list[Request]:
    """n requests with Poisson arrivals at ``rate`` per iteration, prompt and output lengths uniform in
    the given inclusive ranges; the first ``shared_prefix`` prompt tokens are common to all (a system prompt)."""
    if n < 1 or rate <= 0 or min(prompt_len[0], output_len[0]) < 1:
        raise ValueError("request_trace needs n >= 1, rate > 0 and lengths of at least one token")
    rng = np.random.default_rng(seed)
    arrivals = np.floor(np.cumsum(rng.exponential(1.0 / rate, size=n))).astype(int)
    system = rng.integers(0, vocab, size=shared_prefix)
    out = []
    for i in range(n):
        own = rng.integers(0, vocab, size=int(rng.integers(prompt_len[0], prompt_len[1] + 1)))
        out.append(Request(i, int(arrivals[i]), np.concatenate([system, own]).astype(np.int64),
                           int(rng.integers(output_len[0], output_len[1] + 1))))
    return out


@dataclass(frozen=True)
class JobTrace:
    """Rigid jobs sorted by submit time; job j is row j. ``gpus`` is the job's total GPU count (accounting).

    Invariants, checked on construction: one entry per job in every field, submit >= 0 and
    non-decreasing, size >= 1 node, runtime > 0 and estimate >= runtime (the job is killed at its limit).
    """

    submit: np.ndarray
    size: np.ndarray
    runtime: np.ndarray
    estimate: np.ndarray
    user: np.ndarray
    gpus: np.ndarray

    def __post_init__(self) -> None:
        for name, dtype in (("submit", float), ("size", np.int64), ("runtime", float), ("estimate", float),
                            ("user", np.int64), ("gpus", np.int64)):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype).reshape(-1))
        n = len(self.submit)
        if any(len(a) != n for a in (self.size, self.runtime, self.estimate, self.user, self.gpus)):
            raise ValueError("every field of a trace needs one entry per job")
        if n and (np.any(np.diff(self.submit) < 0) or self.submit[0] < 0):
            raise ValueError("sort the jobs by submit time (submit >= 0, non-decreasing)")
        if np.any(self.size < 1) or np.any(self.runtime <= 0):
            raise ValueError("every job needs size >= 1 node and runtime > 0")
        if np.any(self.estimate < self.runtime):
            raise ValueError("a user estimate must be >= the runtime (the job is killed at its limit otherwise)")

    def __len__(self) -> int:
        return len(self.submit)

    def subset(self, idx: np.ndarray | slice) -> "JobTrace":
        """The jobs ``idx`` (keep them sorted by submit)."""
        return JobTrace(*(np.asarray(a)[idx] for a in (self.submit, self.size, self.runtime, self.estimate,
                                                         self.user, self.gpus)))


def job_trace(n_jobs: int, capacity: int = 128, load: float = 0.85, seed: int = 0, *,
              min_runtime: int = 10, max_runtime: int = 24 * 3600, estimate_unit: int = 60,
              n_users: int = 16, gpus_per_node: int = 4) -> JobTrace:
    """A seeded synthetic workload in the spirit of Lublin and Feitelson (2003), whole seconds throughout.

    Sizes: 20% serial, the rest log-uniform on [1, capacity] with 75% rounded to a power of two. Runtimes:
    log-uniform on [min_runtime, max_runtime]. Estimates: runtime times a factor 10^U(0,1) (20% exact),
    rounded up to ``estimate_unit``. Arrivals: Poisson, rate set so that offered load = ``load``
    (sum size x runtime per second / capacity). Users: Zipf-like. GPUs: 0, 1, 2 or 4 per node.
    """
    if n_jobs < 1 or capacity < 1 or not 0 < load or not 1 <= min_runtime <= max_runtime:
        raise ValueError("need n_jobs >= 1, capacity >= 1, load > 0 and 1 <= min_runtime <= max_runtime")
    rng = np.random.default_rng(seed)
    lg = rng.uniform(0.0, math.log2(capacity), n_jobs)
    size = np.where(rng.random(n_jobs) < 0.75, np.round(2.0 ** np.round(lg)), np.ceil(2.0 ** lg))
    size = np.where(rng.random(n_jobs) < 0.2, 1, np.clip(size, 1, capacity)).astype(np.int64)
    runtime = np.round(np.exp(rng.uniform(math.log(min_runtime), math.log(max_runtime), n_jobs)))
    factor = np.where(rng.random(n_jobs) < 0.2, 1.0, 10.0 ** rng.uniform(0.0, 1.0, n_jobs))
    estimate = np.maximum(runtime, np.ceil(runtime * factor / estimate_unit) * estimate_unit)
    mean_gap = float(np.mean(size * runtime)) / (load * capacity)
    submit = np.floor(np.concatenate([[0.0], np.cumsum(rng.exponential(mean_gap, n_jobs - 1))]))
    w = 1.0 / np.arange(1, n_users + 1)
    user = rng.choice(n_users, size=n_jobs, p=w / w.sum())
    gpus = size * rng.choice([0, 1, 2, gpus_per_node], size=n_jobs, p=[0.4, 0.2, 0.2, 0.2])
    return JobTrace(submit, size, runtime, estimate, user, gpus)


def markov_link(bandwidths: Any, steps: int, stay: float = 0.9, seed: int = 0, start: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """A seeded trace of link states: stay with probability ``stay``, else step to a neighbouring state
    (up or down with equal chance, reflected at the ends). Returns (state per step, bandwidth in B/s per step)."""
    bw = np.asarray(bandwidths, dtype=np.float64)
    if bw.ndim != 1 or bw.size < 1 or np.any(bw <= 0):
        raise ValueError(f"bandwidths must list positive bytes per second, got {bandwidths!r}")
    if not 0.0 <= stay <= 1.0 or int(steps) != steps or steps < 1:
        raise ValueError(f"need 0 <= stay <= 1 and steps >= 1, got stay={stay}, steps={steps}")
    rng = np.random.default_rng(seed)
    s = np.empty(int(steps), dtype=np.int64)
    s[0] = rng.integers(bw.size) if start is None else start
    for t in range(1, int(steps)):
        move = 0 if rng.random() < stay else (1 if rng.random() < 0.5 else -1)
        nxt = s[t - 1] + move
        s[t] = s[t - 1] - move if not 0 <= nxt < bw.size else nxt  # reflect at the ends
    if bw.size == 1:
        s[:] = 0
    return s, bw[s]
