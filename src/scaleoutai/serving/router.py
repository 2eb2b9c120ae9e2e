"""A fleet of LLM replicas behind a router: round robin, least loaded and cache-aware routing
(Chapter 23, Sections 3-4 and 7).

Each replica runs continuous batching (Chapter 24) on a modelled GPU. At every iteration boundary it
admits waiting requests in FIFO order while the batch, the prefill token budget and its KV memory
allow; one iteration prefills the admitted prompts whole (emitting each one's first token) and decodes
one token for every running sequence; its time is ``StepCost.seconds`` (``serving.step_cost``, the
one iteration-cost model of Part V: weights and KV reads against FLOPs, attention's included, a
prompt's cached prefix read and attended to). A replica keeps a **prefix cache** of KV blocks keyed by
chain hashes, h_i = hash(h_{i-1}, tokens of block i), so two prompts share block i exactly when they
share every token up to it; a prompt whose first m blocks are cached prefills only its other tokens (at
least one, to produce logits). The cache is LRU over blocks with the newest prefix's parents touched
last, so leaves are evicted before the prefixes they extend.

The router sees what a real one sees: the prompts it sent, the replies that came back. Policies:
``round_robin``; ``least_loaded`` (fewest outstanding tokens, prompt + output, of requests not yet
finished: join the shortest queue by work); ``cache_aware`` (SGLang's router, llm-d's prefix scorer):
the router keeps a copy of each replica's block hashes (same LRU, same capacity) and sends a request
to the replica holding its longest prefix, unless that replica's outstanding tokens exceed the least
loaded one's by more than ``max_imbalance``; with no prefix anywhere it is ``least_loaded``.

Event order, exact: arrivals in time order; before routing an arrival at t every replica runs the
iterations that start before t, so the router's view and the replicas' state are those of time t.
Invariants (tested): every request is served once with max_new tokens; a replica with max_batch = 1 is
a FIFO server (``replicas.simulate``); the cache's matches equal a brute-force longest common prefix.
"""
from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .step_cost import StepCost, attention_pairs

POLICIES = ("round_robin", "least_loaded", "cache_aware")


def block_hashes(tokens: np.ndarray, block_size: int) -> list[int]:
    """Chain hashes of the full blocks of ``tokens``: h_i = hash((h_{i-1}, block i)); equal h_i means an
    equal prefix of (i + 1) * block_size tokens (up to a 64-bit collision)."""
    out, h, w = [], 0, 8 * block_size
    raw = np.asarray(tokens, dtype=np.int64).tobytes()
    for i in range(len(raw) // w):
        h = hash((h, raw[i * w:(i + 1) * w]))
        out.append(h)
    return out


class PrefixCache:
    """An LRU set of block hashes holding at most ``capacity`` blocks (capacity 0: no cache)."""

    def __init__(self, capacity: int):
        self.capacity, self.blocks = capacity, OrderedDict()

    def match(self, hashes: list[int]) -> int:
        """How many leading blocks of ``hashes`` are cached."""
        n = 0
        for h in hashes:
            if h not in self.blocks:
                break
            n += 1
        return n

    def insert(self, hashes: list[int]) -> None:
        """Insert or touch every block, leaves first, so a parent is always newer than its children."""
        if self.capacity <= 0:
            return
        for h in reversed(hashes):
            self.blocks[h] = None
            self.blocks.move_to_end(h)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)


@dataclass
class FleetRequest:
    """One request: ``arrival`` in seconds, its prompt tokens and the tokens the model will answer."""

    id: int
    arrival: float
    prompt: np.ndarray
    output: np.ndarray
    session: int = -1
    hashes: list[int] = field(default_factory=list, repr=False)   # of the prompt, set by the fleet
    done_hashes: list[int] = field(default_factory=list, repr=False)  # of prompt + output

    @property
    def max_new(self) -> int:
        return len(self.output)


class Replica:
    """One continuous-batching replica (see the module docstring). Jobs are (request, mode): mode "full"
    prefills and decodes, "prefill" stops after the first token, "decode" arrives prefilled."""

    fast = True  # jump over runs of decode-only iterations (exact; False steps one by one, for the tests)

    def __init__(self, step: StepCost, max_batch: int = 64, kv_tokens: int = 10**9,
                 prefill_budget: int = 8192, cache_blocks: int = 0, block_size: int = 16):
        self.step, self.max_batch, self.kv_tokens, self.budget = step, max_batch, kv_tokens, prefill_budget
        self.cache, self.block_size = PrefixCache(cache_blocks), block_size
        self.clock, self.reserved = 0.0, 0
        self.waiting: list[tuple[FleetRequest, str, float]] = []
        self.running: list[list] = []  # [request, mode, context, tokens left]
        self.first: dict[int, float] = {}
        self.finish: dict[int, float] = {}
        self.cached: dict[int, int] = {}
        self.done_log: list[tuple[float, int]] = []  # (time, request id) in time order
        self.busy = 0.0

    def submit(self, req: FleetRequest, mode: str = "full", at: float = -math.inf) -> None:
        """Queue a job; it may be admitted at the first iteration boundary at or after ``at``."""
        if len(req.prompt) + req.max_new > self.kv_tokens:
            raise ValueError(f"request {req.id} needs {len(req.prompt) + req.max_new} KV tokens; a replica holds "
                             f"{self.kv_tokens}")
        bisect.insort(self.waiting, (req, mode, at), key=lambda w: w[2])  # FIFO by the time a job is ready

    def advance(self, until: float) -> None:
        """Run every iteration that starts before ``until`` (math.inf: until all work is done)."""
        while self.clock < until:
            soon = min((w[2] for w in self.waiting), default=math.inf)  # the first job that may start
            if not self.running and soon > self.clock:
                if min(soon, until) == math.inf:
                    return
                self.clock = min(soon, until)  # idle until a job is ready or the caller's time
                continue
            if self.fast and self.running and all(r[3] > 0 for r in self.running) and not self._admissible():
                # nothing changes but the clock and the contexts until a finish or a job is ready
                self._fast_forward(min(until, soon) if soon > self.clock else until)
                continue
            prefill, budget, pairs, prefix = [], self.budget, 0, 0
            while self.waiting and len(self.running) < self.max_batch:
                req, mode, at = self.waiting[0]
                if at > self.clock:
                    break
                need = len(req.prompt) + req.max_new
                new = 0
                if mode != "decode":
                    hit = min(self.cache.match(req.hashes) * self.block_size, len(req.prompt) - 1)
                    new = len(req.prompt) - hit
                if self.reserved + need > self.kv_tokens or (prefill and new > budget):
                    break
                self.waiting.pop(0)
                self.reserved += need
                budget -= new
                if mode == "decode":
                    self.running.append([req, mode, len(req.prompt) + 1, req.max_new - 1])
                else:
                    self.cached[req.id] = hit
                    prefill.append(new)
                    pairs, prefix = pairs + attention_pairs(new, hit), prefix + hit
                    self.running.append([req, mode, len(req.prompt), -1])  # -1: prefill in this iteration
            decoding = [r for r in self.running if r[3] > 0]
            self._tick(self.step.seconds(sum(prefill), len(decoding), sum(r[2] for r in decoding), pairs, prefix), 1)

    def _admissible(self) -> bool:
        if not self.waiting or len(self.running) >= self.max_batch or self.waiting[0][2] > self.clock:
            return False
        req = self.waiting[0][0]
        return self.reserved + len(req.prompt) + req.max_new <= self.kv_tokens

    def _fast_forward(self, until: float) -> None:
        """Run k decode-only iterations in one go: up to the first finish, or the last one starting before until."""
        b, m = len(self.running), min(r[3] for r in self.running)
        ctx = sum(r[2] for r in self.running) + b * np.arange(m)
        dts = self.step.decode_seconds(b, ctx)
        starts = self.clock + np.concatenate([[0.0], np.cumsum(dts)[:-1]])
        k = max(1, int(np.searchsorted(starts, until, side="left")))
        self._tick(float(np.sum(dts[:k])), k)

    def _tick(self, dt: float, k: int) -> None:
        """End k iterations lasting dt in all: first tokens, decoded tokens, finishes."""
        self.clock += dt
        self.busy += dt
        keep = []
        for r in self.running:
            req, mode = r[0], r[1]
            if r[3] == -1:  # prefilled now: the first token
                self.cache.insert(req.hashes)
                self.first[req.id] = self.clock
                r[2], r[3] = r[2] + 1, (0 if mode == "prefill" else req.max_new - 1)
            elif r[3] > 0:
                r[2], r[3] = r[2] + k, r[3] - k
            if r[3] == 0:
                self.finish[req.id] = self.clock
                self.reserved -= len(req.prompt) + req.max_new
                self.done_log.append((self.clock, req.id))
                if mode != "prefill":
                    self.cache.insert(req.done_hashes)
            else:
                keep.append(r)
        self.running = keep


@dataclass
class FleetResult:
    """Per request (indexed by request id): replica, arrival, first-token and finish times, cached tokens."""

    replica: np.ndarray
    arrival: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    cached: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    busy: np.ndarray  # GPU seconds per replica

    def ttft(self) -> np.ndarray:
        return self.first - self.arrival

    def tpot(self) -> np.ndarray:
        many = self.output_tokens > 1
        return (self.finish[many] - self.first[many]) / (self.output_tokens[many] - 1)

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens whose KV came from the prefix cache."""
        return float(self.cached.sum() / self.prompt_tokens.sum())

    @property
    def throughput(self) -> float:
        """Output tokens per second from the first arrival to the last finish."""
        return float(self.output_tokens.sum() / (self.finish.max() - self.arrival.min()))

    def summary(self) -> dict[str, float]:
        ttft, tpot = self.ttft(), self.tpot()
        return {"hit_rate": self.hit_rate, "ttft_p50": float(np.percentile(ttft, 50)),
                "ttft_p99": float(np.percentile(ttft, 99)), "tpot_p50": float(np.percentile(tpot, 50)),
                "tpot_p99": float(np.percentile(tpot, 99)), "throughput": self.throughput}


class Router:
    """The router's view: per replica, outstanding tokens of requests not yet finished and (for
    ``cache_aware``) a copy of the block hashes it believes the replica caches."""

    def __init__(self, c: int, policy: str, cache_blocks: int = 0, max_imbalance: float = 16384):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.c, self.policy, self.max_imbalance = c, policy, max_imbalance
        self.trees = [PrefixCache(cache_blocks) for _ in range(c)]
        self.load = np.zeros(c)
        self.count = 0

    def pick(self, req: FleetRequest) -> int:
        """The replica for ``req``: round robin, the least outstanding tokens, or the longest cached
        prefix unless its load exceeds the least loaded replica's by more than ``max_imbalance``."""
        if self.policy == "round_robin":
            j = self.count % self.c
        else:
            least = int(np.argmin(self.load))  # ties: lowest index
            j = least
            if self.policy == "cache_aware":
                match = np.array([t.match(req.hashes) for t in self.trees])
                best = int(np.lexsort((np.arange(self.c), self.load, -match))[0])  # longest, then least loaded
                if match[best] > 0 and self.load[best] - self.load[least] <= self.max_imbalance:
                    j = best
        self.count += 1
        self.load[j] += len(req.prompt) + req.max_new
        self.trees[j].insert(req.hashes)
        return j

    def finished(self, j: int, req: FleetRequest) -> None:
        """A reply came back from replica j: its load falls, and it now holds the answer's blocks too."""
        self.load[j] -= len(req.prompt) + req.max_new
        self.trees[j].insert(req.done_hashes)


def drive(requests: list[FleetRequest], fleet: list[Replica], router: Router, mode: str = "full") -> np.ndarray:
    """Route every request at its arrival and run the fleet to the end; returns the replica of each
    request, in the order given. Before each routing decision every replica has run the iterations that
    start before the arrival and the router has heard of every reply sent by then."""
    order = np.argsort([r.arrival for r in requests], kind="stable")
    seen = [0] * len(fleet)
    where = np.empty(len(requests), dtype=np.int64)
    by_id = {r.id: r for r in requests}
    for i in order:
        req = requests[i]
        t = req.arrival
        for j, rep in enumerate(fleet):
            rep.advance(t)
            while seen[j] < len(rep.done_log) and rep.done_log[seen[j]][0] <= t:
                router.finished(j, by_id[rep.done_log[seen[j]][1]])
                seen[j] += 1
        where[i] = router.pick(req)
        fleet[where[i]].submit(req, mode)
    for rep in fleet:
        rep.advance(math.inf)
    return where


def prepare(requests: list[FleetRequest], block_size: int) -> list[FleetRequest]:
    """Fill in the block hashes of each prompt and of prompt + output."""
    for r in requests:  # a chain hash depends only on its prefix: the prompt's are the first of the whole's
        r.done_hashes = block_hashes(np.concatenate([r.prompt, r.output]), block_size)
        r.hashes = r.done_hashes[:len(r.prompt) // block_size]
    return requests


def simulate_fleet(requests: list[FleetRequest], c: int, policy: str, step: StepCost,
                   max_batch: int = 64, kv_tokens: int = 10**9, prefill_budget: int = 8192,
                   cache_blocks: int = 4096, block_size: int = 16, max_imbalance: float = 16384) -> FleetResult:
    """Serve ``requests`` on c replicas under ``policy``; see the module docstring for the model."""
    if c < 1:
        raise ValueError(f"c must be >= 1 replicas, got {c}")
    ids = sorted(r.id for r in requests)
    if ids != list(range(len(requests))):
        raise ValueError("request ids must be 0..n-1, each once")
    if any(len(r.done_hashes) != (len(r.prompt) + r.max_new) // block_size for r in requests):
        prepare(requests, block_size)  # hashes missing, or made for another block size
    fleet = [Replica(step, max_batch, kv_tokens, prefill_budget, cache_blocks, block_size) for _ in range(c)]
    where = drive(requests, fleet, Router(c, policy, cache_blocks, max_imbalance))
    n = len(requests)
    res = FleetResult(np.empty(n, dtype=np.int64), np.empty(n), np.empty(n), np.empty(n),
                      np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
                      np.array([rep.busy for rep in fleet]))
    for i, r in enumerate(requests):
        rep = fleet[where[i]]
        res.replica[r.id], res.arrival[r.id] = where[i], r.arrival
        res.first[r.id], res.finish[r.id], res.cached[r.id] = rep.first[r.id], rep.finish[r.id], rep.cached[r.id]
        res.prompt_tokens[r.id], res.output_tokens[r.id] = len(r.prompt), r.max_new
    return res
