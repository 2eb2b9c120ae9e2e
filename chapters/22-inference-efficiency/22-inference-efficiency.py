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
# # Chapter 22. Per-node inference efficiency
#
# Part IV spread training over many devices. Serving a trained model is a different workload: the
# weights are fixed, requests arrive one at a time, and a language model answers token by token. Before
# Part V distributes inference (Chapters 23-26), this chapter makes one node serve as well as it can,
# with the three tools every serving stack uses: **int8 weights** (fewer bytes per parameter), a **KV
# cache** (no token is processed twice) and **batching** (one pass over the weights serves many
# sequences). The roofline of Chapter 3 explains why these three, and not faster arithmetic, are what
# matter: generating a token is limited by memory bandwidth, not by FLOPs. Everything is measured on
# this machine, on the course's tiny NumPy decoder, and checked against torchao and transformers.
#
# **Prerequisites:** Chapter 3 (Performance models: the roofline and arithmetic intensity), Chapter 19
# (Foundation model training: the decoder-only transformer and its parameter count) or Chapter 16 (Model
# and sharded parallelism: the layers of a transformer block). Background: matrix products, softmax
# attention, and integers versus floating point.

# %% tags=["parameters"]
VOCAB = 512  # smoke: 256
D_MODEL = 128  # smoke: 64
N_HEADS = 4
N_LAYERS = 4  # smoke: 2
D_FF = 512  # smoke: 256
MAX_LEN = 256  # smoke: 128
LENGTHS = [8, 32, 64, 128, 192, 248]  # smoke: [8, 32, 64, 120]
WIDE_D_MODEL = 512
WIDE_D_FF = 2048
WIDE_LAYERS = 2
BATCHES = [1, 2, 4, 8, 16, 32, 64]  # smoke: [1, 4, 16, 64]
N_REQUESTS = 48  # smoke: 16
MATMUL_N = 1024  # smoke: 512
COPY_MIB = 256  # smoke: 64
REPEATS = 5  # smoke: 3
SEED = 0

# %% [markdown]
# The decoder has a vocabulary of `VOCAB` tokens, width `D_MODEL`, `N_HEADS` heads, `N_LAYERS` blocks
# with MLP width `D_FF`, and at most `MAX_LEN` positions; `LENGTHS` are the context lengths at which a
# token is timed. The throughput sweep over the batch sizes `BATCHES` and the roofline use a wider
# decoder (`WIDE_D_MODEL`, `WIDE_D_FF`, `WIDE_LAYERS`) whose weights, like a real model's, do not fit
# in the processor's caches. `N_REQUESTS` are the requests of the static-batching trace. `MATMUL_N`
# and `COPY_MIB` size the two kernels that measure this machine's roofline; every timing is the median
# of `REPEATS` runs.
#
# ## 1. Motivation: which ceiling binds
#
# To emit one token, a decoder multiplies the token's activation by every weight matrix once: about
# $2P$ FLOPs for $P$ parameters, and all $P$ weights travel from memory to the arithmetic units. At
# batch 1 that is one multiply-add per weight read, two FLOPs per two bytes in 16-bit precision, while a
# modern accelerator can do hundreds of FLOPs in the time it reads one byte. So the ceiling of
# token generation is **memory bandwidth**: tokens per second at batch 1 are at most bandwidth divided
# by the bytes of the weights, however fast the arithmetic. The three levers follow: fewer bytes per
# weight (quantization), more tokens per weight read (batching), and no re-reading of the past (the KV
# cache, whose own bytes then become the next ceiling).

# %%
import copy
import logging
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from threadpoolctl import threadpool_limits

from scaleoutai import capstone, perf
from scaleoutai.perf.scaling import H100_BF16_PEAK
from scaleoutai.serving import efficiency as ef
from scaleoutai.serving import quantize as qz
from scaleoutai.serving.decoder import (ContiguousCache, decode_step, decoder_forward, decoder_init, generate,
                                        reference_generate)

# nominal spec-sheet memory bandwidths (bytes/s) of two accelerators, for the bound only
NOMINAL_BW = {"NVIDIA A10G": 600e9, "NVIDIA H100 SXM": 3.35e12}
P_7B = 7e9
for name, bw in NOMINAL_BW.items():
    for label, nbytes in (("16-bit", 2), ("int8", 1)):
        print(f"{name:16} 7B model, {label:6} weights: at most {bw / (P_7B * nbytes):6.0f} tokens/s at batch 1")

# %% [markdown]
# ## 2. Core concepts
#
# **Symmetric int8 quantization.** A weight matrix is stored as int8 codes $q$ and one float scale
# $s_c$ per output channel $c$: $s_c = \max_i |W_{ic}| / 127$, $q = \mathrm{round}(W/s)$, and
# $\hat W = q s$. Rounding moves each weight by at most half a step, $|W - \hat W| \le s/2$, so a
# product with an input row $x$ is off by at most $\sum_i |x_i| \, s_c / 2$ in column $c$. Per channel
# every column gets its own step; **per tensor** one scale serves the whole matrix, and one large
# column coarsens the step of all the others.
#
# **The KV cache.** Attention at position $t$ needs the keys and values of positions $0..t$. Without a
# cache every step recomputes them for the whole prefix, so step $t$ costs $O(t)$ matrix work and a
# sequence of $T$ tokens costs $O(T^2)$; with a cache each step computes one new key and value per
# layer and reads the old ones back. The price is memory: $2 \cdot L \cdot T \cdot d \cdot$ itemsize
# bytes per sequence ($L$ layers, width $d$, a key and a value row per token per layer).
#
# **Batching.** A decode step for $B$ sequences reads the weights once and uses each $B$ times.
# **Static batching** starts $B$ requests together and keeps every slot until the longest one ends.
#
# **Prefill and decode.** Prefill runs the $T$ prompt tokens through the model in one pass (intensity
# about $T$ FLOPs per weight read); decode runs one token per sequence per step (intensity about $B$).
#
# Here is the bound on a matrix with one loud column, and the cache formula against the cache object:

# %%
rng = np.random.default_rng(SEED)
W = rng.standard_normal((64, 16))
W[:, 5] *= 40.0  # an outlier channel
x = rng.standard_normal((4, 64))
q, s = qz.quantize_int8(W)
assert np.all(np.abs(W - qz.dequantize(q, s)) <= s / 2 * (1 + 1e-12))
err = np.abs(x @ W - qz.int8_linear(x, q, s))
assert np.all(err <= qz.matmul_error_bound(x, s) * (1 + 1e-12))
print(f"per-channel steps: {s.min():.4f} .. {s.max():.4f}; worst product error {err.max():.4f}, "
      f"bound {qz.matmul_error_bound(x, s).max():.4f}")

params = decoder_init(vocab=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS, d_ff=D_FF,
                      max_len=MAX_LEN, seed=SEED)
P = ef.matrix_params(params)
for seqs, T in ((1, MAX_LEN), (8, MAX_LEN // 2)):
    cache = ContiguousCache(params, seqs, max_len=T)
    assert cache.nbytes == ef.kv_cache_bytes(params, T, seqs)
    print(f"{seqs} sequence(s) x {T} tokens: KV cache {cache.nbytes / 2**20:.2f} MiB "
          f"(= 2 L T d x 8 bytes x sequences); weights {P * 8 / 2**20:.2f} MiB")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Within one node the "communication" is between memory and the cores: every byte of weights, cache
# and activations a step touches has to cross the memory bus. Counting both sides for our decoder
# ($P$ matrix weights, float64):
#
# * prefill of $T$ tokens: $2PT + 2LT^2d$ FLOPs; the weights cross once, plus the cache written;
# * decode of one token for $B$ sequences at context $t$: $B(2P + 4Ltd)$ FLOPs; all weights cross
#   every step, plus each sequence's cache.
#
# Intensity (FLOPs per byte) grows with $T$ for prefill and with $B$ for decode; at batch 1 decode does
# a quarter FLOP per byte in float64. The table is the formula for this decoder:

# %%
print(f"{'call':>26} {'GFLOP':>8} {'MB moved':>9} {'FLOP/byte':>10}")
for label, cost in [(f"prefill T = {T}", ef.prefill_cost(params, T)) for T in (16, 64, MAX_LEN)] + \
                   [(f"decode B = {B}, context 64", ef.decode_cost(params, 64, B)) for B in (1, 8, 64)]:
    print(f"{label:>26} {cost.flops / 1e9:8.4f} {cost.bytes / 1e6:9.2f} {cost.intensity:10.2f}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `quantize_int8` computes a step per channel and rounds; `int8_linear` keeps the codes as int8 and
# applies the scale after the product, because a per-column scale is constant along the sum
# ($x(qs) = (xq)s$). This is **weight-only** int8: activations stay float. (`int8_linear_dynamic` also
# quantizes the activations per row and accumulates int8 products in int32, the form integer matrix
# units run.)

# %%
from scaleoutai.notebooks import show

show(qz.quantize_int8, qz.int8_linear)

# %% [markdown]
# The KV cache is in the decoder itself: `decode_step` writes the new token's key and value into the
# cache at its position and attends over what the cache returns; `ContiguousCache` reserves
# `max_len` rows per sequence up front.

# %%
show(decode_step, ContiguousCache)

# %% [markdown]
# Three checks. The whole decoder quantized to int8 (every block matrix and the head; embeddings,
# biases and norms stay float) keeps most greedy tokens and shrinks its matrices nearly eightfold from
# float64 (the scales take the rest). Greedy decoding with the cache emits exactly the tokens of the
# cache-free reference. Static batches of any size emit the same tokens too.

# %%
Q = qz.quantize_decoder(params)
probe = rng.integers(0, VOCAB, size=(8, 48))
rep = qz.quantization_report(params, Q.params, probe)
print(f"int8 decoder: matrices {Q.float_nbytes / 2**20:.2f} MiB -> {Q.nbytes / 2**20:.2f} MiB; "
      f"max logit error {rep['max_abs_error']:.4f} ({rep['relative_error']:.1%} of the logits' std); "
      f"greedy token agrees at {rep['top1_agreement']:.1%} of positions")
assert rep["top1_agreement"] > 0.9 and Q.nbytes < Q.float_nbytes / 7

prompts = [rng.integers(0, VOCAB, size=n) for n in (3, 9, 1, 14, 6)]
news = [12, 4, 9, 6, 15]
want = [reference_generate(params, p, n) for p, n in zip(prompts, news)]
assert generate(params, prompts[:1], news[0]) == want[:1]
for B in (1, 2, 3, 5, 8):
    got, stats = ef.static_generate(params, prompts, news, B)
    assert got == want, B
print("cached greedy decoding == reference; static batches of 1, 2, 3, 5, 8 == reference")

# %% [markdown]
# **Time per token, with and without the cache.** At context length $t$, the cache-free model runs the
# whole prefix (`decoder_forward` on $t$ tokens); the cached model runs one `decode_step`. All timings
# in this notebook use one BLAS thread: the machine is shared, and competing threads would measure the
# scheduler rather than the kernel.

# %%
def filled_cache(params, toks, B=1):
    cache = ContiguousCache(params, B)
    for t in range(toks.shape[1]):
        decode_step(params, toks[:, t], np.full(B, t), cache)
    return cache


seq = rng.integers(0, VOCAB, size=(1, MAX_LEN))
per_token = {"no cache": [], "KV cache": []}
with threadpool_limits(limits=1):
    for t in LENGTHS:
        per_token["no cache"].append(perf.measure(decoder_forward, params, seq[:, :t + 1], repeats=REPEATS).median)
        cache = filled_cache(params, seq[:, :t])
        per_token["KV cache"].append(perf.measure(decode_step, params, seq[:, t], np.array([t]), cache,
                                                  repeats=REPEATS).median)
for t, a, b in zip(LENGTHS, per_token["no cache"], per_token["KV cache"]):
    print(f"context {t:>4}: no cache {a * 1e3:7.3f} ms/token, KV cache {b * 1e3:6.3f} ms/token ({a / b:5.1f}x)")
cache_speedup = per_token["no cache"][-1] / per_token["KV cache"][-1]
assert cache_speedup > per_token["no cache"][0] / per_token["KV cache"][0] and cache_speedup > 2
plt.figure(figsize=(6, 4))
for label, ts in per_token.items():
    plt.semilogy(LENGTHS, np.array(ts) * 1e3, "o-", label=label)
plt.gca().set(xlabel="context length t (tokens)", ylabel="time per token (ms)",
              title="one generated token: the cache removes the O(t) recompute")
plt.legend()
plt.show()

# %% [markdown]
# The gap widens with the context, as the counts predict: without the cache each token recomputes every
# earlier position, with it each token does a fixed amount of matrix work plus attention over $t$ rows.
#
# **Throughput against batch size.** Batching pays when reading the weights is the bottleneck, which
# needs weights larger than the caches: the wider decoder's matrices are tens of megabytes, as a real
# model's are gigabytes. Decode steps for $B$ sequences after a few cached tokens:

# %%
wide = decoder_init(vocab=VOCAB, d_model=WIDE_D_MODEL, n_heads=8, n_layers=WIDE_LAYERS, d_ff=WIDE_D_FF,
                    max_len=MAX_LEN, seed=SEED)
print(f"wide decoder: {ef.matrix_params(wide) / 1e6:.1f} M matrix weights, {ef.matrix_params(wide) * 8 / 1e6:.0f} MB "
      f"in float64")
with threadpool_limits(limits=1):
    tput = {B: ef.decode_throughput(wide, B, context=4, steps=4, repeats=REPEATS) for B in BATCHES}
for B, tps in tput.items():
    print(f"batch {B:>3}: {tps:8.0f} tokens/s ({tps / tput[BATCHES[0]]:5.2f}x batch {BATCHES[0]})")
assert tput[BATCHES[-1]] > 2 * tput[BATCHES[0]]
plt.figure(figsize=(6, 4))
plt.semilogx(BATCHES, list(tput.values()), "o-", base=2)
plt.gca().set(xlabel="batch size B (sequences per decode step)", ylabel="tokens/s",
              title="decode throughput on this machine (1 thread)")
plt.show()

# %% [markdown]
# Throughput rises with $B$ because the matrix products read each weight once for all $B$ rows; at
# batch 1 each weight is used once per read. The rise is far from $B$-fold: the per-token work that
# batching does not share (layer norms, GELU, and the attention loop over sequences, written in
# Python) grows with $B$ and takes over. Small steps in the curve are the noise of a shared machine.
#
# **The roofline, measured.** This machine's peak is the FLOP rate of a large matrix product and its
# bandwidth the rate of a large copy (read and write), both on one thread. Prefill and decode are
# placed at their counted intensity, with the FLOP rate they actually achieved on the wide decoder.

# %%
with threadpool_limits(limits=1):
    peak, bw = ef.measure_roofline(matmul_n=MATMUL_N, copy_bytes=COPY_MIB * 2**20, repeats=REPEATS)
    t_pre = perf.measure(decoder_forward, wide, seq[:, :MAX_LEN], repeats=REPEATS).median
ridge = perf.ridge_point(peak, bw)
B_lo, B_hi = BATCHES[0], BATCHES[-1]
# the decode points reuse the throughput sweep: a step for B sequences took B / tokens-per-second, at
# contexts 4..7 (cost taken at 6)
points = {f"prefill T = {MAX_LEN}": (ef.prefill_cost(wide, MAX_LEN), t_pre),
          f"decode B = {B_lo}": (ef.decode_cost(wide, 6, B_lo), B_lo / tput[B_lo]),
          f"decode B = {B_hi}": (ef.decode_cost(wide, 6, B_hi), B_hi / tput[B_hi])}
print(f"measured peak {peak / 1e9:.1f} GFLOP/s, bandwidth {bw / 1e9:.1f} GB/s, ridge at {ridge:.2f} FLOP/byte")
for name, (cost, t) in points.items():
    bound = "memory" if cost.intensity < ridge else "compute"
    print(f"{name:>16}: I = {cost.intensity:6.2f} FLOP/byte ({bound}-bound), achieved {cost.flops / t / 1e9:6.2f} "
          f"GFLOP/s = {cost.flops / t / perf.roofline(cost.intensity, peak, bw):.0%} of its roof")
assert points[f"decode B = {B_lo}"][0].intensity < ridge < points[f"prefill T = {MAX_LEN}"][0].intensity
ax = perf.plot_roofline(peak, bw, {n: c.intensity for n, (c, _) in points.items()})
for i, (name, (cost, t)) in enumerate(points.items()):
    ax.plot([cost.intensity], [cost.flops / t], "x", ms=10, mew=2, color=f"C{i}", label=f"{name}: measured")
ax.legend(loc="lower right", fontsize="small")
plt.show()

# %% [markdown]
# Decode at batch 1 sits far left of the ridge: memory-bound, so its roof is bandwidth times a quarter,
# and no faster arithmetic would help. Prefill of a long prompt sits right of it: compute-bound. Large
# batches move decode toward the ridge, which is why batching raised throughput above. The measured
# crosses fall below their roofs because the NumPy decoder pays Python overhead per layer and per
# sequence that a fused kernel would not; on a shared machine the shares of the roof move between runs,
# so read them as rough.
#
# ## 5. The same task with production libraries: torchao and transformers
#
# **torchao.** `quantize_(model, Int8WeightOnlyConfig())` replaces each `nn.Linear` weight by an
# `Int8Tensor` with one scale per output channel. Its convention differs from ours in one detail: it
# uses all 256 codes, step $\max|W|/127.5$ and codes in $[-128, 127]$ (our `levels="full"`), where the
# chapter's default keeps the range symmetric at $\pm 127$. With that option our codes and scales
# equal torchao's bit for bit, on a matrix of our decoder.

# %%
logging.getLogger("torchao").setLevel(logging.ERROR)  # optional CUDA kernels it cannot load on a CPU machine
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is downloaded: the models below are built from a config
warnings.filterwarnings("ignore", message="IProgress not found")  # no ipywidgets: transformers' progress bars are off
import torch  # noqa: E402
import torchao.quantization as tq  # noqa: E402

W1 = params["blocks"][0]["W1"].astype(np.float32)  # (d_model, d_ff): ours is x @ W, torch's Linear is x @ W.T
lin = torch.nn.Linear(*W1.shape, bias=False)
with torch.no_grad():
    lin.weight.copy_(torch.from_numpy(W1.T.copy()))
mlp_in = torch.nn.Sequential(lin)
tq.quantize_(mlp_in, tq.Int8WeightOnlyConfig())
w_ao = mlp_in[0].weight
assert type(w_ao).__name__ == "Int8Tensor" and w_ao.qdata.dtype == torch.int8  # torchao ran
q_full, s_full = qz.quantize_int8(W1, levels="full")
assert np.array_equal(w_ao.qdata.numpy(), q_full.T) and np.array_equal(w_ao.scale.numpy().ravel(), s_full)
xs = rng.standard_normal((16, W1.shape[0])).astype(np.float32)
with torch.no_grad():
    y_ao = mlp_in(torch.from_numpy(xs)).numpy()
y_ours = qz.int8_linear(xs, q_full, s_full)
np.testing.assert_allclose(y_ao, y_ours, rtol=1e-4, atol=1e-4)
assert np.all(np.abs(xs @ W1 - y_ao) <= qz.matmul_error_bound(xs, s_full) * (1 + 1e-5) + 1e-4)
print(f"torchao Int8WeightOnly on W1 {W1.shape}: codes and {s_full.size} scales equal ours; outputs differ from "
      f"ours by at most {np.abs(y_ao - y_ours).max():.1e}, from float by {np.abs(xs @ W1 - y_ao).max():.4f} "
      f"(bound {qz.matmul_error_bound(xs, s_full).max():.4f})")

# %% [markdown]
# **transformers.** GPT-2 has our decoder's architecture: pre-LN blocks, the tanh GELU (`gelu_new`),
# learned positions, a final layer norm, and with `tie_word_embeddings=False` an untied head.
# `ef.to_gpt2` builds a `GPT2LMHeadModel` from a config (random weights, nothing downloaded) and copies
# our weights into it: GPT-2's `Conv1D` stores $(d_{in}, d_{out})$ like our $xW$, so $W_q, W_k, W_v$
# concatenate into `c_attn`. Its logits then equal ours to float64 rounding, so its own KV cache
# (`use_cache=True`) and its cache-free path must both generate our tokens.

# %%
show(ef.to_gpt2)

# %%
hf = ef.to_gpt2(params)
with torch.no_grad():
    hf_logits = hf(torch.from_numpy(probe)).logits.numpy()
np.testing.assert_allclose(hf_logits, decoder_forward(params, probe), rtol=1e-9, atol=1e-9)
hf_prompt, new_hf = prompts[1], max(LENGTHS) - len(prompts[1])
ours_hf = generate(params, [hf_prompt], new_hf)[0]
hf_time = {}
ids = torch.from_numpy(hf_prompt[None])
with threadpool_limits(limits=1):
    torch.set_num_threads(1)
    for use_cache in (True, False):
        t0 = time.perf_counter()
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_hf, min_new_tokens=new_hf,
                          do_sample=False, use_cache=use_cache)
        hf_time[use_cache] = (time.perf_counter() - t0) / new_hf
        assert out[0, len(hf_prompt):].tolist() == ours_hf, use_cache
    t0 = time.perf_counter()
    generate(params, [hf_prompt], new_hf)
    ours_time = (time.perf_counter() - t0) / new_hf
hf_diff = np.abs(hf_logits - decoder_forward(params, probe)).max()
print(f"GPT-2 with our weights: logits equal ours (max diff {hf_diff:.1e}); "
      f"{new_hf} greedy tokens equal ours with and without its cache")
print(f"mean time per token over {new_hf} tokens: transformers with cache {hf_time[True] * 1e3:.2f} ms, "
      f"without {hf_time[False] * 1e3:.2f} ms ({hf_time[False] / hf_time[True]:.1f}x); "
      f"our NumPy decoder with cache {ours_time * 1e3:.2f} ms")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **An outlier channel ruins per-tensor int8.** Large language models grow a few activation and weight
# channels far larger than the rest. Give one output channel of a decoder matrix a 40x larger scale:
# per tensor, its step becomes the step of every column, and the others lose most of their resolution.

# %%
W2 = params["blocks"][0]["W2"].copy()
W2[:, 7] *= 40.0
h = rng.standard_normal((64, W2.shape[0]))
per_col = {}
for name, (qq, ss) in {"per tensor": qz.naive_quantize_int8(W2), "per channel": qz.quantize_int8(W2)}.items():
    per_col[name] = np.abs(h @ W2 - qz.int8_linear(h, qq, ss)).mean(axis=0)
others = np.arange(W2.shape[1]) != 7
ratio = per_col["per tensor"][others].mean() / per_col["per channel"][others].mean()
print(f"mean |error| on the other {others.sum()} channels: per tensor {per_col['per tensor'][others].mean():.4f}, "
      f"per channel {per_col['per channel'][others].mean():.4f} ({ratio:.0f}x)")
assert ratio > 10
plt.figure(figsize=(8, 3.5))
for name, e in per_col.items():
    plt.semilogy(e, "o-" if name == "per channel" else "s-", ms=3, label=name)
plt.axvline(7, color="gray", ls=":", lw=1)
plt.gca().set(xlabel="output channel", ylabel="mean |x W - x deq(W)|",
              title="int8 error per channel; channel 7 is the outlier")
plt.legend()
plt.show()

spiky = copy.deepcopy(params)
spiky["blocks"][0]["W2"] = W2
for per_channel in (True, False):
    r = qz.quantization_report(spiky, qz.quantize_decoder(spiky, per_channel=per_channel).params, probe)
    print(f"decoder with the outlier, {'per channel' if per_channel else 'per tensor '}: greedy agreement "
          f"{r['top1_agreement']:.1%}, max logit error {r['max_abs_error']:.3f}")

# %% [markdown]
# **A cache that runs out.** A contiguous cache holds `max_len` positions per sequence, reserved up
# front. A generation that outgrows it must stop with a clear error, not write past the end:

# %%
small = ContiguousCache(params, 1, max_len=8)
try:
    generate(params, [prompts[0]], max_new=10, cache=small)
    raise AssertionError("the cache overflow was not reported")
except ValueError as err:
    assert "this cache holds 8 per sequence" in str(err), err
    print("cache overflow:", err)

# %% [markdown]
# Reserving the worst case for every sequence avoids that error but wastes the memory of every sequence
# that ends early; Chapter 24's paged cache allocates blocks as sequences grow instead.
#
# **Padding waste in static batching.** A static batch runs until its longest request ends; a short
# request's slot idles, or decodes padding, the rest of the time. On a trace of requests with random
# prompt and output lengths, the measured waste of `static_generate` equals the count from the lengths,
# and grows with the batch size:

# %%
trace_p = rng.integers(1, MAX_LEN // 8, size=N_REQUESTS)
trace_n = rng.integers(1, MAX_LEN // 4, size=N_REQUESTS)
trace_prompts = [rng.integers(0, VOCAB, size=n) for n in trace_p]
waste = {}
for B in (1, 4, 16):
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        toks_b, st = ef.static_generate(params, trace_prompts, trace_n, B)
        secs = time.perf_counter() - t0
    assert st == ef.padding_waste(trace_p, trace_n, B) and all(len(g) == n for g, n in zip(toks_b, trace_n))
    waste[B] = st.waste
    print(f"static batches of {B:>2}: {st.computed:>6} slots computed, {st.useful:>6} useful ({st.waste:.0%} waste), "
          f"{trace_n.sum() / secs:7.0f} generated tokens/s")
assert waste[1] == 0 < waste[4] < waste[16]

# %% [markdown]
# ## 7. Evaluation: tokens per second, cost per million tokens
#
# Three numbers per configuration: tokens per second measured here, the speedup $S$ over its baseline
# (the cached decoder; the wide decoder at batch 1), and the cost of a million tokens at the hourly
# price of a CPU instance from `capstone/prices.yaml`. For GPUs we have no measurement on this machine,
# so their rows are the roofline's prediction for a 7B model in 16-bit and int8 at batch 1 and 64
# (memory-bound decode: tokens/s $\approx B \cdot$ bandwidth / bytes of weights, capped by the peak
# FLOP rate), priced per GPU.

# %%
cpu = capstone.lookup("aws-c7i.xlarge")


def row(label, tokens_per_s, speedup):
    usd = perf.run_cost(cpu.price_per_hour, 1, 1e6 / tokens_per_s)
    print(f"{label:>40} {tokens_per_s:>10.0f} {speedup:>6} {usd:>15.3f}")


print(f"{'configuration':>40} {'tokens/s':>10} {'S':>6} {'USD / M tokens':>15}")
cached, uncached = 1 / per_token["KV cache"][-1], 1 / per_token["no cache"][-1]
row(f"decoder, context {LENGTHS[-1]}, KV cache", cached, "1")
row(f"decoder, context {LENGTHS[-1]}, no cache", uncached, f"{uncached / cached:.2f}")
for B in (BATCHES[0], BATCHES[len(BATCHES) // 2], BATCHES[-1]):
    row(f"wide decoder, B = {B}", tput[B], f"{tput[B] / tput[BATCHES[0]]:.2f}")
gpu_rows = {"aws-g5.xlarge": ("NVIDIA A10G", 125e12), "aws-p5.48xlarge": ("NVIDIA H100 SXM", H100_BF16_PEAK)}
for itype, (gpu, gpu_peak) in gpu_rows.items():
    price = capstone.lookup(itype)
    for label, nbytes in (("16-bit", 2), ("int8", 1)):
        for B in (1, 64):
            # a decode step reads the weights once for B tokens, 2 P B FLOPs: the roofline at intensity 2B/nbytes
            tps = perf.roofline(2 * B / nbytes, gpu_peak, NOMINAL_BW[gpu]) / (2 * P_7B)
            usd = perf.run_cost(price.price_per_hour / price.gpus, 1, 1e6 / tps)
            print(f"{f'7B {label}, B = {B}, 1 GPU of {itype}':>40} {tps:>10.0f} {'model':>6} {usd:>15.4f}")
print(f"CPU rows priced as one {cpu.instance_type} at {cpu.price_per_hour} USD/h ({cpu.date}); GPU rows per GPU of "
      f"the instance; GPU tokens/s are roofline predictions from nominal bandwidth and peak, not measurements")
assert uncached < cached and tput[BATCHES[-1]] > tput[BATCHES[0]]

# %% [markdown]
# Batching is the cheapest lever: the same weights, read once, serve $B$ tokens. In the predicted GPU
# rows the cost per token falls as $1/B$ as long as decode stays memory-bound; on this CPU it falls by
# the measured $S$, far less than $B$, because of the per-token work that batching does not share.
# Int8 halves the bytes a 16-bit model reads per token, and the predicted memory-bound throughput
# doubles with it. Our NumPy `int8_linear` does not get that speedup: it widens the codes to float
# before the product, so it saves memory for storage but not traffic into the arithmetic units; a
# fused int8 kernel reads the codes themselves. Without the cache a token costs many times what it
# costs with it at the same context, and the gap grows with the context (Section 4's plot).
#
# ## 8. Exercises
#
# 1. **Group-wise scales.** Give every block of 32 input rows of a column its own scale (as GPTQ and
#    AWQ checkpoints do). Derive the new error bound, implement it, and measure the error on the
#    outlier matrix of Section 6 against per-channel scales. What does a scale per group cost in bytes?
# 2. **Int8 activations.** Use `int8_linear_dynamic` inside the decoder's MLP. Measure the greedy-token
#    agreement, then inject a 100x activation outlier in one hidden unit and measure again. Which
#    mitigation from Section 9 would you try first?
# 3. **A cache in int8.** Store the keys and values of `ContiguousCache` as int8 with a scale per row.
#    How much memory does it save per token, and how many greedy tokens change over 200 steps?
# 4. **Where decode turns compute-bound.** From the measured ridge point, compute the batch size at
#    which a decode step of this decoder becomes compute-bound, in float64 and in int8 weights. Check it
#    with a sweep of `decode_throughput` at larger $B$.
# 5. **Sort before batching.** Sort the trace of Section 6 by expected length before forming static
#    batches. How much padding does it save, and what does it do to the latency of a short request
#    that arrives behind long ones?
#
# ## 9. Research directions
#
# - **Outliers and low-bit quantization.** Large models develop a few huge activation channels that
#   break naive int8; keeping them exact, moving them into the weights, or rounding with second-order
#   information keeps accuracy at 8 and even 4 bits, but the right scheme per model and per hardware
#   is still chosen by trial.
#   - Dettmers, Lewis, Belkada and Zettlemoyer, "LLM.int8(): 8-bit Matrix Multiplication for Transformers
#     at Scale", NeurIPS, 2022. Splits outlier feature dimensions into a 16-bit product and runs the rest
#     in int8.
#   - Xiao, Lin, Seznec, Wu, Demouth and Han, "SmoothQuant: Accurate and Efficient Post-Training
#     Quantization for Large Language Models", ICML, 2023. Migrates activation outliers into the weights
#     with a per-channel rescaling so both can be int8.
#   - Frantar, Ashkboos, Hoefler and Alistarh, "GPTQ: Accurate Post-Training Quantization for Generative
#     Pre-trained Transformers", ICLR, 2023. Rounds weights one column at a time, correcting the rest with
#     approximate second-order information; 3-4 bit weights.
# - **Partitioning inference for the memory wall.** Decode is memory-bound on one chip; spreading a model
#   over many chips changes which of compute, memory and communication binds, and the best layout
#   depends on batch size, context length and latency target.
#   - Pope, Douglas, Chowdhery, Devlin, Bradbury, Levskaya, Heek, Xiao, Agrawal and Dean, "Efficiently
#     Scaling Transformer Inference", MLSys, 2023. Analytical cost model and partitioning layouts for
#     prefill and decode on TPU pods.
# - **IO-aware attention over long caches.** As the context grows, reading the KV cache, not the
#   weights, dominates a decode step; attention kernels that minimise memory traffic, and caches that
#   store less per token, are both open.
#   - Dao, Fu, Ermon, Rudra and Re, "FlashAttention: Fast and Memory-Efficient Exact Attention with
#     IO-Awareness", NeurIPS, 2022. Tiles attention so the score matrix never reaches slow memory.
#
# ## What's next
#
# Chapter 23 (Distributed inference) takes this one efficient node and multiplies it: replicas behind
# a router for throughput and tail latency, and tensor parallelism for a model that one node cannot
# hold. Chapter 24 (LLM serving) then replaces static batching with iteration-level scheduling and the
# contiguous cache with a paged one, removing the two wastes measured in Section 6.
