# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 17. Expert parallelism
#
# A mixture-of-experts (MoE) layer replaces one feed-forward network with $E$ of them and a small
# **router** that sends each token to only $k$ of the $E$. Parameters grow with $E$; the work per token
# grows only with $k$. The price is paid in communication: the experts no longer fit on one device, so
# they are spread over $K$ ranks, and every token has to travel to the rank that holds its experts and
# back, an **All-to-All** in each direction. This chapter builds the router, top-$k$ gating, the
# capacity factor $C_f$ and the load-balancing loss, checks a from-scratch expert-parallel layer
# (forward *and* backward, dropped tokens included) against the single-device MoE, counts the bytes,
# and then does the same exchange with `torch.distributed.all_to_all_single` on real processes.
#
# **Prerequisites:** Chapter 4 (All-to-All, all-gather and ring all-reduce, with $\alpha$-$\beta$ costs),
# Chapter 15 (data parallelism: the router here is a data-parallel parameter) and Chapter 16 (Model and
# sharded parallelism: the 16 bytes per parameter of mixed-precision Adam and why models outgrow a
# device); background: softmax, the feed-forward block of a transformer and backpropagation through it.

# %% tags=["parameters"]
TOKENS = 4096  # smoke: 256
D = 64  # smoke: 16
HIDDEN = 128  # smoke: 32
E = 16  # smoke: 8
TOP_K = 2
CAPACITY_FACTORS = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0]  # smoke: [0.5, 0.75, 1.0, 1.25, 2.0]
KS = [1, 2, 3, 4, 5, 8, 16]  # smoke: [1, 2, 3, 5]
BALANCE_STEPS = 60  # smoke: 25
SEED = 0

# %% [markdown]
# `TOKENS` is $T$, the tokens in one batch ($B \cdot S$ in the book's notation), `D` the model width
# $H$ (called `D` here to keep $H$ free), `HIDDEN` each expert's inner width, `E` the number of experts
# and `TOP_K` the $k$ experts each token uses. `KS` are the expert-parallel degrees (EP $= K$ ranks)
# we check; some do not divide $E$, so ranks hold different numbers of experts.
#
# ## 1. Motivation: which ceiling binds
#
# A dense transformer spends the same FLOPs on every parameter for every token. An MoE decouples the
# two: with $E$ experts and top-$k$ routing, the feed-forward block holds $E$ times the parameters but
# each token pays for $k$ of them. The **memory** ceiling binds first: the experts' weights (and their
# gradients and Adam state, $16$ bytes per parameter in mixed precision) outgrow one device long before
# the compute does. Expert parallelism spreads the experts over $K$ ranks.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, perf
from scaleoutai.collectives import all_to_all
from scaleoutai.parallel import moe
from scaleoutai.nn import mlp_forward, numerical_gradient

h = 4096  # a large model's width, FFN inner width 4h
ffn = 2 * h * 4 * h
print(f"{'E':>4} {'k':>2} {'FFN params':>12} {'active / token':>15} {'GB (16 B/param)':>16}")
for e_, k_ in [(1, 1), (8, 2), (64, 2), (256, 8)]:
    print(f"{e_:>4} {k_:>2} {e_ * ffn / 1e9:>11.2f}B {k_ * ffn / 1e9:>14.2f}B {16 * e_ * ffn / 1e9:>16.0f}")

# %% [markdown]
# With 64 experts one layer's experts need ~137 GB of training state, more than an 80 GB accelerator,
# while each token still does the work of just two FFNs. The experts must be split across devices;
# the router and attention are small and stay replicated (data-parallel).
#
# ## 2. Core concepts
#
# **Router.** A linear map and a softmax give each token $t$ a distribution over experts,
# $P_t = \mathrm{softmax}(x_t W_g + b_g)$. **Top-$k$ gating**: the token goes to its $k$ most probable
# experts and expert $e$'s output is weighted by the gate $g_{t,e} = P_{t,e}$:
# $y_t = \sum_{e \in \text{top}_k(t)} g_{t,e}\, \mathrm{FFN}_e(x_t)$.
#
# **Capacity.** Hardware wants fixed shapes, so each expert gets $C = \lceil C_f \cdot k T / E \rceil$
# slots. $kT/E$ is the load of a perfectly balanced router; the **capacity factor** $C_f$ is the
# head-room. Slots are filled in a fixed priority (all first choices before any second choice, tokens in
# order, as in GShard); an assignment that finds its expert full is **dropped**: it contributes nothing,
# and the residual connection around the layer carries the token through unchanged.
#
# **Load-balancing loss.** Nothing stops a router from sending everything to one expert. The Switch
# Transformer adds $L_{\text{aux}} = E \sum_i f_i\, p_i$, where $f_i$ is the fraction of the $kT$
# assignments routed to expert $i$ (counted, so not differentiable) and $p_i$ the mean router
# probability of expert $i$ (differentiable). Under uniform routing $f_i = p_i = 1/E$ and
# $L_{\text{aux}} = 1$; if one expert takes everything it approaches $E$.
#
# The smallest honest definition of all this is a loop over tokens. It is slow, and it is the
# reference the vectorised library must match:

# %%
def moe_loop(params, x, k, cf):
    """Top-k MoE one assignment at a time: first choices of all tokens, then second choices, ..."""
    T_, E_ = len(x), len(params["experts"])
    P = moe.softmax(x @ params["Wg"] + params["bg"])
    top = np.argsort(-P, axis=1, kind="stable")[:, :k]
    C = moe.capacity(T_, E_, k, cf)
    used, y = np.zeros(E_, dtype=int), np.zeros_like(x)
    for c in range(k):
        for t in range(T_):
            e = top[t, c]
            if used[e] < C:  # a free slot: the expert processes the token
                used[e] += 1
                y[t] += P[t, e] * mlp_forward(params["experts"][e], x[t:t + 1])[0][0]
    return y, used, P, top


rng = np.random.default_rng(SEED)
params = moe.moe_init(D, HIDDEN, E, seed=SEED)
x = rng.standard_normal((TOKENS, D))
for cf in (0.5, 1.0, 2.0):
    y_loop, used, P, top = moe_loop(params, x, TOP_K, cf)
    y_lib, cache = moe.moe_forward_dense(params, x, TOP_K, cf)
    st = cache["stats"]
    np.testing.assert_allclose(y_lib, y_loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(st["load"], used)
    f = np.bincount(top.ravel(), minlength=E) / (TOKENS * TOP_K)
    assert np.isclose(st["aux_loss"], E * np.sum(f * P.mean(axis=0)), rtol=1e-12)
    print(f"C_f={cf}: C={st['capacity']} slots/expert, dropped {st['dropped']} of {TOKENS * TOP_K} "
          f"assignments, L_aux={st['aux_loss']:.3f}")

# %% [markdown]
# The library's batched MoE (`moe_forward_dense`) agrees with the loop to $10^{-12}$, load per expert
# and aux loss included. Its backward pass is written by hand; a finite-difference check on a tiny
# layer (where no routing decision sits within $\epsilon$ of a tie) confirms the gradients of
# $\langle dy, y \rangle + 0.01\,L_{\text{aux}}$ for the router, one expert and the input:

# %%
tiny = moe.moe_init(3, 4, 3, seed=1)
xt = np.random.default_rng(2).standard_normal((6, 3))
dyt = np.random.default_rng(3).standard_normal((6, 3))


def objective(p, xx=xt):
    y_, c_ = moe.moe_forward_dense(p, xx, 2, 1.0)  # C = 4 < 6 first choices of some expert: drops happen
    return float(np.sum(y_ * dyt) + 0.01 * c_["stats"]["aux_loss"])


y_t, c_t = moe.moe_forward_dense(tiny, xt, 2, 1.0)
dx_t, g_t = moe.moe_backward_dense(tiny, c_t, dyt, aux_coef=0.01)
assert c_t["stats"]["dropped"] > 0
num_router = numerical_gradient(lambda q: objective({**tiny, **q}), {"Wg": tiny["Wg"], "bg": tiny["bg"]})
num_e0 = numerical_gradient(lambda q: objective({**tiny, "experts": [q, *tiny["experts"][1:]]}),
                            tiny["experts"][0])
num_x = numerical_gradient(lambda q: objective(tiny, q["x"]), {"x": xt.copy()})
for name, a, b in [("Wg", g_t["Wg"], num_router["Wg"]), ("bg", g_t["bg"], num_router["bg"]),
                   ("expert 0 W0", g_t["experts"][0]["W0"], num_e0["W0"]), ("x", dx_t, num_x["x"])]:
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=name)
print(f"hand-written gradients match finite differences ({c_t['stats']['dropped']} assignments dropped)")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Expert parallelism puts experts in contiguous blocks on $K$ ranks (`expert_owners`: with $E = 8$ and
# $K = 3$, ranks hold 3, 3 and 2 experts). Every rank holds a replica of the router and a shard of the
# tokens. One MoE layer then runs:
#
# 1. **route** locally; **all-gather** the $(k, E)$ count table so every rank knows the global slot of
#    each of its assignments (the capacity decision is global, so EP drops exactly what the dense layer
#    drops);
# 2. **dispatch**: All-to-All of the kept token rows to the ranks that own their experts;
# 3. **expert compute** on the received rows;
# 4. **combine**: All-to-All of the outputs back to the tokens' home ranks, weighted by the gates.
#
# The backward pass mirrors it: $dy$ rows go out (All-to-All), input gradients come back (All-to-All),
# expert gradients stay complete on their owner, and the router's gradient, a data-parallel parameter,
# is summed with a ring all-reduce. Four All-to-Alls per layer per step, each moving on average
# $\frac{T}{K}\, k\, \frac{K-1}{K}\, H s$ bytes out of every rank ($s$ bytes per value, 8 in float64).

# %%
for K_ in (2, 3, 5):
    owners = moe.expert_owners(E, K_)
    print(f"K={K_}: experts per rank {np.bincount(owners, minlength=K_).tolist()}")

# %% [markdown]
# ## 4. From scratch: an expert-parallel MoE equal to the dense one
#
# Read `moe.moe_forward_ep` in the order of Section 3: the router and the all-gathered count table give
# every assignment its global slot `pos`, `keep` drops what overflows the capacity, `sel[j]` lists the
# kept (token, choice) pairs whose expert lives on rank $j$, and two `all_to_all` calls carry the rows
# and their (expert, slot) tags; each local expert runs once on its slots, and a third `all_to_all`
# brings the outputs home to be weighted by the gates. `moe.moe_backward_ep` runs the same path in
# reverse and all-reduces the router's gradient. `all_to_all` itself is the pairwise exchange of
# Chapter 4: $K-1$ rounds, in round $s$ rank $r$ sends to $r+s$ and receives from $r-s$.

# %%
from scaleoutai.notebooks import show

show(moe.moe_forward_ep, moe.moe_backward_ep, all_to_all)

# %% [markdown]
# `moe_forward_ep` / `moe_backward_ep` run on the simulated cluster. The worker below gives each rank
# its (uneven) `np.array_split` share of the tokens and of the upstream gradient $dy$; we then reassemble
# the outputs and compare with the dense layer on the whole batch, at a capacity factor that drops
# tokens, for every $K$ in `KS`, in float64 and float32.

# %%
def ep_worker(comm, params, x, dy, k, cf):
    K, r = comm.size, comm.rank
    shard = moe.shard_experts(params, K, r)
    xs, dys = np.array_split(x, K)[r], np.array_split(dy, K)[r]
    y, cache = moe.moe_forward_ep(comm, shard, xs, len(params["experts"]), k, cf)
    dx, grads = moe.moe_backward_ep(comm, shard, cache, dys, aux_coef=0.01)
    sent = sum(len(t) for j, (t, _) in enumerate(cache["sel"]) if j != r)  # rows dispatched to others
    received = sum(len(tg) for j, tg in enumerate(cache["tags"]) if j != r)  # rows others dispatched here
    return y, dx, grads, cache["stats"], (sent, received)


CF_CHECK = 1.0
dy = np.random.default_rng(SEED + 1).standard_normal((TOKENS, D))
bytes_per_rank, payload_per_rank = {}, {}
for dtype, tol in [(np.float64, 1e-12), (np.float32, 2e-5)]:
    p_ = moe.moe_init(D, HIDDEN, E, seed=SEED, dtype=dtype)
    x_, dy_ = x.astype(dtype), dy.astype(dtype)
    y_ref, c_ref = moe.moe_forward_dense(p_, x_, TOP_K, CF_CHECK)
    dx_ref, g_ref = moe.moe_backward_dense(p_, c_ref, dy_, aux_coef=0.01)
    assert c_ref["stats"]["dropped"] > 0  # the check covers dropped assignments
    for K_ in KS:
        res = cluster.run(ep_worker, K_, args=(p_, x_, dy_, TOP_K, CF_CHECK), timeout=120)
        y_ep = np.concatenate([v[0] for v in res.values])
        dx_ep = np.concatenate([v[1] for v in res.values])
        assert y_ep.dtype == dtype and dx_ep.dtype == dtype
        np.testing.assert_allclose(y_ep, y_ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(dx_ep, dx_ref, rtol=tol, atol=tol)
        for r, v in enumerate(res.values):
            assert v[3]["dropped"] == c_ref["stats"]["dropped"]
            np.testing.assert_allclose(v[2]["Wg"], g_ref["Wg"], rtol=tol, atol=tol)  # all-reduced router grad
            np.testing.assert_allclose(v[2]["bg"], g_ref["bg"], rtol=tol, atol=tol)
            for e, g_e in v[2]["experts"].items():  # each expert's gradient, complete on its owner
                for key in g_e:
                    np.testing.assert_allclose(g_e[key], g_ref["experts"][e][key], rtol=tol, atol=tol)
        assert sorted(e for v in res.values for e in v[2]["experts"]) == list(range(E))
        if dtype == np.float64:
            bytes_per_rank[K_] = [s.bytes_sent for s in res.stats]
            # x and dy rows go out for what a rank dispatches; outputs and dx rows for what it received
            payload_per_rank[K_] = [2 * (v[4][0] + v[4][1]) * D * 8 for v in res.values]
print(f"expert-parallel forward + backward equal the dense MoE for K = {KS}, float64 and float32, "
      f"with {c_ref['stats']['dropped']} dropped assignments at C_f = {CF_CHECK}")

# %% [markdown]
# How many bytes did that cost? Each rank's traffic is dominated by the four All-to-Alls of token rows
# (the rest: slot tags, the count table, the router all-reduce). The model above predicts the row
# payload; the measured `bytes_sent` of the simulator's ranks sits slightly above it:

# %%
print(f"{'K':>3} {'mean bytes sent/rank':>21} {'row payload':>12} {'model 4(T/K)k(K-1)/K Hs':>24}")
model_bytes = {}
for K_ in KS:
    model_bytes[K_] = 4 * (TOKENS / K_) * TOP_K * (K_ - 1) / K_ * D * 8
    assert all(b >= p for b, p in zip(bytes_per_rank[K_], payload_per_rank[K_]))
    print(f"{K_:>3} {np.mean(bytes_per_rank[K_]):>21,.0f} {np.mean(payload_per_rank[K_]):>12,.0f} "
          f"{model_bytes[K_]:>24,.0f}")
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(KS, [np.mean(bytes_per_rank[k]) for k in KS], "o-", label="measured bytes sent per rank")
ax.plot(KS, [np.mean(payload_per_rank[k]) for k in KS], "s--", label="token-row payload")
ax.plot(KS, [model_bytes[k] for k in KS], ":", label=r"model $4\frac{T}{K}k\frac{K-1}{K}Hs$")
ax.set(xlabel="expert-parallel ranks K", ylabel="bytes per rank, fwd+bwd", title="All-to-All traffic")
ax.legend()
plt.show()

# %% [markdown]
# Per-rank traffic falls roughly as $1/K$ (each rank has fewer tokens) while the fraction that leaves
# the rank, $(K-1)/K$, rises. The payload sits a little below the model: with $C_f = 1$ some
# assignments are dropped and never travel.
#
# ### Tokens dropped versus the capacity factor
#
# The capacity factor trades memory and compute (padding slots) against dropped tokens. With a freshly
# initialised router the loads are already uneven, so $C_f = 1$ still drops some:

# %%
drops = moe.tokens_dropped(params, x, TOP_K, CAPACITY_FACTORS)
skewed = {**params, "bg": np.where(np.arange(E) == 0, 2.0, 0.0)}  # a router that favours expert 0
drops_skewed = moe.tokens_dropped(skewed, x, TOP_K, CAPACITY_FACTORS)
print(f"{'C_f':>5} {'C':>5} {'dropped (random router)':>24} {'dropped (skewed router)':>24}")
for cf in CAPACITY_FACTORS:
    n = TOKENS * TOP_K
    print(f"{cf:>5} {moe.capacity(TOKENS, E, TOP_K, cf):>5} {drops[cf]:>12} ({drops[cf] / n:6.1%}) "
          f"{drops_skewed[cf]:>12} ({drops_skewed[cf] / n:6.1%})")
assert all(drops[a] >= drops[b] for a, b in zip(CAPACITY_FACTORS, CAPACITY_FACTORS[1:]))  # monotone in C_f
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(CAPACITY_FACTORS, [drops[c] / (TOKENS * TOP_K) for c in CAPACITY_FACTORS], "o-", label="random router")
ax.plot(CAPACITY_FACTORS, [drops_skewed[c] / (TOKENS * TOP_K) for c in CAPACITY_FACTORS], "s-",
        label="router skewed to expert 0")
ax.set(xlabel="capacity factor $C_f$", ylabel="fraction of assignments dropped", title="Capacity vs drops")
ax.legend()
plt.show()

# %% [markdown]
# ### The load-balancing loss at work
#
# Start from the skewed router and take gradient steps on $L_{\text{aux}}$ alone (upstream gradient
# zero). Only $p_i$ carries gradient, $\partial L_{\text{aux}} / \partial P_{t,i} = E f_i / T$, so the
# overloaded experts' probabilities are pushed down hardest. Drops at $C_f = 1.25$ fall with it:

# %%
bal = {**skewed, "Wg": skewed["Wg"].copy(), "bg": skewed["bg"].copy()}
hist = []
for step in range(BALANCE_STEPS):
    y_b, c_b = moe.moe_forward_dense(bal, x, TOP_K, 1.25)
    st = c_b["stats"]
    hist.append((st["aux_loss"], st["f"].max(), st["dropped"] / (TOKENS * TOP_K)))
    _, g_b = moe.moe_backward_dense(bal, c_b, np.zeros_like(y_b), aux_coef=1.0)
    bal["Wg"] -= 0.5 * g_b["Wg"]
    bal["bg"] -= 0.5 * g_b["bg"]
hist = np.array(hist)
assert hist[-1, 0] < hist[0, 0] and hist[-1, 2] < hist[0, 2]
print(f"L_aux {hist[0, 0]:.2f} -> {hist[-1, 0]:.3f} (1 = perfectly balanced); max f_i {hist[0, 1]:.2f} -> "
      f"{hist[-1, 1]:.3f} (1/E = {1 / E:.3f}); dropped {hist[0, 2]:.1%} -> {hist[-1, 2]:.1%}")
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(hist[:, 0], label=r"$L_{aux}$")
ax.plot(hist[:, 1] * E, label=r"$E \max_i f_i$")
ax.plot(hist[:, 2] * 10, label="dropped fraction x 10")
ax.set(xlabel="gradient step on $L_{aux}$", title="Balancing a skewed router")
ax.legend()
plt.show()

# %% [markdown]
# ## 5. The same task with a production library: `all_to_all_single`
#
# `torch.distributed.all_to_all_single(output, input, output_split_sizes, input_split_sizes)` is the
# collective MoE frameworks call for dispatch and combine: one flat send buffer, cut into $K$ pieces of
# *different* lengths, one per destination. Each rank knows what it sends but not what it will receive,
# so a first, fixed-size All-to-All exchanges the counts. Gloo on CPU supports `all_to_all_single` with
# uneven splits (checked below); the list form `dist.all_to_all` on gloo insists on equal-sized tensors
# (it raises "invalid tensor size"), which is why MoE code uses the single-buffer form.
#
# The worker runs on 2 real processes: our `moe_forward_ep`, then our pairwise `all_to_all` of the rows,
# then a complete dispatch, expert compute and combine done with torch's collective alone. It returns
# both layers' outputs, and the notebook asserts that torch ran on a gloo group of 2, delivered exactly
# the rows ours does (every kept assignment once), and that both layers equal the dense MoE computed
# here in the notebook's own process.

# %%
def production_worker(comm, p, x_all, k, cf, repeats=5):
    import torch
    import torch.distributed as dist

    K, r = comm.size, comm.rank
    E_, d = len(p["experts"]), x_all.shape[1]
    xs = np.array_split(x_all, K)[r]
    shard = moe.shard_experts(p, K, r)
    y_ours, cache = moe.moe_forward_ep(comm, shard, xs, E_, k, cf)
    top, pos, gate, sel = cache["top"], cache["pos"], cache["gate"], cache["sel"]
    blocks = [xs[t] for t, _ in sel]
    rows_ours = all_to_all(comm, blocks)

    def a2a(blocks_out, width, dtype):
        """Uneven All-to-All with torch: counts first (fixed size), then one flat buffer."""
        send = torch.tensor([len(b) for b in blocks_out], dtype=torch.int64)
        recv = torch.empty(K, dtype=torch.int64)
        dist.all_to_all_single(recv, send)
        out = torch.empty((int(recv.sum()), width), dtype=dtype)
        flat = torch.from_numpy(np.concatenate(blocks_out).reshape(-1, width))
        dist.all_to_all_single(out, flat, recv.tolist(), send.tolist())
        return np.split(out.numpy(), np.cumsum(recv.tolist())[:-1])

    rows_torch = a2a(blocks, d, torch.float64)
    rows_match = len(rows_torch) == len(rows_ours) and all(np.array_equal(a, b) for a, b in zip(rows_torch, rows_ours))
    tags = a2a([np.stack([top[t, c], pos[t, c]], axis=1) for t, c in sel], 2, torch.int64)
    outs = [np.empty_like(rw) for rw in rows_torch]
    for e, pe in shard["experts"].items():  # gather each expert's rows from every source, run it once
        src = [(j, np.flatnonzero(tg[:, 0] == e)) for j, tg in enumerate(tags)]
        xe = np.concatenate([rows_torch[j][m] for j, m in src])
        ye = mlp_forward(pe, xe)[0]
        off = 0
        for j, m in src:
            outs[j][m] = ye[off:off + len(m)]
            off += len(m)
    back = a2a(outs, d, torch.float64)  # combine: outputs return to the tokens' home ranks
    y_torch = np.zeros_like(xs)
    for (t, c), o in zip(sel, back):
        np.add.at(y_torch, t, gate[t, c][:, None] * o)
    times = {"ours (send/recv)": [], "torch all_to_all_single": []}
    for _ in range(repeats):
        for name, fn in (("ours (send/recv)", lambda: all_to_all(comm, blocks)),
                         ("torch all_to_all_single", lambda: a2a(blocks, d, torch.float64))):
            comm.barrier()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    sent = {j: len(b) for j, b in enumerate(blocks)}
    return {"backend": dist.get_backend(), "world": dist.get_world_size(), "rows_match": rows_match,
            "rows_received": int(sum(len(rw) for rw in rows_torch)), "y_torch": y_torch, "y_ours": y_ours,
            "sent_rows": sent, "times": {n: float(np.median(v)) for n, v in times.items()}}


CF_PROD = 1.25
t0 = time.perf_counter()
prod = cluster.run(production_worker, 2, backend="process", timeout=120, quiet=True,
                   args=(params, x, TOP_K, CF_PROD))
y_dense_prod, c_dense_prod = moe.moe_forward_dense(params, x, TOP_K, CF_PROD)
kept = TOKENS * TOP_K - c_dense_prod["stats"]["dropped"]
assert [(v["backend"], v["world"]) for v in prod.values] == [("gloo", 2)] * 2  # torch.distributed really ran
assert all(v["rows_match"] for v in prod.values)  # torch delivered exactly our rows ...
assert sum(v["rows_received"] for v in prod.values) == kept  # ... every kept assignment once
y_torch_all = np.concatenate([v["y_torch"] for v in prod.values])
np.testing.assert_allclose(y_torch_all, np.concatenate([v["y_ours"] for v in prod.values]), rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(y_torch_all, y_dense_prod, rtol=1e-12, atol=1e-12)
for r, v in enumerate(prod.values):
    print(f"rank {r} dispatch rows per destination {v['sent_rows']}; median dispatch time: "
          + ", ".join(f"{n} {s * 1e3:.2f} ms" for n, s in v["times"].items()))
print(f"torch all_to_all_single on gloo (2 processes) delivered the same {kept} token rows as ours, and its "
      f"MoE layer equals ours and the dense one to 1e-12 ({time.perf_counter() - t0:.1f} s for the run)")

# %% [markdown]
# On two ranks both exchanges are a single message each way; torch adds the counts exchange, ours a
# header per message. On GPUs the same call runs over NCCL, and real MoE systems overlap it with the
# experts' compute of the previous micro-batch.
#
# ## 6. Failure modes and fault tolerance
#
# * **Overflow.** Too small a $C_f$ silently drops tokens (section 4); the layer still "works", the
#   loss just gets worse. Monitor the dropped fraction as a training metric.
# * **Router collapse and stragglers.** An unbalanced router makes the rank that owns the hot experts
#   do more work and receive more bytes, and every other rank waits for it at the combine. The
#   simulator shows it: with the skewed router one rank's expert load and incoming traffic dwarf the
#   others' (capacity grows with $C_f$ here so that nothing is dropped and the imbalance is visible).
# * **A lost rank loses its experts.** Unlike data parallelism, no other rank holds a copy, so a crash
#   cannot be absorbed by the survivors: the job stops and must restart from a checkpoint
#   (Chapter 18). The simulator turns the lost peer into an error instead of a hang.

# %%
def load_worker(comm, params, x, k, cf):
    shard = moe.shard_experts(params, comm.size, comm.rank)
    xs = np.array_split(x, comm.size)[comm.rank]
    _, c = moe.moe_forward_ep(comm, shard, xs, len(params["experts"]), k, cf)
    return int(sum(c["stats"]["load"][e] for e in shard["experts"]))


K_fail = 4 if E >= 4 else 2
for name, p_ in (("random router", params), ("skewed router", skewed)):
    res = cluster.run(load_worker, K_fail, args=(p_, x, TOP_K, E / TOP_K), timeout=60)
    load = np.array(res.values)
    recv = np.array([s.bytes_received for s in res.stats])
    assert load.sum() == TOKENS * TOP_K  # C_f = E/k: capacity T, nothing dropped
    print(f"{name}: expert rows per rank {load.tolist()} (max/mean {load.max() / load.mean():.2f}); "
          f"bytes received max/mean {recv.max() / recv.mean():.2f}")

try:
    cluster.run(ep_worker, 3, args=(params, x, dy, TOP_K, 1.25), faults=cluster.Faults(crash={1: 3}), timeout=60)
    raise AssertionError("a crashed rank must stop the expert-parallel layer")
except cluster.RankError as exc:
    print(f"rank 1 crashed mid-dispatch -> {type(exc).__name__}: {str(exc).splitlines()[0][:110]}")

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# Model one MoE layer's forward step on $K$ ranks by its critical path: the All-to-Alls plus the busiest
# rank's expert compute (`comm.compute` inside the simulator, with a 5 µs, 25 GB/s network), followed by
# a barrier because the next layer needs every token back. Two settings:
#
# * **this notebook's experts**, with the compute rate measured here (time one expert on a batch);
# * **a production-sized layer**: $H = 4096$ in bf16 (8 KiB per token row), experts $H \to 4H \to H$,
#   i.e. $16H^2 \approx 0.27$ GFLOP per row, at 400 TFLOP/s, once over 25 GB/s links (a 200 Gb/s
#   network between nodes) and once over 300 GB/s (NVLink inside a node). The simulator moves our small
#   rows, so $\beta$ is scaled by the ratio of row sizes: the same messages, priced as 8 KiB rows.
#
# $C_f = E/k$ here, so nothing is dropped and the busiest rank's load includes the real imbalance of
# this router.

# %%
rows = np.random.default_rng(0).standard_normal((TOKENS, D))
t_expert = perf.measure(lambda: mlp_forward(params["experts"][0], rows), warmup=1, repeats=5)
H_PROD, PEAK = 4096, 400e12
settings = {  # name: (seconds of expert compute per row, seconds per simulated byte)
    f"our experts (H={D}, measured)": (t_expert.median / TOKENS, 1 / 25e9),
    f"production layer, 25 GB/s links": (16 * H_PROD ** 2 / PEAK, (2 * H_PROD) / (8 * D) / 25e9),
    f"production layer, 300 GB/s NVLink": (16 * H_PROD ** 2 / PEAK, (2 * H_PROD) / (8 * D) / 300e9),
}


def timed_worker(comm, params, x, k, cf, per_row):
    shard = moe.shard_experts(params, comm.size, comm.rank)
    xs = np.array_split(x, comm.size)[comm.rank]
    _, c = moe.moe_forward_ep(comm, shard, xs, len(params["experts"]), k, cf)
    comm.compute(per_row * sum(c["stats"]["load"][e] for e in shard["experts"]))  # this rank's experts
    comm.barrier()  # the next layer needs every token back: wait for the slowest rank
    return None


from scaleoutai import capstone

p5 = capstone.lookup("aws-p5.48xlarge")  # 8 H100s per instance: bill one GPU's share per device
gpu_hour = p5.price_per_hour / p5.gpus
print(f"price per device-hour: {p5.instance_type} / {p5.gpus} GPUs = {gpu_hour:.2f} USD (list price of {p5.date})")
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, (per_row, beta) in settings.items():
    times = {}
    for K_ in KS:
        res = cluster.run(timed_worker, K_, args=(params, x, TOP_K, E / TOP_K, per_row),
                          network=cluster.Network(alpha=5e-6, beta=beta), timeout=60)
        times[K_] = res.sim_time
    print(f"{name}: {per_row * 1e9:.0f} ns of expert compute per row")
    print(f"{'K':>5} {'step (us)':>10} {'S_p':>6} {'E_p':>6} {'$ per 1M tokens':>16}")
    for row in perf.scaling_table(times):
        cost = perf.run_cost(gpu_hour, row["p"], row["time"]) / TOKENS * 1e6
        print(f"{row['p']:>5} {row['time'] * 1e6:>10.1f} {row['speedup']:>6.2f} {row['efficiency']:>6.2f} "
              f"{cost:>16.6f}")
    ax.plot(KS, [times[KS[0]] / times[k] for k in KS], "o-", label=name)
ax.plot(KS, KS, "k:", label="ideal")
ax.set(xlabel="expert-parallel ranks K", ylabel="speedup $S_p$", title="MoE layer step, simulated network")
ax.legend()
plt.show()

# %% [markdown]
# Our toy experts are far too small to pay for the trip: a row costs more to send than to compute,
# so expert parallelism only adds time. The production layer does $16H^2 \approx 0.27$ GFLOP per row
# (0.67 µs at 400 TFLOP/s) against $2H = 8$ KiB per row each way (0.33 µs at 25 GB/s): between nodes
# the two All-to-Alls cost as much as the experts and the speedup stalls; over NVLink it speeds up
# until the All-to-All's $K-1$ latencies and the load imbalance (the busiest rank sets the pace) bite.
# This is why expert parallelism is usually kept inside a node. Cost per token stays flat only while
# $E_p$ stays near 1, so balancing the router matters for the bill as much as for the loss. (Here the
# one-device baseline is assumed to hold all experts, which a real one could not: the memory ceiling
# of section 1, not speed, is usually why EP is used at all.)
#
# ## 8. Exercises
#
# 1. **Expert choice.** Implement expert-choice routing (each expert picks its top-$C$ tokens) on top of
#    `moe.softmax` and `moe.capacity`. Show that nothing is dropped but some tokens get no expert.
# 2. **Capacity sweep under skew.** For the skewed router, find the smallest $C_f$ with under 1% drops,
#    then the same after balancing. How much padding memory does balancing save?
# 3. **Bytes model.** Count the tag and router bytes as well and make the model match `bytes_sent`
#    exactly for every $K$ in `KS`.
# 4. **Top-1 vs top-2.** Repeat section 7 with $k = 1$. How do speedup and bytes change?
# 5. **Lab 17.** Drop nothing: a dropless expert-parallel layer with top-2 routing and renormalised
#    gates, whose all-to-all sends exactly the routed rows (counts first, no capacity, no padding), and
#    the load-balancing loss over the global batch (`labs/lab17-expert-parallel-moe`).
#
# ## 9. Research directions
#
# - **Routing that neither drops tokens nor needs a balancing loss.** Top-$k$ gating with a fixed
#   capacity drops tokens under skew, and the auxiliary loss that prevents collapse also pulls the router
#   away from the assignment the task wants. Routers that balance by construction exist, but which one
#   trains the best model per FLOP, and how balance and quality trade off, is not settled.
#   - Zhou et al., "Mixture-of-Experts with Expert Choice Routing", NeurIPS, 2022. Lets each expert
#     pick its top tokens, so loads are balanced by construction and tokens may get a variable number
#     of experts.
#   - Lewis, Bhosale, Dettmers, Goyal and Zettlemoyer, "BASE Layers: Simplifying Training of Large,
#     Sparse Models", ICML, 2021. Routes by solving a balanced linear assignment of tokens to experts,
#     removing the auxiliary loss and the capacity factor.
#   - DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv preprint, 2024. Balances expert load with a
#     per-expert bias that is nudged between steps and only shifts the top-$k$ choice, so no auxiliary
#     loss term competes with the language-modelling objective.
# - **Fixed shapes versus dynamic loads.** Capacity factors exist because accelerators and collectives
#   want static shapes; padding wastes compute and a small $C_f$ drops tokens. Kernels and collectives
#   that handle variable loads per expert efficiently change what $C_f$ should be, or remove it.
#   - Lepikhin et al., "GShard: Scaling Giant Models with Conditional Computation and Automatic
#     Sharding", ICLR, 2021. Top-2 gating with expert capacity, the slot order used in Section 2, and
#     sharding annotations that place experts across 2048 TPU cores.
#   - Gale, Narayanan, Young and Zaharia, "MegaBlocks: Efficient Sparse Training with
#     Mixture-of-Experts", MLSys, 2023. Recasts expert computation as block-sparse matrix products so
#     that no token is dropped and no slot is padded.
# - **The All-to-All on the critical path.** Section 7 showed that the exchange can cost as much as the
#   experts once it leaves a node. Overlapping it with compute, choosing the expert-parallel degree at
#   run time as loads shift, and placing experts to match the network topology are active areas.
#   - Hwang et al., "Tutel: Adaptive Mixture-of-Experts at Scale", MLSys, 2023. Switches parallelism and
#     pipelining strategy per iteration as the load changes and optimizes the All-to-All for large
#     clusters.
#   - He et al., "FasterMoE: Modeling and Optimizing Training of Large-Scale Dynamic Pre-Trained
#     Models", PPoPP, 2022. A performance model of MoE training, replication of hot experts ("shadowing")
#     and a topology-aware gate that reduces cross-node traffic.
#   - Li, Jiang, Zhu, Wang and Xu, "Accelerating Distributed MoE Training and Inference with Lina", USENIX
#     ATC, 2023. Lets the All-to-All pre-empt concurrent all-reduce traffic during training and, at
#     inference, gives popular experts more devices so the exchange stays balanced under skew.
# - **Scaling and stability of sparse models.** Sparse models reach a given quality with fewer FLOPs
#   per token, but they are harder to train stably, to fine-tune, and to compare with dense models at
#   equal cost; how their scaling behaviour depends on $E$, $k$ and the parallel layout is still mapped
#   out experiment by experiment.
#   - Shazeer et al., "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts Layer",
#     ICLR, 2017. The noisy top-$k$ gated MoE layer with thousands of experts between LSTM layers and
#     the first load-balancing losses.
#   - Fedus, Zoph and Shazeer, "Switch Transformers: Scaling to Trillion Parameter Models with Simple and
#     Efficient Sparsity", JMLR, 2022. Top-1 routing, the $E \sum_i f_i p_i$ balancing loss of Section 2,
#     and the precision and initialisation choices that keep large sparse models stable.
#   - Krajewski et al., "Scaling Laws for Fine-Grained Mixture of Experts", ICML, 2024. Adds expert size
#     (granularity) to the scaling law and finds that experts as wide as the dense feed-forward layer are
#     almost never the compute-optimal choice.
#   - Dai et al., "DeepSeekMoE: Towards Ultimate Expert Specialization in Mixture-of-Experts Language
#     Models", ACL, 2024. Many small routed experts plus a few always-active shared experts, reaching the
#     quality of larger GShard and dense models with a fraction of their compute.
#
# ## What's next
#
# Chapter 18 (Elastic and fault-tolerant training) takes up the failure mode of Section 6: with experts
# and sharded state spread over many ranks, no survivor holds a copy of what a lost rank held, so
# training must checkpoint, restart and re-shard onto however many machines remain. Chapter 19
# (Foundation-model training) then places expert parallelism beside data, tensor and pipeline parallelism
# on one device mesh and sizes a full run with the memory model of Chapter 16.
