"""Workloads and real processes for the fleet of Chapter 23 (Sections 4 and 7): multi-turn chats that share
system prompts (seeded), the brute-force prefix match the router's cache is tested against, and real
replica processes behind ``router.Router``."""
from __future__ import annotations

import heapq

import numpy as np

from .router import FleetRequest, Router, block_hashes, prepare


def prefix_workload(n: int, rate: float, n_system: int = 8, system_len: tuple[int, int] = (512, 2048),
                    user_len: tuple[int, int] = (32, 256), output_len: tuple[int, int] = (32, 256),
                    turns: float = 4.0, think: float = 20.0, shared: bool = True, vocab: int = 32000,
                    seed: int = 0) -> list[FleetRequest]:
    """n chat requests at about ``rate`` per second. Sessions start as a Poisson process; each picks one
    of ``n_system`` system prompts (Zipf-like popularity) and has a geometric number of turns (mean
    ``turns``) ``think`` seconds apart (exponential); turn k's prompt is the system prompt, then every
    earlier user message and answer, then the new message. ``shared=False``: every prompt is fresh
    random tokens with no system prompt and one turn (no two prompts share a block)."""
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_system + 1)
    pop /= pop.sum()
    turns = turns if shared else 1.0
    times: list[tuple[float, int, int]] = []  # (arrival, session, turn)
    later: list[float] = []  # a heap of the arrivals after the newest session's start
    t, s, before = 0.0, 0, 0
    while before < n:  # until n requests arrive before any later session could start
        t += rng.exponential(turns / rate)
        at = t
        for k in range(int(rng.geometric(1.0 / turns))):
            times.append((at, s, k))
            heapq.heappush(later, at)
            at += rng.exponential(think)
        while later and later[0] <= t:
            heapq.heappop(later)
            before += 1
        s += 1
    times.sort()
    times = times[:n]
    last = {}
    for _, ss, k in times:
        last[ss] = max(last.get(ss, 0), k)
    srng = np.random.default_rng([seed, 1])
    systems = [srng.integers(0, vocab, size=int(srng.integers(system_len[0], system_len[1] + 1)))
               for _ in range(n_system)]
    text: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for ss in sorted(last):  # each session's tokens from its own generator: independent of the cut at n
        r = np.random.default_rng([seed, 2, ss])
        tok = lambda lo_hi: r.integers(0, vocab, size=int(r.integers(lo_hi[0], lo_hi[1] + 1)))  # noqa: E731
        history = systems[r.choice(n_system, p=pop)] if shared else np.zeros(0, dtype=np.int64)
        for k in range(last[ss] + 1):
            prompt = np.concatenate([history, tok(user_len)])
            answer = tok(output_len)
            text[ss, k] = prompt, answer
            history = np.concatenate([prompt, answer])
    return [FleetRequest(i, float(a), text[ss, k][0].astype(np.int64), text[ss, k][1].astype(np.int64), ss)
            for i, (a, ss, k) in enumerate(times)]


def reference_prefix_blocks(sent: list[np.ndarray], prompt: np.ndarray, block_size: int) -> int:
    """Brute force: the longest common prefix of ``prompt`` with any of ``sent``, in whole blocks."""
    best = 0
    for s in sent:
        m = min(len(s), len(prompt))
        eq = np.flatnonzero(np.asarray(s[:m]) != np.asarray(prompt[:m]))
        best = max(best, (int(eq[0]) if eq.size else m) // block_size)
    return best


def run_prefix_replicas(comm, params: dict, prompts: list[np.ndarray], policies: list[str], wave: int = 4,
                        block_size: int = 16, max_imbalance: float = 10**9) -> dict[str, dict[str, np.ndarray]] | None:
    """Real replicas behind the router (Section 7): rank 0 routes with ``Router``, every other rank serves
    the NumPy decoder with a prefix cache of real K/V blocks and answers each prompt's first token.

    For each policy in turn (every replica starting with an empty cache), the router sends ``wave``
    prompts at a time (its load view counts them until their replies return) and a replica serves its
    prompts in order, prefilling only the tokens after its longest cached prefix. Rank 0 returns, per
    policy and prompt: replica, cached tokens, first token, compute seconds, and TTFT (the replica's
    finish minus the send, on the machine's monotonic clock, which all processes share)."""
    import time

    from .decoder import ContiguousCache, decode_step

    if comm.rank > 0:  # a replica: prompts in, [first token, cached tokens, compute ns, finish ns] out
        for _ in policies:
            store: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            while (prompt := comm.recv(0)).size:  # an empty prompt ends the policy's run
                t0 = time.monotonic_ns()
                hashes = block_hashes(prompt, block_size)
                best = next((i for i in range(len(hashes) - 1, -1, -1) if hashes[i] in store), -1)
                m = min((best + 1) * block_size, len(prompt) - 1)  # at least one token computes the logits
                cache = ContiguousCache(params, 1, len(prompt))
                if m:
                    K, V = store[hashes[best]]
                    cache.k[:, 0, :m], cache.v[:, 0, :m] = K[:, :m], V[:, :m]
                n = len(prompt) - m
                logits = decode_step(params, prompt[m:], np.arange(m, len(prompt)), cache,
                                     seqs=np.zeros(n, dtype=np.int64))
                kv = (cache.k[:, 0].copy(), cache.v[:, 0].copy())
                for h in hashes:
                    store.setdefault(h, kv)  # any prompt holding block h holds the same K/V up to it
                t1 = time.monotonic_ns()
                comm.send(np.array([int(np.argmax(logits[-1])), m, t1 - t0, t1], dtype=np.int64), 0)
        return None
    reqs = prepare([FleetRequest(i, 0.0, np.asarray(p, dtype=np.int64), np.zeros(1, dtype=np.int64))
                    for i, p in enumerate(prompts)], block_size)
    results = {}
    for policy in policies:
        router = Router(comm.size - 1, policy, cache_blocks=10**9, max_imbalance=max_imbalance)
        out = {k: np.zeros(len(reqs), dtype=np.int64) for k in ("replica", "cached", "first")}
        compute, ttft = np.zeros(len(reqs)), np.zeros(len(reqs))
        for lo in range(0, len(reqs), wave):
            sent = []
            for r in reqs[lo:lo + wave]:
                j = router.pick(r)
                sent.append((r, j, time.monotonic_ns()))
                comm.send(r.prompt, j + 1)
            for r, j, t in sent:  # a replica answers in the order it was sent to
                first, cached, ns, done = comm.recv(j + 1).tolist()
                router.finished(j, r)
                out["replica"][r.id], out["cached"][r.id], out["first"][r.id] = j, cached, first
                compute[r.id], ttft[r.id] = ns / 1e9, (done - t) / 1e9
        for j in range(1, comm.size):
            comm.send(np.zeros(0, dtype=np.int64), j)
        results[policy] = {**out, "compute": compute, "ttft": ttft}
    return results
