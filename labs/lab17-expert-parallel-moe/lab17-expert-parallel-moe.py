# %% [markdown]
# # Lab 17: expert-parallel MoE equals dense MoE, capacity drops included
#
# A mixture-of-experts layer routes every token to k of its E expert MLPs. Chapter 17 spreads the
# experts over K ranks (expert parallelism) and moves **tokens** to the experts with two all-to-alls:
# *dispatch* sends each token row to the rank that owns its expert, *combine* sends the expert outputs
# back. You write that layer and the grader checks it against the single-process layer
# `moe_forward_dense`, tokens dropped at capacity included.
#
# **The layer** (the same convention as `scaleoutai.parallel.moe.moe_forward_dense`, router bias 0):
#
# - router: P = softmax(x W_g) over the E experts, for x of shape (T, d) and W_g of shape (d, E);
# - each token picks its top-k experts by P (ties to the lower index:
#   `np.argsort(-P, axis=1, kind="stable")[:, :k]`), with gate g[t, e] = P[t, e];
# - capacity: each expert has C = ⌈C_f · k · T / E⌉ slots (`capacity(T, E, k, C_f)`), with T the
#   number of tokens **over all ranks**;
# - slots are handed out in a fixed priority: all first choices before all second choices, and within
#   one choice in global token order (rank 0's tokens, then rank 1's, ...). An assignment that gets slot
#   number C or later is **dropped**: it contributes nothing;
# - y_t = Σ over kept assignments (t, e) of g[t, e] · Expert_e(x_t), with Expert_e(x) =
#   `mlp_forward(experts[e], x)[0]` (a ReLU MLP d -> hidden -> d).
#
# **Expert parallelism.** Rank r holds its own tokens (T_r rows, possibly none), a replica of W_g, and
# the experts of block r of `np.array_split(np.arange(E), K)` (E need not divide by K; a rank may own
# no expert when K > E), as a dict `{expert id: params}`. Since slot numbers are global, each rank
# needs every rank's per-choice expert counts (a (k, E) array: an `all_gather` is enough), then:
#
# 1. **dispatch**: `all_to_all` the rows of kept assignments to the owners of their experts, with the
#    expert id of each row;
# 2. the owners run their experts on the rows they received;
# 3. **combine**: `all_to_all` the outputs back, and each rank adds g[t, e] · output into its y.
#
# Use `all_gather` and `all_to_all` from `scaleoutai.collectives`, `mlp_forward` from
# `scaleoutai.nn` and, from `scaleoutai.parallel.moe_dense`, only `capacity`, `expert_owners`,
# `moe_init` and `moe_forward_dense` (the reference). The course's own expert-parallel layer,
# `scaleoutai.parallel.moe`, cannot be imported while the grader runs your notebook. `moe_forward_ep(comm, tokens, router_W,
# experts_shard, k, capacity_factor)` returns this rank's y, of shape (T_r, d) and the dtype of tokens.
#
# **What the grader checks** (K = 1 to 5, C_f = 0.1 to 2.0, k = 1 and 2, uneven experts per rank,
# ranks without experts, ranks without tokens, experts whose router probabilities tie exactly, float32
# and float64, random cases, on the simulator and on 2 real processes): every rank's y equals the
# dense layer's rows for its tokens to |got - expected| <= atol + rtol·|expected| with (rtol, atol) =
# (1e-9, 1e-9·(1 + max|expected|)) in float64 and (1e-4, 1e-4·(1 + max|expected|)) in float32; and
# each rank sends at most
# (A_out + A_in)·(d·itemsize + 16) + 8·k·T + 8(K-1)(k+1)·E + 4(K-1)·24 bytes, where A_out counts the
# kept assignments of its tokens to other ranks' experts and A_in those of other ranks' tokens to its
# experts: token rows move once each way, plus small routing metadata, plus a 24-byte header (the
# message's dtype and shape, an array of at most 2 dimensions) on each of 4(K-1) messages: one all-gather
# of the counts and three all-to-alls.

# %% tags=["parameters"]
K = 4  # smoke: 2
TOKENS = 64  # smoke: 12
E = 6  # smoke: 3
TOP_K = 2  # smoke: 1
D, HIDDEN = 8, 16  # smoke: 4, 6

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_gather, all_to_all
from scaleoutai.nn import mlp_forward
from scaleoutai.parallel.moe_dense import capacity, moe_forward_dense, moe_init


# %%
def moe_forward_ep(comm, tokens, router_W, experts_shard, k, capacity_factor):
    """Expert-parallel MoE on this rank's tokens: route, dispatch (all-to-all), experts, combine."""
    ### BEGIN SOLUTION
    size, rank = comm.size, comm.rank
    n_experts = router_W.shape[1]
    owner_of = np.concatenate([np.full(len(b), j) for j, b in enumerate(np.array_split(np.arange(n_experts), size))])
    logits = tokens @ router_W
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    mine = np.stack([np.bincount(choice[:, c], minlength=n_experts) for c in range(k)])
    everyone = all_gather(comm, mine.reshape(1, -1)).reshape(size, k, n_experts)
    per_choice = everyone.sum(axis=0)
    cap = capacity(int(per_choice[0].sum()), n_experts, k, capacity_factor)
    # slots before mine: every earlier choice of every rank, and this choice of lower ranks
    taken = np.cumsum(per_choice, axis=0) - per_choice + everyone[:rank].sum(axis=0)
    slot = np.empty(choice.shape, dtype=np.int64)
    for c in range(k):
        seen = taken[c].copy()
        for t in range(len(tokens)):
            slot[t, c] = seen[choice[t, c]]
            seen[choice[t, c]] += 1
    kept = slot < cap
    gate = np.take_along_axis(probs, choice, axis=1)
    picks = [np.nonzero(kept & (owner_of[choice] == j)) for j in range(size)]
    rows_in = all_to_all(comm, [tokens[t] for t, _ in picks])
    ids_in = all_to_all(comm, [choice[t, c] for t, c in picks])
    outs = []
    for rows, ids in zip(rows_in, ids_in):
        out = np.zeros_like(rows)
        for e in np.unique(ids):
            hit = ids == e
            out[hit] = mlp_forward(experts_shard[int(e)], rows[hit])[0]
        outs.append(out)
    back = all_to_all(comm, outs)
    y = np.zeros_like(tokens)
    for (t, c), out in zip(picks, back):
        np.add.at(y, t, gate[t, c][:, None] * out)  # with k = 2 one token may get two rows from one rank
    return y
    ### END SOLUTION


# %% [markdown]
# Compare with one process. `moe_init` builds the router and the experts; rank r keeps its tokens and
# its block of experts. Watch how many assignments the capacity factor drops.

# %%
layer = moe_init(D, HIDDEN, E, seed=17)
layer["Wg"] = 3 * layer["Wg"]  # a sharper router: more imbalance, so capacity matters
rng = np.random.default_rng(17)
x = rng.standard_normal((TOKENS, D))
token_shards = np.array_split(x, K)
expert_blocks = np.array_split(np.arange(E), K)


def ep_worker(comm, cf):
    shard = {int(e): layer["experts"][e] for e in expert_blocks[comm.rank]}
    return moe_forward_ep(comm, token_shards[comm.rank], layer["Wg"], shard, TOP_K, cf)


try:
    for cf in (0.5, 1.0, 2.0):
        dense, cache = moe_forward_dense(layer, x, TOP_K, cf)
        res = cluster.run(ep_worker, K, backend="sim", args=(cf,))
        err = float(np.abs(np.concatenate(res.values) - dense).max())
        print(f"C_f={cf}: {cache['stats']['dropped']} of {TOKENS * TOP_K} assignments dropped, "
              f"largest difference from dense {err:.1e}, bytes sent per rank {[s.bytes_sent for s in res.stats]}")
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% [markdown]
# ## Grader entry point (given: leave this cell as it is)
#
# The grader hands your code plain arrays: the ids of this rank's experts and their weights stacked
# along a first axis. This adapter rebuilds `experts_shard` and calls your function.

# %%
def grader_moe_ep(comm, tokens, router_W, expert_ids, W0, b0, W1, b1, k, capacity_factor):
    experts = {int(e): {"W0": W0[i], "b0": b0[i], "W1": W1[i], "b1": b1[i]} for i, e in enumerate(expert_ids)}
    return moe_forward_ep(comm, tokens, router_W, experts, int(k), float(capacity_factor))


# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(moe_forward_ep)
