# %% [markdown]
# # Chapter 15 solutions: Data parallelism
#
# Worked solutions to the exercises of `chapters/15-data-parallelism` (the instructor's manual, never in
# the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import hashlib

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

from scaleoutai import cluster, collectives, nn, perf
from scaleoutai.parallel import ddp

SEED = 0
rng = np.random.default_rng(SEED)

# %% [markdown]
# ## Exercise 1 (lab): hierarchical bucketed DDP on a multi-node cluster (Lab 15)
#
# The lab is `labs/lab15-bucketed-ddp`. Its reference solution is the solution blocks of
# `labs/lab15-bucketed-ddp/lab15-bucketed-ddp.py`; the hidden tests, rubric and mutants are in
# `grading/lab15-bucketed-ddp/`. The chapter's `bucketed_ddp_step` runs one flat ring over all $K$ ranks;
# the lab asks for the two-level all-reduce NCCL and Horovod use on nodes of $G$ ranks.
#
# **Key ideas.** Rank $r$ lives on node $r // G$; there are $N = \lceil K/G \rceil$ nodes (the last may be
# smaller) and each node's leader is its lowest rank. Buckets are cut as in the chapter (reverse
# registration order, closed once they hold at least `bucket_bytes`, frozen tensors left out). Per
# bucket: every non-leader sends its flat bucket to its leader, which adds them; the $N$ leaders run a
# ring reduce-scatter and all-gather among themselves on `np.array_split(bucket, N)` (uneven and empty
# chunks when $N \nmid n_b$ or $N > n_b$); each leader sends the sum back to its node. Only leaders cross
# nodes, each sending $2(N-1)\lceil n_b/N \rceil$ values per bucket instead of the flat ring's
# $2(K-1)/K$ of it across every node edge; the total over all ranks stays $2(K-1) n_b$. Training weights
# each shard's mean gradient by $n_k / B$, so it equals single-process SGD for any $K$, $G$ and $B < K$.
#
# **Mistakes the rubric catches.** (1) The wrong shape of the all-reduce, right sums: the course's flat
# ring (`pasted_course`), every rank joining the ring after the node reduce (`every_rank_in_ring`), the
# highest rank as leader (`leader_highest_rank`), a node count of $K // G$ that merges a smaller last node
# into the one before (`node_map_floor`), leaders that gather on leader 0 (`leaders_gather_to_first`);
# the grader's trace sees each of them. (2) Wrong sums: no broadcast back into the node
# (`broadcast_forgotten`), a ring that drops the $n_b \bmod N$ tail (`ring_drops_remainder`), leaders that
# average over nodes (`mean_over_nodes`), weights $1/K$ or `B // K` shards (`plain_mean`,
# `shard_floor_division`, `whole_batch_locally`). (3) Wrong buckets: forward order, closing only above
# the limit, one all-reduce per tensor, frozen tensors sent (`buckets_in_forward_order`,
# `bucket_strictly_over`, `one_allreduce_per_tensor`, `frozen_still_sent`); and details (`float64_result`,
# `empty_shard_unhandled`, `no_communication`, `library_answer`).

# %% [markdown]
# ## Exercise 2 (analysis): 100 bias-only layers and the latency share
#
# **Answer.** With $L$ tensors of $s$ bytes each ($N = Ls$ gradient bytes) packed into $n_b$ buckets,
# one ring all-reduce per bucket costs each rank
#
# $$T = \underbrace{2(K-1)\,n_b\,\alpha}_{\text{latency}} + \underbrace{2\tfrac{K-1}{K} N \beta}_{\text{bandwidth}},$$
#
# since the bandwidth term does not depend on how the bytes are grouped. The ratio is
# $\text{lat}/\text{bw} = n_b K \alpha / (N\beta) = K\alpha/(\bar s \beta)$ with $\bar s = N/n_b$ the mean
# bucket size. It falls below 10% when $\bar s > 10 K \alpha/\beta$: at $K = 8$ that is **80 times the
# crossover $\alpha/\beta$**, i.e. 800 kB with the chapter's $\alpha = 10^{-5}$ s and
# $\beta = 10^{-9}$ s/B ($\alpha/\beta = 10$ kB). A single message breaks even at $\alpha/\beta$; a
# ring all-reduce sends $2(K-1)$ messages of $s/K$ bytes each, so a bucket must be $K$ times larger,
# and 10 times more again to push latency to a tenth.
#
# With 100 biases of 8192 float32 (32 KiB each, $N = 3.28$ MB), naive DDP ($n_b = 100$) spends 2.44 times
# more time in latency than in bandwidth. In the power-of-two sweep below the first bucket size that
# passes the 10% test is 1 MiB: the greedy packer then makes 4 buckets (32 + 32 + 32 + 4 tensors), a mean
# of 819 kB, just above the 800 kB threshold; 512 KiB gives 7 buckets of 468 kB on average and a ratio of
# 0.17. Note a
# model whose whole gradient is below $10 K\alpha/\beta$ (100 biases of 64 numbers) can *never* pass the
# test: even one bucket is latency bound.

# %%
ALPHA, BETA, K2, WIDTH, LAYERS = 1e-5, 1e-9, 8, 8192, 100
net = cluster.Network(ALPHA, BETA)
biases = {f"b{i}": rng.standard_normal(WIDTH).astype(np.float32) for i in range(LAYERS)}
N_bytes = sum(v.nbytes for v in biases.values())


def allreduce_biases(comm, bucket_bytes):
    """One bucketed all-reduce of the 100 bias gradients; returns this rank's clock."""
    ddp.bucketed_ddp_step(comm, biases, bucket_bytes)
    return comm.clock


sweep = {}
for bb in [2 ** e for e in range(13, 23)]:
    run = cluster.run(allreduce_biases, K2, args=(bb,), network=net)
    n_b = len(ddp.make_buckets(biases, bb))
    assert all(s.messages_sent == 2 * (K2 - 1) * n_b for s in run.stats)
    lat = 2 * (K2 - 1) * n_b * ALPHA
    bw = 2 * (K2 - 1) / K2 * N_bytes * BETA
    assert abs(run.sim_time - (lat + bw)) < 1e-9  # the simulator follows the alpha-beta sum
    sweep[bb] = (n_b, lat / bw)
first_ok = min(bb for bb, (_, ratio) in sweep.items() if ratio < 0.1)
threshold = 10 * K2 * ALPHA / BETA
print(f"N = {N_bytes} B; latency/bandwidth per bucket size: "
      + ", ".join(f"{bb}: {r:.2f}" for bb, (_, r) in sweep.items()))
print(f"first bucket size with latency < 10% of bandwidth: {first_ok} B; 10 K alpha/beta = {threshold:.0f} B")
assert sweep[first_ok][1] < 0.1 and N_bytes / sweep[first_ok][0] >= threshold
smaller = max(bb for bb in sweep if bb < first_ok)
assert N_bytes / sweep[smaller][0] < threshold  # one step smaller fails
assert abs(sweep[8192][1] - LAYERS * K2 * ALPHA / (N_bytes * BETA)) < 1e-12  # naive: one tensor per bucket
assert sweep[8192][0] == LAYERS and sweep[2 ** 20][0] == 4

# %% [markdown]
# ## Exercise 3 (analysis): which learning-rate rule as $B = Kb$ grows
#
# **Answer.** The **linear** rule $\eta_K = K\eta_1$ keeps the loss per sample seen closest to $K = 1$,
# as long as $K\eta_1$ stays well inside the stable range; the constant rule is far too slow per sample
# ($K$ times fewer steps for the same samples, each no bigger) and the square root rule lies between.
#
# **Why.** One step at batch $Kb$ with rate $\eta$ moves by $-\eta\,\frac{1}{K}\sum_j g_j$, the average of
# $K$ micro-batch gradients at the *same* point. $K$ steps at batch $b$ with rate $\eta_1$ move by
# $-\eta_1\sum_j g_j(w_j)$ at points $w_j$ that differ by $O(\eta_1)$. If the gradient changes little
# over $K$ small steps, the two agree when $\eta = K\eta_1$ (Goyal et al. 2017). The square root rule
# keeps the *noise* of the update constant ($\mathrm{Var}(\eta\,\bar g) \propto \eta^2/B$), which
# matters for adaptive methods and the end of training, but for SGD's mean progress per sample the
# linear rule is the match. It breaks when $K\eta_1$ approaches the curvature limit $2/\lambda_{\max}$
# (then warm-up is needed) or when $B$ exceeds the critical batch size.
#
# Distance below: mean over the checkpoints of $|\log L_K - \log L_1|$ at the same number of samples.
# DDP gives the same parameters as the single device on the global batch (checked once on the
# simulator), so the sweep runs the single-device reference.

# %%
SIZES3, b_loc, SAMPLES, ETA1 = [8, 16, 1], 8, 4096, 0.01
teacher = nn.mlp_init([8, 16, 1], seed=7)
pool_X = rng.standard_normal((SAMPLES, 8))
pool_Y = nn.mlp_forward(teacher, pool_X)[0] + 0.05 * rng.standard_normal((SAMPLES, 1))
student0 = nn.mlp_init(SIZES3, seed=SEED)
eval_X, eval_Y = pool_X[:512], pool_Y[:512]


def eval_loss(p):
    return nn.mse_loss(nn.mlp_forward(p, eval_X)[0], eval_Y)[0]


def curve(K, lr, every=512):
    """Loss on a fixed set every ``every`` samples, training at B = K b on the sample stream."""
    B_glob = K * b_loc
    batches = [(pool_X[i:i + B_glob], pool_Y[i:i + B_glob]) for i in range(0, SAMPLES, B_glob)]
    p = ddp.copy_params(student0)
    out = []
    for s, (xb, yb) in enumerate(batches):
        _, g = ddp.mlp_mse(p, xb, yb)
        nn.sgd_step(p, g, lr)
        if ((s + 1) * B_glob) % every == 0:
            out.append(eval_loss(p))
    return np.log(out)


# DDP on 4 simulated ranks == the single device at B = 4 b, 5 steps
check = [(pool_X[i:i + 4 * b_loc], pool_Y[i:i + 4 * b_loc]) for i in range(0, 5 * 4 * b_loc, 4 * b_loc)]
want, _ = ddp.reference_train(check, student0, 5, 4 * ETA1)
got = cluster.run(ddp.train_ddp, 4, args=(check, student0, 5, 4 * ETA1)).values[0][0]
assert all(np.allclose(got[k], want[k], rtol=1e-10, atol=1e-12) for k in want)

base = curve(1, ETA1)
rules = {"constant": lambda K: ETA1, "sqrt": lambda K: ETA1 * np.sqrt(K), "linear": lambda K: ETA1 * K}
dist = {name: {K: float(np.mean(np.abs(curve(K, rule(K)) - base))) for K in (2, 4, 8)}
        for name, rule in rules.items()}
for name, d in dist.items():
    print(f"{name:>9}: " + ", ".join(f"K={K}: {v:.3f}" for K, v in d.items()))
for K in (2, 4, 8):
    assert dist["linear"][K] < dist["sqrt"][K] < dist["constant"][K]

# %% [markdown]
# ## Exercise 4 (coding): an overlap simulator for bucketed DDP
#
# **Answer.** Backward produces layer gradients in reverse order; layer $i$'s backward is
# `comm.compute(t_i)`. Bucket $j$ is ready at $R_j$, the backward time up to its last tensor. The
# communication stream starts bucket $j$ at $\max(R_j, \text{end}_{j-1})$ and it lasts
# $T_\text{ring}(s_j) = 2(K-1)(\alpha + \frac{s_j}{K}\beta)$, so
#
# $$\text{end}_j = \max(R_j, \text{end}_{j-1}) + T_\text{ring}(s_j), \qquad
#   T_\text{step} = \max(T_\text{bwd}, \text{end}_{n_b}).$$
#
# The rank function below realises this on the communicator: the backward stream's timeline is known in
# advance, so the rank advances its clock with `comm.compute` to the moment a bucket is ready, runs the
# real ring all-reduce, and finally waits for backward to finish. Its simulated time must equal the
# recursion above (an independent closed form). The step time against bucket size is U-shaped: tiny
# buckets pay $2(K-1)\alpha$ per bucket; one giant bucket cannot start before backward ends and pays
# $T_\text{bwd} + T_\text{comm}$; in between, the step approaches $\max(T_\text{bwd}, T_\text{comm})$
# plus the last bucket's all-reduce.

# %%
K4 = 4
layer_sizes = [256, 512, 512, 512, 512, 256, 64]
grads4 = {}
for i in range(len(layer_sizes) - 1):
    grads4[f"W{i}"] = np.zeros((layer_sizes[i], layer_sizes[i + 1]), np.float32)
    grads4[f"b{i}"] = np.zeros(layer_sizes[i + 1], np.float32)
T_BWD_PER_BYTE = 2e-9  # backward time of a tensor proportional to its size (say)
t_bwd = {k: v.nbytes * T_BWD_PER_BYTE for k, v in grads4.items()}


def overlapped_step(comm, bucket_bytes):
    """Per rank: backward as comm.compute, each bucket all-reduced once its last gradient exists."""
    ready, buckets = 0.0, ddp.make_buckets(grads4, bucket_bytes)
    for keys in buckets:
        ready += sum(t_bwd[k] for k in keys)  # backward of this bucket's tensors (reverse order)
        if ready > comm.clock:
            comm.compute(ready - comm.clock)  # wait for the gradients
        collectives.ring_allreduce(comm, np.concatenate([grads4[k].ravel() for k in keys]))
    total_bwd = sum(t_bwd.values())
    if total_bwd > comm.clock:
        comm.compute(total_bwd - comm.clock)
    return comm.clock


def overlap_model(bucket_bytes):
    """The recursion end_j = max(R_j, end_{j-1}) + T_ring(s_j); step = max(T_bwd, end)."""
    end, ready = 0.0, 0.0
    for keys in ddp.make_buckets(grads4, bucket_bytes):
        ready += sum(t_bwd[k] for k in keys)
        size = sum(grads4[k].nbytes for k in keys)
        end = max(ready, end) + perf.collective_time("ring_allreduce", size, K4, ALPHA, BETA)
    return max(end, sum(t_bwd.values()))


buckets_sweep = [2 ** e for e in range(10, 24)]
step_time = {}
for bb in buckets_sweep:
    sim = cluster.run(overlapped_step, K4, args=(bb,), network=net).sim_time
    assert abs(sim - overlap_model(bb)) < 1e-9 * max(1.0, sim)
    step_time[bb] = sim
T_b = sum(t_bwd.values())
T_c = perf.collective_time("ring_allreduce", sum(v.nbytes for v in grads4.values()), K4, ALPHA, BETA)
best = min(step_time, key=step_time.get)
print(f"T_bwd {T_b * 1e3:.3f} ms, T_comm (one bucket) {T_c * 1e3:.3f} ms; best bucket {best} B: "
      f"{step_time[best] * 1e3:.3f} ms; smallest {step_time[buckets_sweep[0]] * 1e3:.3f} ms, "
      f"largest {step_time[buckets_sweep[-1]] * 1e3:.3f} ms")
assert abs(step_time[buckets_sweep[-1]] - (T_b + T_c)) < 1e-12  # one bucket: no overlap
assert step_time[best] < step_time[buckets_sweep[0]] and step_time[best] < step_time[buckets_sweep[-1]]
assert step_time[best] >= max(T_b, T_c) - 1e-12  # the overlap can never beat the slower stream
fig, ax = plt.subplots(figsize=(6, 3.4))
ax.semilogx(buckets_sweep, [step_time[b] * 1e3 for b in buckets_sweep], "o-")
ax.axhline(max(T_b, T_c) * 1e3, ls=":", color="gray")
ax.set(xlabel="bucket size (bytes)", ylabel="step time (ms)", title="overlapped DDP step")
plt.close(fig)

# %% [markdown]
# ## Exercise 5 (analysis): a bf16 master copy, with and without stochastic rounding
#
# **Answer.** Storing the master weights in bf16 (here: float32 with the low 16 bits zeroed, i.e.
# round toward zero to an 8-bit mantissa) makes the run drift far from the float64 trajectory, orders of
# magnitude more than the fp32 master. The reason is the one the chapter gives for fp16, made worse by a
# 7-bit stored mantissa: an update $\eta g$ smaller than one unit in the last place of $w$
# ($\mathrm{ulp}(w) = 2^{-7}|w|$ roughly) is truncated away, every step, and truncation is also *biased*
# towards zero. **Stochastic rounding helps**: it rounds up with probability equal to the discarded
# fraction, so $\mathbb{E}[\mathrm{SR}(x)] = x$ and small updates survive on average; the drift falls
# substantially (though the per-step rounding noise remains, so it does not reach the fp32 master).
#
# Implementation: SR adds a uniform random 16-bit integer to the float32 bit pattern before zeroing the
# low 16 bits. Both roundings are checked: the result is exactly representable in bfloat16
# (`ml_dtypes`), truncation never increases $|x|$, and the mean of SR over many draws equals $x$.

# %%
def bf16_truncate(x):
    """float32 with the low 16 bits cleared: bf16 storage, rounded toward zero."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFF0000)).view(np.float32)


def bf16_stochastic(x, gen):
    """Unbiased stochastic rounding to bf16: add uniform noise below the cut, then truncate."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    noise = gen.integers(0, 1 << 16, size=bits.shape, dtype=np.uint64)
    return ((bits + noise) & np.uint64(0xFFFF0000)).astype(np.uint32).view(np.float32)


z = rng.standard_normal(1000).astype(np.float32)
for r in (bf16_truncate(z), bf16_stochastic(z, np.random.default_rng(1))):
    assert np.array_equal(r.astype(ml_dtypes.bfloat16).astype(np.float32), r)  # representable in bf16
assert np.all(np.abs(bf16_truncate(z)) <= np.abs(z))
x0 = np.float32(1.0) + np.float32(3e-3)  # between the bf16 neighbours 1.0 and 1.0078125
draws = bf16_stochastic(np.full(200_000, x0, np.float32), np.random.default_rng(2))
assert set(np.unique(draws).tolist()) == {1.0, 1.0078125}
assert abs(float(draws.mean()) - float(x0)) < 1e-4  # unbiased

SIZES5, LR5, STEPS5 = [32, 64, 64, 16], 2e-3, 60
p5 = nn.mlp_init(SIZES5, seed=SEED)
data5 = [(rng.standard_normal((120, 32)), rng.standard_normal((120, 16))) for _ in range(3)]


def drift(store):
    """Max |w - w_fp64| per step when the master is kept by ``store`` (gradients in float32)."""
    ref = {k: v.copy() for k, v in p5.items()}
    master = {k: store(v.astype(np.float32)) for k, v in p5.items()}
    gaps = []
    for s in range(STEPS5):
        x, y = data5[s % 3]
        _, g64 = ddp.mlp_mse(ref, x, y)
        nn.sgd_step(ref, g64, LR5)
        _, g = ddp.mlp_mse(master, x.astype(np.float32), y.astype(np.float32))
        master = {k: store(master[k] - np.float32(LR5) * g[k].astype(np.float32)) for k in master}
        gaps.append(max(float(np.abs(master[k] - ref[k]).max()) for k in ref))
    return gaps


sr_gen = np.random.default_rng(3)
gaps5 = {"fp32 master": drift(lambda v: v), "bf16 truncated": drift(bf16_truncate),
         "bf16 stochastic": drift(lambda v: bf16_stochastic(v, sr_gen))}
print({k: f"{v[-1]:.2e}" for k, v in gaps5.items()})
assert gaps5["fp32 master"][-1] < gaps5["bf16 stochastic"][-1] < gaps5["bf16 truncated"][-1]

# %% [markdown]
# ## Exercise 6 (coding): fail loudly when ranks disagree on the parameters
#
# **Answer.** Before the first step every rank hashes the ordered list of (name, shape, dtype) of its
# parameters with a hash that is the same in every process (SHA-256, not Python's salted `hash`),
# keeps 8 bytes of it as an int64, and all-gathers it: one ring all-gather of $K$ numbers,
# $K-1$ messages per rank. If the $K$ values are not all equal, every rank raises the same error
# naming the ranks that differ, so the job stops before any step instead of training replicas that
# silently stop being copies. This is what torch DDP does at construction. The check costs one small
# collective per job, nothing per step. Note the hash must cover the *order* too: the chapter's
# failure has the same names and shapes on both ranks, only listed in another order.

# %%
def layout_hash(params):
    """int64 digest of the ordered (name, shape, dtype) list: equal on every process for equal layouts."""
    text = ";".join(f"{k}:{tuple(v.shape)}:{v.dtype.str}" for k, v in params.items())
    return np.frombuffer(hashlib.sha256(text.encode()).digest()[:8], dtype=np.int64).copy()


def check_layout(comm, params):
    """All-gather every rank's layout hash; raise on every rank if any differs from rank 0's."""
    hashes = collectives.all_gather(comm, layout_hash(params))
    odd = [r for r in range(comm.size) if hashes[r] != hashes[0]]
    if odd:
        raise RuntimeError(f"ranks {odd} list their parameters differently from rank 0")


sq2 = nn.mlp_init([8, 8, 8], seed=4)
batch6 = [(rng.standard_normal((12, 8)),
           rng.standard_normal((12, 8)))]


def guarded(comm, reorder):
    """The chapter's shuffled-order run with the layout check in front."""
    p = {k: sq2[k] for k in ("W1", "b1", "W0", "b0")} if (reorder and comm.rank == 1) else sq2
    check_layout(comm, p)
    return ddp.train_ddp(comm, batch6, p, 3, 0.1)[0]


same = cluster.run(guarded, 3, args=(False,))
assert all(np.array_equal(v[k], same.values[0][k]) for v in same.values for k in v)
assert all(s.messages_sent == 2 + 3 * 4 * 2 * 2 for s in same.stats)  # check: K-1 = 2 msgs; 3 steps x 4 tensors
try:
    cluster.run(guarded, 3, args=(True,))
    raise AssertionError("the mismatch should have been caught")
except cluster.RankError as exc:
    assert "list their parameters differently" in str(exc)
    print("caught before the first step:", str(exc).splitlines()[0][:100])
