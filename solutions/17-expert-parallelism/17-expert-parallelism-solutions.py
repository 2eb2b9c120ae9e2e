# %% [markdown]
# # Chapter 17 solutions: Expert parallelism
#
# Worked solutions to the exercises of `chapters/17-expert-parallelism` (the instructor's manual, never
# in the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.
#
# Sizes are smaller than the chapter's ($T = 1024$ tokens, $H = 32$, 16 experts) to keep the file fast.

# %%
import math

import numpy as np

from scaleoutai import cluster, perf
from scaleoutai.nn import mlp_forward
from scaleoutai.parallel import moe

SEED = 0
T_TOK, H_D, HID, N_EXP, TOPK = 1024, 32, 64, 16, 2
rng = np.random.default_rng(SEED)
params = moe.moe_init(H_D, HID, N_EXP, seed=SEED)
tokens = rng.standard_normal((T_TOK, H_D))
skewed = {**params, "bg": np.where(np.arange(N_EXP) == 0, 2.0, 0.0)}  # the chapter's skewed router

# %% [markdown]
# ## Exercise 1 (coding): expert-choice routing
#
# **Answer.** In expert choice (Zhou et al. 2022) the roles flip: instead of each token picking its
# top-$k$ experts, each expert $e$ picks the $C = \lceil C_f\,kT/E\rceil$ tokens with the highest router
# probability $P_{t,e}$ and processes exactly those, and
# $y_t = \sum_{e:\,t \in \text{top}_C(e)} P_{t,e}\,\mathrm{FFN}_e(x_t)$. Every expert receives exactly $C$
# tokens, so the load is perfectly balanced by construction and **nothing can overflow or be dropped**;
# the price moves to the tokens: the number of experts per token is no longer fixed. On average a token
# gets $EC/T \approx C_f k$ experts, but popular tokens get many and **some tokens get none** (only the
# residual carries them). Below: the vectorised layer equals a loop over experts, every load is $C$, and
# a positive number of tokens is chosen by no expert.

# %%
def expert_choice_forward(p, x, k, cf):
    """Expert-choice MoE: each expert takes its top-C tokens by router probability; returns (y, chosen)."""
    T, E = len(x), len(p["experts"])
    P = moe.softmax(x @ p["Wg"] + p["bg"])
    C = min(moe.capacity(T, E, k, cf), T)
    chosen = np.argsort(-P, axis=0, kind="stable")[:C].T  # (E, C) token ids per expert
    y = np.zeros_like(x)
    for e in range(E):
        t = chosen[e]
        y[t] += P[t, e][:, None] * mlp_forward(p["experts"][e], x[t])[0]
    return y, chosen


def expert_choice_loop(p, x, k, cf):
    """The same layer one (expert, token) pair at a time, by explicit sorting of each expert's column."""
    T, E = len(x), len(p["experts"])
    P = moe.softmax(x @ p["Wg"] + p["bg"])
    C = min(moe.capacity(T, E, k, cf), T)
    y = np.zeros_like(x)
    for e in range(E):
        ranked = sorted(range(T), key=lambda t: (-P[t, e], t))[:C]
        for t in ranked:
            y[t] += P[t, e] * mlp_forward(p["experts"][e], x[t:t + 1])[0][0]
    return y


small = tokens[:96]
for cf in (1.0, 2.0):
    y_ec, chosen = expert_choice_forward(params, small, TOPK, cf)
    np.testing.assert_allclose(y_ec, expert_choice_loop(params, small, TOPK, cf), rtol=1e-12, atol=1e-12)
y_ec, chosen = expert_choice_forward(params, tokens, TOPK, 1.0)
C1 = moe.capacity(T_TOK, N_EXP, TOPK, 1.0)
per_expert = np.array([len(np.unique(c)) for c in chosen])
experts_per_token = np.bincount(chosen.ravel(), minlength=T_TOK)
assert np.all(per_expert == C1)  # every expert full, nothing dropped
assert experts_per_token.sum() == N_EXP * C1 == TOPK * T_TOK  # C_f = 1: on average k experts per token
n_none = int(np.sum(experts_per_token == 0))
assert n_none > 0
assert np.allclose(y_ec[experts_per_token == 0], 0.0)  # untouched tokens: only the residual remains
print(f"expert choice, C = {C1}: every expert holds {C1} tokens; experts per token from "
      f"{experts_per_token.min()} to {experts_per_token.max()}; {n_none} of {T_TOK} tokens get no expert")

# %% [markdown]
# ## Exercise 2 (analysis): capacity under skew, before and after balancing
#
# **Answer.** With $n_e$ the assignments routed to expert $e$ (top-$k$, before any drop) and $C$ slots
# per expert, the drops are exactly
#
# $$\text{dropped}(C) = \sum_e \max(0,\; n_e - C),$$
#
# a non-increasing function of $C$. The smallest $C$ with under 1% of the $kT$ assignments dropped is
# found from the sorted $n_e$, and the smallest capacity factor is the smallest $C_f$ with
# $\lceil C_f kT/E\rceil \ge C$, i.e. $C_f = C\,E/(kT)$. For the skewed router expert 0 receives a large
# share of all first choices, so $C_f$ must be several times 1; after the chapter's balancing steps
# on $L_{\text{aux}}$ the loads are close to $kT/E$ and $C_f$ falls near 1. The padding memory is the
# dispatch buffer, $E \cdot C \cdot H \cdot s$ bytes per layer (every slot is allocated whether used or
# not), so balancing saves $E\,(C_\text{skew} - C_\text{bal})\,H\,s$ bytes, printed below, the same
# factor in expert compute on padded hardware.

# %%
def assignments_per_expert(p, x, k):
    P = moe.softmax(x @ p["Wg"] + p["bg"])
    top = np.argsort(-P, axis=1, kind="stable")[:, 0:k]
    return np.bincount(top.ravel(), minlength=len(p["experts"]))


def min_capacity(n_e, budget):
    """Smallest C with sum max(0, n_e - C) <= budget (by scanning C)."""
    C = 0
    while np.maximum(n_e - C, 0).sum() > budget:
        C += 1
    return C


def balance(p, x, k, steps=60, lr=0.5):
    """The chapter's recipe: gradient steps on L_aux alone (zero upstream gradient)."""
    q = {**p, "Wg": p["Wg"].copy(), "bg": p["bg"].copy()}
    for _ in range(steps):
        y, c = moe.moe_forward_dense(q, x, k, 1.25)
        _, g = moe.moe_backward_dense(q, c, np.zeros_like(y), aux_coef=1.0)
        q["Wg"] -= lr * g["Wg"]
        q["bg"] -= lr * g["bg"]
    return q


budget = 0.01 * TOPK * T_TOK
balanced = balance(skewed, tokens, TOPK)
result2 = {}
for name, p in (("skewed", skewed), ("balanced", balanced)):
    n_e = assignments_per_expert(p, tokens, TOPK)
    C_min = min_capacity(n_e, budget)
    cf_min = C_min * N_EXP / (TOPK * T_TOK)
    assert moe.capacity(T_TOK, N_EXP, TOPK, cf_min) == C_min
    drops = moe.tokens_dropped(p, tokens, TOPK, [cf_min, cf_min * (C_min - 1) / C_min])
    assert drops[cf_min] <= budget < drops[cf_min * (C_min - 1) / C_min]  # the library agrees: minimal
    result2[name] = (C_min, cf_min, N_EXP * C_min * H_D * 8)
    print(f"{name:>8}: max n_e {n_e.max()} (balanced share {TOPK * T_TOK // N_EXP}); smallest C_f with < 1% "
          f"drops = {cf_min:.3f} (C = {C_min}); dispatch buffer {result2[name][2] / 1e3:.0f} kB")
saved = result2["skewed"][2] - result2["balanced"][2]
assert result2["balanced"][1] < result2["skewed"][1]
print(f"balancing saves {saved / 1e3:.0f} kB of padded slots per layer here "
      f"({1 - result2['balanced'][2] / result2['skewed'][2]:.0%})")

# %% [markdown]
# ## Exercise 3 (analysis): a bytes model that matches `bytes_sent` exactly
#
# **Answer.** Let $s$ be the bytes of a value (8 in float64), $n_{r\to j}$ the kept assignments rank $r$
# dispatches to rank $j$ and $n_{j\to r}$ those it receives. Rank $r$ sends, in one forward and backward:
#
# * count table: ring all-gather of a $(k, E)$ int64 block, $(K-1)\,kE \cdot 8$;
# * router probability sums: ring all-gather of $E$ values, $(K-1)\,E\,s$;
# * dispatch rows $\sum_{j\ne r} n_{r\to j} H s$ and their tags (expert, slot) as int64,
#   $\sum_{j\ne r} n_{r\to j}\cdot 2 \cdot 8$;
# * combine rows back, $\sum_{j \ne r} n_{j\to r} H s$;
# * backward: $dy$ rows out $\sum_{j\ne r} n_{r\to j} H s$, $dx$ rows back $\sum_{j\ne r} n_{j\to r} H s$;
# * the router's gradient, a ring all-reduce of $N = HE + E$ values: a reduce-scatter that sends every
#   block but block $r$ and an all-gather that sends every block but block $r+1$:
#   $(2N - |b_r| - |b_{r+1 \bmod K}|)\,s$ with $b$ the `np.array_split` blocks.
#
# The chapter's $4\frac{T}{K}k\frac{K-1}{K}Hs$ is the row part under uniform routing; tags, counts and the
# router add the rest. The model below is computed from the routing alone (the dense layer's `top` and
# `keep`, no EP run) and equals `bytes_sent` of every rank for every $K$.

# %%
def bytes_model(p, x, k, cf, K, s=8):
    """Bytes each of K ranks sends in moe_forward_ep + moe_backward_ep, from the dense routing."""
    E = len(p["experts"])
    _, c = moe.moe_forward_dense(p, x, k, cf)
    owner = moe.expert_owners(E, K)
    home = np.concatenate([np.full(len(b), r) for r, b in enumerate(np.array_split(np.arange(len(x)), K))])
    dest = owner[c["top"]]
    sent = np.zeros((K, K), dtype=np.int64)  # sent[r, j]: kept assignments from rank r to rank j
    np.add.at(sent, (np.repeat(home, k).reshape(-1, k)[c["keep"]], dest[c["keep"]]), 1)
    np.fill_diagonal(sent, 0)
    N = H_D * E + E
    blocks = [len(b) for b in np.array_split(np.arange(N), K)]
    out = []
    for r in range(K):
        rows_out, rows_in = sent[r].sum(), sent[:, r].sum()
        b = (K - 1) * k * E * 8 + (K - 1) * E * s
        b += rows_out * (2 * H_D * s + 16) + rows_in * 2 * H_D * s
        b += (2 * N - blocks[r] - blocks[(r + 1) % K]) * s if K > 1 else 0
        out.append(int(b))
    return out


def ep_run(comm, p, x, dy, k, cf):
    shard = moe.shard_experts(p, comm.size, comm.rank)
    xs, dys = np.array_split(x, comm.size)[comm.rank], np.array_split(dy, comm.size)[comm.rank]
    y, cache = moe.moe_forward_ep(comm, shard, xs, len(p["experts"]), k, cf)
    moe.moe_backward_ep(comm, shard, cache, dys, aux_coef=0.01)
    return y


dy = np.random.default_rng(SEED + 1).standard_normal((T_TOK, H_D))
for K in (1, 2, 3, 4, 5, 8, 16):
    res = cluster.run(ep_run, K, args=(params, tokens, dy, TOPK, 1.0))
    measured = [st.bytes_sent for st in res.stats]
    assert measured == bytes_model(params, tokens, TOPK, 1.0, K), K
print("bytes model == bytes_sent on every rank for K in 1, 2, 3, 4, 5, 8, 16 (C_f = 1, with drops)")

# %% [markdown]
# ## Exercise 4 (analysis): top-1 against top-2
#
# **Answer.** With $k = 1$ every token sends one row instead of two, so the row traffic of all four
# All-to-Alls halves (close to exactly: about half the remote rows, counted below from the router and
# from the EP run) and so does the expert compute: the step is shorter for every $K$. But **speedup
# and efficiency get worse**, not better: at $K = 8$ over NVLink $S_8$ falls from about 3.1 (top-2) to
# about 2.1 (top-1), and over 25 GB/s from 2.1 to 1.5. Two reasons:
#
# * **load imbalance**: the busiest rank sets the pace. With $k = 1$ each expert's load is a sum of
#   half as many assignments, and the second choices partly fill the experts the first choices
#   neglect, so the max/mean load over ranks is larger for top-1 (asserted below);
# * **fixed costs**: the $K-1$ latencies of each All-to-All, the count table and the barrier do not
#   shrink with $k$, so they are a larger share of a step that is half as long.
#
# So top-1 halves the bytes and the FLOPs per token, but the parallel efficiency of the layer drops;
# capacity factors and the balancing loss matter even more for top-1 (Switch Transformer).
#
# The simulation repeats section 7's production setting (per row $16H^2$ FLOP at 400 TFLOP/s, 8 KiB
# rows, 5 µs latency, 300 GB/s and 25 GB/s) with the routing of this file's router.

# %%
H_PROD, PEAK = 4096, 400e12
per_row = 16 * H_PROD ** 2 / PEAK


def timed(comm, p, x, k, cf, per_row):
    shard = moe.shard_experts(p, comm.size, comm.rank)
    xs = np.array_split(x, comm.size)[comm.rank].copy()
    _, c = moe.moe_forward_ep(comm, shard, xs, len(p["experts"]), k, cf)
    comm.compute(per_row * sum(c["stats"]["load"][e] for e in shard["experts"]))
    comm.barrier()


def fwd_only(comm, p, x, k, cf):
    shard = moe.shard_experts(p, comm.size, comm.rank)
    xs = np.array_split(x, comm.size)[comm.rank].copy()
    return moe.moe_forward_ep(comm, shard, xs, len(p["experts"]), k, cf)[1]["sel"]


KS4 = [1, 2, 4, 8]
summary = {}
for link in (300e9, 25e9):
    beta = (2 * H_PROD) / (8 * H_D) / link  # our rows priced as 8 KiB rows
    for k in (1, 2):
        times = {K: cluster.run(timed, K, args=(params, tokens, k, N_EXP / k, per_row),
                                network=cluster.Network(5e-6, beta)).sim_time for K in KS4}
        table = perf.scaling_table(times)
        summary[link, k] = {row["p"]: (row["time"], row["speedup"]) for row in table}
for k in (1, 2):  # row traffic: remote kept assignments, from the dense router and from the EP run
    for K in KS4[1:]:
        sel = cluster.run(fwd_only, K, args=(params, tokens, k, N_EXP / k)).values
        remote_ep = sum(len(t) for r, s in enumerate(sel) for j, (t, _) in enumerate(s) if j != r)
        P = moe.softmax(tokens @ params["Wg"] + params["bg"])
        top = np.argsort(-P, axis=1, kind="stable")[:, 0:k]
        home = np.concatenate([np.full(len(b), r) for r, b in enumerate(np.array_split(np.arange(T_TOK), K))])
        remote_brute = int(np.sum(moe.expert_owners(N_EXP, K)[top] != home[:, None]))
        assert remote_ep == remote_brute
        summary["remote", k, K] = remote_brute
for K in KS4[1:]:
    ratio = summary["remote", 1, K] / summary["remote", 2, K]
    assert 0.4 < ratio < 0.6  # about half the rows travel
for link in (300e9, 25e9):
    for K in KS4:
        t1, s1 = summary[link, 1][K]
        t2, s2 = summary[link, 2][K]
        print(f"{link / 1e9:>4.0f} GB/s K={K}: step top-1 {t1 * 1e6:8.1f} us (S={s1:.2f}), "
              f"top-2 {t2 * 1e6:8.1f} us (S={s2:.2f})")
        assert t1 < t2  # half the rows, half the expert work
    assert summary[link, 1][8][1] < summary[link, 2][8][1]  # worse speedup at k = 1
owner8 = moe.expert_owners(N_EXP, 8)
imbalance = {}
for k in (1, 2):
    rank_load = np.bincount(owner8, weights=assignments_per_expert(params, tokens, k), minlength=8)
    imbalance[k] = rank_load.max() / rank_load.mean()
print(f"busiest rank / mean at K = 8: top-1 {imbalance[1]:.2f}, top-2 {imbalance[2]:.2f}")
assert imbalance[1] > imbalance[2]

# %% [markdown]
# ## Exercise 5 (lab): a dropless expert-parallel MoE (Lab 17)
#
# The lab is `labs/lab17-expert-parallel-moe`. Its reference solution is the solution blocks of
# `labs/lab17-expert-parallel-moe/lab17-expert-parallel-moe.py`; the hidden tests, rubric and mutants
# are in `grading/lab17-expert-parallel-moe/`. The lab goes past the chapter's capacity layer to the
# MegaBlocks setting of Section 9: no capacity, nothing dropped, no padding.
#
# **Key ideas.** Route locally: softmax, top-2 over the expert axis with stable ties (smaller id), gates
# renormalised over the two. List the rank's assignments sorted by expert, then token. One all-to-all of a
# (2, E) float64 summary (assignments and probability sums per expert) tells every owner how many rows
# each sender will send (the counts step of a variable-sized all-to-all) and, summed in rank order, gives
# the global f and p of L_aux = E sum f_i p_i on every rank. Then one all-to-all of exactly the routed rows
# (no tags, no padding), each local expert once on all its rows, and one all-to-all of the outputs back,
# added with `np.add.at` (a token's two experts may live on one rank) in the tokens' order and dtype.
#
# **Mistakes the rubric catches.** (1) Routing: top-1 only, gates not renormalised (the course's
# convention), ties to the larger id (`top1_only`, `gates_not_renormalised`, `ties_to_larger_id`).
# (2) Combine: outputs written in expert order, fancy-index `+=` losing one of two rows from one rank, a
# float64 output (`outputs_in_expert_order`, `same_rank_pair_once`, `float64_output`). (3) The loss on the
# local batch or without E (`aux_local_batch`, `aux_missing_E`). (4) Right numbers, wrong traffic: padding
# blocks to a capacity or sending expert tags (`padded_to_capacity`, `expert_tags_sent`), checked by exact
# bytes per rank pair from the grader's trace. (5) The course's capacity layer pasted and adapted
# (`pasted_course`) or called through importlib (`library_answer`).
