"""Speculative decoding: a cheap draft model proposes k tokens, the target checks them in one pass
(Chapter 22, Sections 2, 4 and 7; Leviathan, Kalman and Matias, ICML 2023).

One round, with the target's next-token distributions p_0..p_k and the draft's q_1..q_k (both at the
same temperature) for the drafted tokens x_1..x_k, x_i ~ q_i:

    for i = 1..k: accept x_i with probability min(1, p_{i-1}(x_i) / q_i(x_i));
                  on the first rejection emit y ~ norm(max(0, p_{i-1} - q_i)) and stop;
    if all k are accepted, emit a bonus token y ~ p_k.

Invariant (tested statistically): every emitted token is distributed exactly as the target's own
sample, P(y) = min(p, q)(y) + (1 - sum min(p, q)) norm(max(0, p - q))(y) = p(y). Greedy (temperature 0)
keeps x_i while it equals argmax p_{i-1} and emits that argmax at the first mismatch, so greedy
speculative decoding emits the target's greedy tokens one for one (tested).

If each drafted token is accepted independently with probability alpha = E[sum_y min(p, q)(y)], a round
emits (1 - alpha^(k+1)) / (1 - alpha) tokens per target pass; with a draft step costing c target steps,
the expected speed-up is (1 - alpha^(k+1)) / ((1 - alpha)(c k + 1)) (Leviathan et al., Theorem 3.8).

The target's verify pass is one ``decode_step`` call over the k+1 positions of one sequence: rows at
consecutive positions of the same sequence write their keys first and then attend to everything up to
their own position, which is causal attention; the weights are read once for the k+1 tokens.
Rejected positions need no rollback: the cache is indexed by position, and reads stop at the length.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .decoder import ContiguousCache, Params, decode_step


def softmax_probs(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """softmax(logits / temperature) along the last axis (temperature > 0)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature} (use greedy=True)")
    z = np.asarray(logits, dtype=np.float64) / temperature
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def speculative_accept(p: np.ndarray, q: np.ndarray, drafted: np.ndarray, rng: np.random.Generator | None = None,
                       greedy: bool = False) -> tuple[list[int], int]:
    """The verification rule for one round: ``p`` (k+1, V) target distributions (or logits if greedy),
    ``q`` (k, V) draft distributions, ``drafted`` the k drafted tokens. Returns (emitted tokens, number of
    drafted tokens accepted); the emitted tokens are the accepted ones plus one correction or bonus."""
    k = len(drafted)
    if p.shape[0] != k + 1 or (not greedy and q.shape[0] != k):
        raise ValueError(f"need k+1 target rows and k draft rows for k={k}, got {p.shape[0]} and {q.shape[0]}")
    out: list[int] = []
    for i, x in enumerate(int(t) for t in drafted):
        if greedy:
            best = int(np.argmax(p[i]))
            if x != best:
                return out + [best], i
        else:
            if rng.random() >= min(1.0, p[i, x] / q[i, x]):
                residual = np.maximum(p[i] - q[i], 0.0)
                return out + [int(rng.choice(p.shape[1], p=residual / residual.sum()))], i
        out.append(x)
    bonus = int(np.argmax(p[k])) if greedy else int(rng.choice(p.shape[1], p=p[k]))
    return out + [bonus], k


@dataclass
class SpecStats:
    """Counts of one speculative generation: rounds (= target passes), tokens drafted, accepted and
    rejected (at most one rejection per round; drafts after it are never judged), tokens emitted;
    ``acceptance`` = accepted / (accepted + rejected) estimates the per-token alpha, ``tokens_per_pass`` =
    emitted / rounds (Leviathan et al.'s (1 - alpha^(k+1)) / (1 - alpha))."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    rejected: int = 0
    emitted: int = 0

    @property
    def acceptance(self) -> float:
        judged = self.accepted + self.rejected
        return self.accepted / judged if judged else float("nan")

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.rounds if self.rounds else float("nan")


def _feed(params: Params, cache: ContiguousCache, toks: list[int], start: int) -> np.ndarray:
    """One forward pass of tokens ``toks`` at positions start.. of sequence 0: logits (len(toks), V)."""
    n = len(toks)
    return decode_step(params, np.array(toks), np.arange(start, start + n), cache, seqs=np.zeros(n, dtype=int))


def speculative_generate(target: Params, draft: Params, prompt: np.ndarray, max_new: int, k: int = 4,
                         temperature: float = 1.0, greedy: bool = False, seed: int = 0
                         ) -> tuple[list[int], SpecStats]:
    """Generate ``max_new`` tokens after ``prompt`` from ``target`` with ``draft`` proposing ``k`` tokens
    per round. Each model keeps a ContiguousCache of every token but the last; a round first feeds the
    draft what it has not seen (one pass), drafts k tokens one by one, then runs the target once over its
    unseen tokens plus the k drafted ones (the first round's pass is also the prompt's prefill)."""
    if k < 1 or max_new < 1 or len(prompt) < 1:
        raise ValueError(f"need k >= 1, max_new >= 1 and a non-empty prompt, got k={k}, max_new={max_new}")
    if target["config"]["vocab"] != draft["config"]["vocab"]:
        raise ValueError("the draft and the target must share a vocabulary")
    max_len = min(target["config"]["max_len"], draft["config"]["max_len"])
    if len(prompt) + max_new + k > max_len:
        raise ValueError(f"prompt + max_new + k = {len(prompt) + max_new + k} exceeds max_len={max_len}")
    rng = np.random.default_rng(seed)
    seq = [int(t) for t in prompt]
    tc, dc = ContiguousCache(target, 1), ContiguousCache(draft, 1)
    t_len = d_len = 0  # positions each cache holds
    st = SpecStats()
    while len(seq) - len(prompt) < max_new:
        logits = _feed(draft, dc, seq[d_len:], d_len)[-1]
        d_len = len(seq)
        drafted, qs = [], []
        for i in range(k):
            if i:
                logits = _feed(draft, dc, [drafted[-1]], d_len)[0]
                d_len += 1
            if greedy:
                drafted.append(int(np.argmax(logits)))
            else:
                qs.append(softmax_probs(logits, temperature))
                drafted.append(int(rng.choice(len(qs[-1]), p=qs[-1])))
        z = _feed(target, tc, seq[t_len:] + drafted, t_len)[-(k + 1):]
        p = z if greedy else softmax_probs(z, temperature)
        emitted, n_acc = speculative_accept(p, np.array(qs), np.array(drafted), rng, greedy=greedy)
        t_len = len(seq) + n_acc  # the target cache is valid for the old tokens and the accepted drafts
        d_len = min(d_len, len(seq) + n_acc)
        seq += emitted
        st.rounds, st.drafted, st.accepted, st.emitted = st.rounds + 1, st.drafted + k, st.accepted + n_acc, \
            st.emitted + len(emitted)
        st.rejected += n_acc < k
    return seq[len(prompt):len(prompt) + max_new], st


def sample_generate(params: Params, prompt: np.ndarray, max_new: int, temperature: float = 1.0, seed: int = 0
                    ) -> list[int]:
    """The target alone: one decode step per token, sampling softmax(logits / temperature)."""
    rng = np.random.default_rng(seed)
    cache = ContiguousCache(params, 1)
    seq = [int(t) for t in prompt]
    logits = _feed(params, cache, seq, 0)[-1]
    for _ in range(max_new):
        p = softmax_probs(logits, temperature)
        seq.append(int(rng.choice(len(p), p=p)))
        logits = _feed(params, cache, seq[-1:], len(seq) - 1)[0]
    return seq[len(prompt):]


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 - alpha^(k+1)) / (1 - alpha): tokens a round emits if each draft is accepted with prob. alpha."""
    return float(k + 1) if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al.'s walltime improvement: tokens per pass / (c k + 1), c = draft step / target step."""
    return expected_tokens_per_pass(alpha, k) / (c * k + 1)


def acceptance_rate(p: np.ndarray, q: np.ndarray) -> float:
    """alpha = sum_y min(p(y), q(y)), averaged over rows: the chance the rule accepts a drafted token."""
    return float(np.minimum(p, q).sum(axis=-1).mean())


def draft_by_layer_skip(params: Params, n_layers: int) -> Params:
    """A draft that is the target's first ``n_layers`` blocks with its embeddings, final norm and head
    (shared arrays): self-speculative decoding by early exit, no second model to train or store."""
    if not 1 <= n_layers <= params["config"]["n_layers"]:
        raise ValueError(f"n_layers must lie in [1, {params['config']['n_layers']}], got {n_layers}")
    return dict(params, blocks=params["blocks"][:n_layers], config=dict(params["config"], n_layers=n_layers))


def damp_upper_blocks(params: Params, from_layer: int, eps: float) -> Params:
    """The decoder with blocks from ``from_layer`` on writing eps times their output into the residual
    stream (Wo, W2 and b2 scaled): a target that refines what its first blocks predict. Trained drafts are
    distilled to agree with their target; with random weights this builds in an agreement we can tune:
    ``draft_by_layer_skip(target, from_layer)`` agrees more as eps falls (eps = 0: identical logits)."""
    blocks = [dict(b, Wo=b["Wo"] * eps, W2=b["W2"] * eps, b2=b["b2"] * eps) if i >= from_layer else b
              for i, b in enumerate(params["blocks"])]
    return dict(params, blocks=blocks)


def modelled_speedup(alpha: float, k: int, target_step: float, draft_step: float, verify_step: Any = None
                     ) -> float:
    """Speed-up over plain decoding with step times from a model: a round costs k draft steps and one
    target pass over k+1 tokens (``verify_step``, default ``target_step``: memory-bound, the weights read
    once whatever k) and emits expected_tokens_per_pass(alpha, k) tokens; plain decoding pays target_step
    per token."""
    verify = target_step if verify_step is None else verify_step
    return expected_tokens_per_pass(alpha, k) * target_step / (k * draft_step + verify)
