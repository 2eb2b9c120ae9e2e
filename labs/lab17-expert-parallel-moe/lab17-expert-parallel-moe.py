# %% [markdown]
# # Lab 17: a dropless expert-parallel MoE (top-2 routing, variable-sized all-to-all)
#
# Chapter 17 builds the capacity-based MoE of GShard and Switch: every expert gets $C = \lceil C_f kT/E
# \rceil$ slots, so shapes are fixed, and whatever overflows a slot is **dropped**. Its research section
# points at the way out: MegaBlocks (Gale, Narayanan, Young and Zaharia, MLSys 2023) gives every expert
# exactly the tokens the router sends it, however many, so that **no token is dropped and no slot is
# padded**. Across ranks that means a *variable-sized* all-to-all: a rank cannot know how many rows it
# will receive until it is told, so a small exchange of counts goes first (the counts-then-rows pattern
# of `all_to_all_single` in Section 5 of the chapter). You build that layer: dropless, top-2
# token-choice routing with renormalised gates, experts placed on ranks by an arbitrary ownership map,
# and the Switch load-balancing loss over the **global** batch.
#
# **The layer.** Tokens x (T, d), router W_g (d, E) (no bias), E >= 2 experts, each a ReLU MLP
# `mlp_forward(params, x)[0]` (d -> hidden -> d).
#
# - P = softmax(x W_g) over the E experts (row by row);
# - each token t picks its **two** most probable experts, e1 then e2; probabilities that tie exactly go
#   to the **smaller expert id** (`np.argsort(-P, axis=1, kind="stable")[:, :2]`);
# - the gates are **renormalised over the two**: w1 = P[t, e1] / (P[t, e1] + P[t, e2]) and
#   w2 = P[t, e2] / (P[t, e1] + P[t, e2]);
# - y_t = w1 Expert_e1(x_t) + w2 Expert_e2(x_t), for every token: nothing is dropped, there is no
#   capacity;
# - L_aux = E * sum_i f_i * p_i with f_i = (assignments to expert i) / (2T) and p_i = (sum over tokens
#   of P[t, i]) / T, where T counts the tokens of **all** ranks (at least one token in all).
#
# **Expert parallelism.** K ranks; rank r holds its own tokens (T_r rows, possibly 0), a replica of W_g,
# the ownership map `owner` (owner[e] = the rank that holds expert e: any map, uneven, not contiguous; a
# rank may own no expert, and E < K is legal) and its experts as a dict `{expert id: params}`. Every
# pair of distinct ranks (r, j) exchanges exactly three messages each way, with `all_to_all` from
# `scaleoutai.collectives` (which sends one message to every other rank, empty or not):
#
# 1. **routing summary**: a (2, E) float64 array, whatever the tokens' dtype: row 0 counts r's
#    assignments per expert, row 1 sums r's router probabilities per expert. The receiver reads the
#    entries of its own experts in row 0 to learn how many rows r will send it (the counts step of a
#    variable-sized all-to-all), and the sum of all K summaries (added in rank order) gives the global
#    f and p of L_aux: the exchange doubles as the all-reduce of the loss;
# 2. **dispatch**: the rows of r's tokens routed to j's experts, one (n, d) array in the tokens' dtype,
#    ordered by expert id and, within one expert, by token: exactly the routed rows, no padding, no
#    tags (the receiver knows the layout from the summary). A token whose two experts both live on j is
#    sent twice, once per expert;
# 3. **combine**: j runs each of its experts **once** on all the rows it received for it (from every
#    sender, a grouped matrix product in the MegaBlocks spirit) and sends each sender its outputs back in
#    the order they came; r adds w * output into the row of the token, in the token's original order.
#
# `moe_dropless_ep(comm, tokens, router_W, owner, experts_shard)` returns `(y, aux)`: this rank's
# outputs, shape (T_r, d) and the tokens' dtype, and L_aux as a float, the same on every rank. Use
# `all_to_all` from `scaleoutai.collectives` and `mlp_forward` from `scaleoutai.nn`; the course's
# capacity-based layer, `scaleoutai.parallel.moe`, cannot be imported while the grader runs your
# notebook (`scaleoutai.parallel.moe_dense` can, but holds nothing of this layer).
#
# **What the grader checks** (K = 1 to 5, uneven tokens with empty ranks, uneven and scattered expert
# maps, ranks without experts and E < K, float32 and float64, router columns that tie exactly, seeded
# random cases, on the simulator and on 2 real processes): every rank's y against the grader's own
# dense dropless layer to |got - expected| <= atol + rtol·|expected| with (rtol, atol) =
# (1e-9, 1e-9·(1 + max|expected|)) in float64 and (1e-4, 1e-4·(1 + max|expected|)) in float32; L_aux on
# every rank to a relative 1e-9 (1e-4 in float32); and, from the grader's own trace, that each rank sends
# each other rank exactly 3 messages of (16E + 24) + (R_out·d·itemsize + 24) + (R_back·d·itemsize + 24)
# bytes in all, where R_out counts the assignments of its tokens to that rank's experts, R_back the
# assignments of that rank's tokens to its own experts, and 24 bytes is each message's header (dtype and a
# 2-D shape).
# Padding to a capacity, sending tags, or sending every token everywhere all show up in those bytes.

# %% tags=["parameters"]
K = 4  # smoke: 3
TOKENS = [40, 0, 25, 31]  # smoke: [7, 0, 5]
E = 6  # smoke: 4
D, HIDDEN = 8, 16  # smoke: 4, 6

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_to_all
from scaleoutai.nn import mlp_forward, mlp_init


# %% [markdown]
# ## Exercise 1: the router, on one rank
#
# Return each token's two experts (T, 2) in order of preference, their renormalised gates (T, 2) in the
# tokens' dtype, and the full probabilities P (T, E). It must work for T = 0.

# %%
def route_top2(tokens, router_W):
    """Top-2 token-choice routing: (experts (T, 2), renormalised gates (T, 2), probabilities (T, E))."""
    ### BEGIN SOLUTION
    logits = tokens @ router_W
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    top2 = np.argsort(-probs, axis=1, kind="stable")[:, :2]
    chosen = np.take_along_axis(probs, top2, axis=1)
    gates = chosen / chosen.sum(axis=1, keepdims=True)
    return top2, gates, probs
    ### END SOLUTION


# %% [markdown]
# ## Exercise 2: the dropless expert-parallel layer
#
# Follow the three steps above. Hints: list the assignments (token, expert, gate) of this rank sorted by
# expert, then token (`np.lexsort`); the destination of an assignment is `owner[expert]`; each received
# block is cut by the counts of the sender's summary; `np.add.at` adds two rows into one token.

# %%
def moe_dropless_ep(comm, tokens, router_W, owner, experts_shard):
    """Dropless top-2 MoE over K ranks: summaries, variable-sized dispatch, experts, combine; (y, L_aux)."""
    ### BEGIN SOLUTION
    size, me = comm.size, comm.rank
    n_experts = router_W.shape[1]
    owner = np.asarray(owner, dtype=np.int64)
    top2, gates, probs = route_top2(tokens, router_W)
    # this rank's assignments, sorted by expert id, then token: the layout of every dispatch block
    tok = np.repeat(np.arange(len(tokens)), top2.shape[1])
    exp = top2.reshape(-1)
    order = np.lexsort((tok, exp))
    tok, exp, gate = tok[order], exp[order], gates.reshape(-1)[order]
    dest = owner[exp]
    # step 1: the routing summary to every rank (counts per expert, probability sums per expert)
    summary = np.stack([np.bincount(exp, minlength=n_experts).astype(np.float64),
                        probs.sum(axis=0).astype(np.float64)])
    summaries = all_to_all(comm, [summary] * size)
    totals = np.sum(summaries, axis=0)  # rank order on every rank: the same loss everywhere
    n_tokens = totals[0].sum() / 2
    aux = float(n_experts * np.sum((totals[0] / (2 * n_tokens)) * (totals[1] / n_tokens)))
    # step 2: exactly the routed rows to each owner
    received = all_to_all(comm, [tokens[tok[dest == j]] for j in range(size)])
    mine = np.flatnonzero(owner == me)
    counts = np.array([[int(s[0, e]) for e in mine] for s in summaries], dtype=np.int64).reshape(size, len(mine))
    starts = np.cumsum(counts, axis=1) - counts
    outs = [np.empty_like(block) for block in received]
    for i, e in enumerate(mine):  # each local expert once, on its rows from every sender
        spans = [(j, int(starts[j, i]), int(starts[j, i] + counts[j, i])) for j in range(size)]
        rows = np.concatenate([received[j][a:b] for j, a, b in spans])
        if len(rows) == 0:
            continue
        out = mlp_forward(experts_shard[int(e)], rows)[0].astype(tokens.dtype)
        at = 0
        for j, a, b in spans:
            outs[j][a:b] = out[at:at + b - a]
            at += b - a
    # step 3: outputs back to the tokens' ranks, weighted into token order
    back = all_to_all(comm, outs)
    y = np.zeros_like(tokens)
    for j in range(size):
        sel = dest == j
        np.add.at(y, tok[sel], gate[sel, None] * back[j])  # a token may get two rows from one rank
    return y, aux
    ### END SOLUTION


# %% [markdown]
# ## Try it on the simulator
#
# Rank r keeps its tokens and the experts the map gives it (here rank 1 has no tokens and some ranks
# hold more experts than others). The check below compares with a one-process loop over tokens that
# uses your router, then prints the bytes each rank sent.

# %% tags=["demo"]
rng = np.random.default_rng(17)
router = rng.standard_normal((D, E)) * 1.5 / np.sqrt(D)
experts = [mlp_init([D, HIDDEN, D], seed=170 + e) for e in range(E)]
owner_map = np.array([(5 * e + 1) % K for e in range(E)])  # scattered, uneven when K does not divide E
x = rng.standard_normal((sum(TOKENS), D))
shards = np.split(x, np.cumsum(TOKENS)[:-1])


def ep_worker(comm):
    mine = {int(e): experts[e] for e in np.flatnonzero(owner_map == comm.rank)}
    return moe_dropless_ep(comm, shards[comm.rank], router, owner_map, mine)


try:
    res = cluster.run(ep_worker, K, backend="sim")
    top2, gates, probs = route_top2(x, router)
    dense = np.stack([sum(g * mlp_forward(experts[e], x[t:t + 1])[0][0] for e, g in zip(top2[t], gates[t]))
                      for t in range(len(x))])
    f = np.bincount(top2.ravel(), minlength=E) / (2 * len(x))
    aux_ref = E * float(np.sum(f * probs.mean(axis=0)))
    got = np.concatenate([v[0] for v in res.values])
    assert np.allclose(got, dense, rtol=1e-9, atol=1e-9), "outputs differ from the dense dropless layer"
    assert all(np.isclose(v[1], aux_ref, rtol=1e-9) for v in res.values), "L_aux differs"
    print(f"dropless EP equals the dense layer; L_aux = {aux_ref:.4f} on every rank; experts per rank "
          f"{np.bincount(owner_map, minlength=K).tolist()}; bytes sent per rank {[s.bytes_sent for s in res.stats]}")
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% [markdown]
# ## Grader entry point (given: leave this cell as it is)
#
# The grader hands your code plain arrays: the ids of this rank's experts and their weights stacked along a
# first axis. This adapter rebuilds `experts_shard`, calls your function and packs its answer in one
# float64 vector: L_aux, the itemsize of y's dtype, y's two dimensions, then y's entries.

# %%
def grader_moe_dropless(comm, tokens, router_W, owner, expert_ids, W0, b0, W1, b1):
    shard = {int(e): {"W0": W0[i], "b0": b0[i], "W1": W1[i], "b1": b1[i]} for i, e in enumerate(expert_ids)}
    y, aux = moe_dropless_ep(comm, tokens, router_W, owner, shard)
    y = np.asarray(y)
    shape = list(y.shape) if y.ndim == 2 else [-1, -1]
    size = y.dtype.itemsize if y.dtype.kind == "f" else -1
    return np.concatenate([[float(aux), size, *shape], y.astype(np.float64).ravel()])


# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
