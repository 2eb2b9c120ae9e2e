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
# with the tools every serving stack uses: **int8 weights** (fewer bytes per parameter), a **KV cache**
# (no token is processed twice), **batching** (one pass over the weights serves many sequences),
# **grouped-query attention** (fewer bytes per cached token), **attention in tiles** (the score matrix
# never reaches slow memory) and **speculative decoding** (several tokens per pass over the weights).
# The roofline of Chapter 3 explains why these, and not faster arithmetic, are what matter: generating
# a token is limited by memory bandwidth, not by FLOPs. Everything is measured on this machine, on the
# course's tiny NumPy decoder and on a real language model (SmolLM2-135M-Instruct, quantized to int8 and
# int4 in Section 5), and checked against torchao, PyTorch and transformers.
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
LENGTHS = [8, 32, 64, 128, 192, 248]  # smoke: [8, 32, 80]
WIDE_D_MODEL = 512
WIDE_D_FF = 2048
WIDE_LAYERS = 2
BATCHES = [1, 2, 4, 8, 16, 32, 64]  # smoke: [1, 8, 64]
N_REQUESTS = 48  # smoke: 12
MATMUL_N = 1024  # smoke: 512
COPY_MIB = 256  # smoke: 64
REPEATS = 5  # smoke: 2
N_KV_HEADS = 2
FLASH_N = 512  # smoke: 128
FLASH_D = 32
SPEC_LAYERS = 8  # smoke: 4
SPEC_NEW = 96  # smoke: 12
SPEC_KS = [1, 2, 3, 4, 6, 8]  # smoke: [2, 4]
SPEC_EPS = 0.1
SPEC_REPEATS = 3  # smoke: 1
GPU_CONTEXT = 4096
DECODE_CONTEXT = 512
LM_PROMPTS = ["What is the capital of France?", "What is 2 + 3?"]  # smoke: ["What is 2 + 3?"]
LM_NEW = 8
LM_GROUP = 32
LM_STEPS = 8  # smoke: 4
SEED = 0

# %% [markdown]
# The decoder has a vocabulary of `VOCAB` tokens, width `D_MODEL`, `N_HEADS` heads, `N_LAYERS` blocks
# with MLP width `D_FF`, and at most `MAX_LEN` positions; `LENGTHS` are the context lengths at which a
# token is timed. The throughput sweep over the batch sizes `BATCHES` and the roofline use a wider
# decoder (`WIDE_D_MODEL`, `WIDE_D_FF`, `WIDE_LAYERS`) whose weights, like a real model's, do not fit
# in the processor's caches. `N_REQUESTS` are the requests of the static-batching trace. `MATMUL_N`
# and `COPY_MIB` size the two kernels that measure this machine's roofline; every timing is the median
# of `REPEATS` runs. `N_KV_HEADS` is the number of key/value heads of the grouped-query variant of the
# decoder. `FLASH_N` and `FLASH_D` are the sequence length and head size of the tiled-attention checks.
# Speculative decoding runs a target of `SPEC_LAYERS` wide blocks for `SPEC_NEW` tokens, drafting `k`
# tokens per round for each `k` in `SPEC_KS`; `SPEC_EPS` sets how strongly the target's upper blocks
# correct its draft (Section 4), and each speculative timing is the median of `SPEC_REPEATS` runs.
# `GPU_CONTEXT` is the context length of the GPU memory tables and `DECODE_CONTEXT` that of the GPU
# throughput rows of Section 7. The real model of Section 5 answers the chat prompts `LM_PROMPTS` with at
# most `LM_NEW` greedy tokens, its 4-bit weights have one scale per `LM_GROUP` inputs, and Section 7 times
# `LM_STEPS` of its decode steps.
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
#
# That next ceiling is real: a decode step reads the weights once **and every sequence's KV cache**, and
# at long contexts and large batches the caches outweigh the weights. Two more levers attack it: store
# fewer bytes per cached token (grouped-query attention) and never write the attention score matrix to
# slow memory (tiled attention, FlashAttention's algorithm). A last lever serves a single user faster at
# batch 1: let a small draft model guess several tokens and check them all with one pass over the big
# model's weights (speculative decoding). The accelerators below come from the course's one table of
# GPUs, `perf.hardware`.

# %%
import copy
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from threadpoolctl import threadpool_limits

from scaleoutai import capstone, perf
from scaleoutai.perf import hardware
from scaleoutai.serving import efficiency as ef
from scaleoutai.serving import flash_attention as fa
from scaleoutai.serving import hf
from scaleoutai.serving import quantize as qz
from scaleoutai.serving import speculative as sp
from scaleoutai.serving.decoder import (ContiguousCache, decode_step, decoder_forward, decoder_init, generate,
                                        reference_generate, repeat_kv_heads)

GPUS = (hardware.A10G, hardware.H100_SXM)  # spec-sheet bandwidth and peak, from the one table in perf
P_7B = 7e9
for gpu in GPUS:
    for label, nbytes in (("16-bit", 2), ("int8", 1)):
        print(f"{gpu.name:16} 7B model, {label:6} weights: at most {gpu.hbm_bandwidth / (P_7B * nbytes):6.0f} "
              f"tokens/s at batch 1")

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
# layer and reads the old ones back. The price is memory: a key and a value vector per KV head per
# layer per token,
#
# $$\text{bytes per token} = 2 \cdot L \cdot n_{kv} \cdot d_h \cdot \text{itemsize},$$
#
# times $T$ tokens per sequence ($L$ layers, $n_{kv}$ key/value heads of size $d_h$).
#
# **Grouped-query attention (GQA).** Multi-head attention (MHA) gives each of the $n_h$ query heads its
# own key and value head, $n_{kv} = n_h$ and $n_{kv} d_h = d$. Multi-query attention (MQA) keeps one
# key/value head for all of them, $n_{kv} = 1$; GQA sits between: $n_{kv}$ groups of $n_h / n_{kv}$
# query heads, each group sharing one key/value head. The cache shrinks by $n_h / n_{kv}$ and so do its
# reads at every decode step; the queries, and the FLOPs of attention, do not change. Llama-3-8B has 32
# query heads and 8 KV heads: 128 KiB per token in bf16 instead of the 512 KiB of the same model with
# MHA. A GQA layer equals an MHA layer whose key and value heads are the GQA ones repeated per group.
#
# **Attention in tiles: the online softmax.** Attention over $N$ positions forms an $N \times N$ score
# matrix $S = QK^\top/\sqrt{d_h}$; written to slow memory (a GPU's HBM) and read back for the softmax
# and for $PV$, it costs $O(N^2)$ traffic and memory. FlashAttention computes the same output block by
# block: for a block of query rows it walks the key/value blocks keeping a running row maximum $m$, a
# running denominator $\ell$ and an unnormalised output, and when a new block raises the maximum from
# $m$ to $m'$ it rescales what it has summed by $e^{m - m'}$. The result is exact, not an approximation,
# and the score matrix exists only one tile at a time in fast on-chip memory (SRAM).
#
# **Speculative decoding.** A small draft model proposes $k$ tokens $x_1..x_k$ one by one (sampling its
# distributions $q_i$); the target scores all $k+1$ positions in **one** pass, giving $p_0..p_k$. Each
# $x_i$ is kept with probability $\min(1, p_{i-1}(x_i)/q_i(x_i))$; at the first rejection a token is
# drawn from $\mathrm{norm}(\max(0, p_{i-1} - q_i))$ and the round ends; if all $k$ survive, a bonus token
# comes from $p_k$. Every emitted token then has exactly the target's distribution:
# $\Pr[y] = \min(p, q)(y) + (1 - \sum \min(p, q))\,\mathrm{norm}(\max(0, p - q))(y) = p(y)$. If each draft
# is accepted with probability $a$, a round emits $(1 - a^{k+1})/(1 - a)$ tokens for one pass over the
# target's weights.
#
# **Batching.** A decode step for $B$ sequences reads the weights once and uses each $B$ times.
# **Static batching** starts $B$ requests together and keeps every slot until the longest one ends.
#
# **Prefill and decode.** Prefill runs the $T$ prompt tokens through the model in one pass (intensity
# about $T$ FLOPs per weight read); decode runs one token per sequence per step (intensity about $B$).
#
# Here is the bound on a matrix with one loud column, and the cache formula against the cache object,
# for the decoder with multi-head attention and with `N_KV_HEADS` key/value heads:

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
gqa = decoder_init(vocab=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS, d_ff=D_FF, max_len=MAX_LEN,
                   seed=SEED, n_kv_heads=N_KV_HEADS)
for seqs, T in ((1, MAX_LEN), (8, MAX_LEN // 2)):
    cache, cache_g = ContiguousCache(params, seqs, max_len=T), ContiguousCache(gqa, seqs, max_len=T)
    assert cache.nbytes == ef.kv_cache_bytes(params, T, seqs) and cache_g.nbytes == ef.kv_cache_bytes(gqa, T, seqs)
    assert cache.nbytes == cache_g.nbytes * N_HEADS // N_KV_HEADS
    print(f"{seqs} sequence(s) x {T} tokens: KV cache {cache.nbytes / 2**20:.2f} MiB with {N_HEADS} KV heads, "
          f"{cache_g.nbytes / 2**20:.2f} MiB with {N_KV_HEADS} (= 2 L T n_kv d_h x 8 bytes x sequences); "
          f"weights {P * 8 / 2**20:.2f} MiB")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Within one node the "communication" is between memory and the cores: every byte of weights, cache
# and activations a step touches has to cross the memory bus. Counting both sides for our decoder
# ($P$ matrix weights, float64):
#
# * prefill of $T$ tokens: $2PT + 2LT^2d$ FLOPs; the weights cross once, plus the cache written;
# * decode of one token for $B$ sequences at context $t$: $B(2P + 4Ltd)$ FLOPs; all weights cross
#   every step, plus each sequence's cache, $2 L t n_{kv} d_h$ numbers.
#
# Intensity (FLOPs per byte) grows with $T$ for prefill and with $B$ for decode; at batch 1 decode does
# a quarter FLOP per byte in float64. The table is the formula for this decoder:

# %%
print(f"{'call':>26} {'GFLOP':>8} {'MB moved':>9} {'FLOP/byte':>10}")
for label, cost in [(f"prefill T = {T}", ef.prefill_cost(params, T)) for T in (16, 64, MAX_LEN)] + \
                   [(f"decode B = {B}, context 64", ef.decode_cost(params, 64, B)) for B in (1, 8, 64)]:
    print(f"{label:>26} {cost.flops / 1e9:8.4f} {cost.bytes / 1e6:9.2f} {cost.intensity:10.2f}")

# %% [markdown]
# **What a real model's cache costs.** The same formula for open models, with layers, KV heads and head
# size from each model's public `config.json` (`num_hidden_layers`, `num_key_value_heads`,
# `hidden_size / num_attention_heads`), in bf16. The batch a GPU admits is the number of sequences of
# `GPU_CONTEXT` tokens whose caches fit in its memory beside the bf16 weights (nothing reserved for
# activations: an upper bound). Llama-2-7B is there as the multi-head baseline of the same size.

# %%
print(f"{'model':>18} {'layers':>6} {'heads':>5} {'KV heads':>8} {'d_h':>4} {'KiB/token':>9} "
      + " ".join(f"{'batch, ' + g.name.removeprefix('NVIDIA '):>18}" for g in (hardware.H100_SXM, hardware.H200)))
for m in ef.OPEN_MODELS.values():
    fits = [ef.max_batch(m, GPU_CONTEXT, g.memory_bytes) for g in (hardware.H100_SXM, hardware.H200)]
    print(f"{m.name:>18} {m.n_layers:>6} {m.n_heads:>5} {m.n_kv_heads:>8} {m.head_dim:>4} "
          f"{m.kv_bytes_per_token() / 1024:>9.1f} " + " ".join(f"{b:>18}" for b in fits))
assert ef.OPEN_MODELS["Llama-3-8B"].kv_bytes_per_token() == 128 * 1024
print(f"(sequences of {GPU_CONTEXT} tokens; 0 = the bf16 weights alone do not fit)")

# %% [markdown]
# With 8 KV heads for 32 query heads, Llama-3-8B and Mistral-7B fit four times the sequences of a
# multi-head 7B model; Qwen2.5-7B, with 4 KV heads for 28, fits more still. A 70B model does not fit one
# 80 GB GPU at all in bf16: that is Chapter 23's tensor parallelism.
#
# **Attention's own traffic.** Inside a layer, attention over $N$ positions (prefill, or training) has
# its own memory traffic. The naive form reads $Q$ and $K$, writes the $N \times N$ scores $S$, reads
# them back and writes $P = \mathrm{softmax}(S)$, then reads $P$ and $V$ and writes $O$: $4Nd_h + 4N^2$
# elements per head. The tiled form reads each block of $Q$ once, writes each block of $O$ once, and
# reads $K$ and $V$ once per block of $Q$: $2Nd_h + 2d_h N \lceil N / B_q \rceil$. With $M$ elements of
# SRAM, FlashAttention takes $B_k = \lceil M / 4d_h \rceil$ and $B_q = \min(B_k, d_h)$. Both grow as
# $N^2$; the tiled form's coefficient is $2 d_h / B_q$ (2 at $B_q = d_h$) against 4, it falls as the SRAM
# grows, and it never needs an $N \times N$ buffer: its memory is linear in $N$. The counts, per head at
# $d_h = 128$ in bf16, for two SRAM sizes per streaming multiprocessor:

# %%
lengths = [2**i for i in range(9, 16)]
traffic = {"naive": [fa.naive_attention_traffic(N, 128).total * 2 for N in lengths]}
for sram_kib in (100, 228):
    bq, bk = fa.blocks_for_sram(sram_kib * 1024, 128, itemsize=2)
    traffic[f"tiled, {sram_kib} KiB SRAM (B_q={bq}, B_k={bk})"] = [
        fa.flash_attention_traffic(N, 128, bq, bk).total * 2 for N in lengths]
print(f"{'N':>6} " + " ".join(f"{k[:24]:>25}" for k in traffic) + f" {'score matrix':>13}")
for i, N in enumerate(lengths):
    print(f"{N:>6} " + " ".join(f"{v[i] / 2**20:>21.1f} MiB" for v in traffic.values())
          + f" {N * N * 2 / 2**20:>9.0f} MiB")
ratio = traffic["naive"][-1] / list(traffic.values())[-1][-1]
assert all(a > b for a, b in zip(traffic["naive"], list(traffic.values())[1]))
print(f"at N = {lengths[-1]} the naive form moves {ratio:.1f}x the bytes of the tiled form with 228 KiB of SRAM, "
      f"and needs a {lengths[-1] ** 2 * 2 / 2**30:.0f} GiB score matrix per head that the tiled form never stores")
plt.figure(figsize=(6, 4))
for label, v in traffic.items():
    plt.loglog(lengths, np.array(v) / 2**20, "o-", base=2, label=label)
plt.loglog(lengths, np.array(lengths, dtype=float) ** 2 * 2 / 2**20, "k:", base=2, label="N^2 scores (bf16)")
plt.gca().set(xlabel="sequence length N", ylabel="HBM traffic per head (MiB)",
              title="attention's memory traffic, d_h = 128")
plt.legend(fontsize="small")
plt.show()

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
# **Attention in tiles.** `flash_attention` walks the queries in blocks of `block_q` rows and, for each,
# the keys and values in blocks of `block_k` rows, with the running maximum `m`, denominator `l` and
# output `acc` of the online softmax; causally it skips the key blocks that lie wholly after the query
# block. It also counts the elements it reads from and writes to "HBM" (the arrays outside the loop).

# %%
show(fa.flash_attention)

# %% [markdown]
# It equals the naive form for block sizes that divide the length and ones that do not, with and
# without the causal mask, in float64 and float32, and its loop moves exactly the counted elements:

# %%
qkv = rng.standard_normal((3, 2, FLASH_N, FLASH_D))
worst = {}
for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
    q_, k_, v_ = (a.astype(dtype) for a in qkv)
    for causal in (False, True):
        want_att = fa.naive_attention(*qkv, causal=causal)
        for bq, bk in ((16, 16), (FLASH_D, 48), (37, 50), (FLASH_N, 7)):
            moved = fa.Traffic()
            got_att = fa.flash_attention(q_, k_, v_, causal=causal, block_q=bq, block_k=bk, traffic=moved)
            np.testing.assert_allclose(got_att, want_att, rtol=tol, atol=tol)
            assert moved == fa.flash_attention_traffic(FLASH_N, FLASH_D, bq, bk, causal=causal, heads=2)
            worst[dtype.__name__] = max(worst.get(dtype.__name__, 0.0), float(np.abs(got_att - want_att).max()))
print(f"tiled == naive attention at N = {FLASH_N}, d_h = {FLASH_D}, 4 block shapes, causal and not; largest "
      f"difference float64 {worst['float64']:.1e}, float32 {worst['float32']:.1e}")

# %% [markdown]
# **Grouped-query attention in the decoder.** `decoder_init(..., n_kv_heads=G)` gives $W_k$ and $W_v$
# $G \cdot d_h$ columns, and the cache stores $G \cdot d_h$ numbers per token per layer. In
# `decode_step` (shown above) the attention reshapes the query into $G$ groups of $n_h / G$ heads, and
# each group attends to its own cached key/value head without copying it. The reference is the
# multi-head decoder whose key/value heads are the GQA ones repeated per group:

# %%
show(repeat_kv_heads)

# %%
for G in (N_KV_HEADS, 1):
    m_g = gqa if G == N_KV_HEADS else decoder_init(vocab=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                                                   d_ff=D_FF, max_len=MAX_LEN, seed=SEED, n_kv_heads=1)
    full_g = decoder_forward(repeat_kv_heads(m_g), probe[:2, :24])
    cache_g = ContiguousCache(m_g, 2, 24)
    for t in range(24):
        np.testing.assert_allclose(decode_step(m_g, probe[:2, t], np.full(2, t), cache_g), full_g[:, t],
                                   rtol=1e-10, atol=1e-10)
    assert generate(m_g, prompts[:2], 8) == [reference_generate(repeat_kv_heads(m_g), p_, 8) for p_ in prompts[:2]]
    print(f"{N_HEADS} query heads, {G} KV head(s): cached decoding == multi-head decoder with repeated KV heads; "
          f"{ef.kv_cache_bytes(m_g, 1)} bytes per cached token (MHA: {ef.kv_cache_bytes(params, 1)})")
one_group = decoder_init(vocab=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS, d_ff=D_FF,
                         max_len=MAX_LEN, seed=SEED, n_kv_heads=N_HEADS)
assert np.array_equal(decoder_forward(one_group, probe), decoder_forward(params, probe))  # n_kv = n_h: unchanged

# %% [markdown]
# **Speculative decoding.** `speculative_accept` is the verification rule of one round;
# `speculative_generate` runs the rounds. The target's check of $k$ drafted tokens is a single
# `decode_step` call over $k+1$ consecutive positions of one sequence: each row writes its key and value
# before the next row reads, so the rows attend causally, and the weights are read once for all of them.
# Rejected positions need no undo: the cache is indexed by position, and the next round overwrites them.

# %%
show(sp.speculative_accept, sp.speculative_generate)

# %% [markdown]
# First the rule alone, on a vocabulary of 6 tokens with fixed target and draft distributions: over
# many seeded rounds, the first emitted token must follow $p_0$, whatever $q$ proposes. A rule that
# resamples from $p$ itself after a rejection (instead of from $\max(0, p - q)$) is the control that
# must fail the same test.

# %%
V6, n_draws = 6, 6000
p_small = sp.softmax_probs(1.5 * rng.standard_normal((3, V6)))
q_small = sp.softmax_probs(1.5 * rng.standard_normal((2, V6)))
draw_rng = np.random.default_rng(SEED)
right, wrong = np.zeros(V6), np.zeros(V6)
for _ in range(n_draws):
    xs = np.array([draw_rng.choice(V6, p=q_small[i]) for i in range(2)])
    right[sp.speculative_accept(p_small, q_small, xs, draw_rng)[0][0]] += 1
    x0 = xs[0]
    keep = draw_rng.random() < min(1.0, p_small[0, x0] / q_small[0, x0])
    wrong[x0 if keep else draw_rng.choice(V6, p=p_small[0])] += 1
tv = {name: 0.5 * np.abs(c / n_draws - p_small[0]).sum() for name, c in (("rule", right), ("control", wrong))}
tv_q = 0.5 * np.abs(q_small[0] - p_small[0]).sum()
print(f"total variation from the target over {n_draws} rounds: speculative rule {tv['rule']:.4f}, control "
      f"{tv['control']:.4f}; the draft itself is {tv_q:.3f} away")
assert tv["rule"] < 0.03 < tv["control"]

# %% [markdown]
# Now the decoder. A trained draft is distilled to agree with its target; with random weights we build
# that agreement in. The target has `SPEC_LAYERS` wide blocks whose upper blocks write `SPEC_EPS` times
# their output into the residual stream (`damp_upper_blocks`): they refine what the first block predicts.
# The draft is the target's first block with its embeddings and head (`draft_by_layer_skip`, the
# early-exit drafts of self-speculative decoding), so it costs about $1/$`SPEC_LAYERS` of a target step.
# Greedy speculative decoding must emit the target's greedy tokens one for one, at every $k$; we time it
# against the target decoding alone and count the acceptance rate and tokens per target pass (the
# acceptance rate at temperature 1 is counted too):

# %%
spec_base = decoder_init(vocab=VOCAB, d_model=WIDE_D_MODEL, n_heads=8, n_layers=SPEC_LAYERS, d_ff=WIDE_D_FF,
                         max_len=MAX_LEN, seed=SEED)
target = sp.damp_upper_blocks(spec_base, 1, SPEC_EPS)
draft = sp.draft_by_layer_skip(target, 1)
spec_prompt = rng.integers(0, VOCAB, size=8)


def timed(fn, *args, **kwargs):
    """(the last result, the median wall time of SPEC_REPEATS calls)."""
    times = []
    for _ in range(SPEC_REPEATS):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


with threadpool_limits(limits=1):
    (want_spec,), t_plain = timed(generate, target, [spec_prompt], SPEC_NEW)
    spec = {}
    for k in SPEC_KS:
        (got_spec, st), t_k = timed(sp.speculative_generate, target, draft, spec_prompt, SPEC_NEW, k=k, greedy=True)
        assert got_spec == want_spec, k
        _, st_t1 = sp.speculative_generate(target, draft, spec_prompt, SPEC_NEW, k=k, seed=SEED)
        spec[k] = {"a": st.acceptance, "tpp": st.tokens_per_pass, "S": t_plain / t_k, "a_t1": st_t1.acceptance}
print(f"{'k':>3} {'acceptance':>10} {'tokens/pass':>11} {'formula':>8} {'measured S':>10} {'acceptance, T=1':>15}")
for k, r in spec.items():
    print(f"{k:>3} {r['a']:>10.2f} {r['tpp']:>11.2f} {sp.expected_tokens_per_pass(r['a'], k):>8.2f} "
          f"{r['S']:>10.2f} {r['a_t1']:>15.2f}")
print(f"target alone: {SPEC_NEW / t_plain:.0f} tokens/s; greedy speculative tokens == target's greedy tokens at "
      f"every k")
best_k = max(spec, key=lambda k: spec[k]["S"])
assert max(r["tpp"] for r in spec.values()) > 1.5  # tokens per pass are counted, not timed
fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
ax[0].plot(SPEC_KS, [r["tpp"] for r in spec.values()], "o-", label="measured")
ax[0].plot(SPEC_KS, [sp.expected_tokens_per_pass(r["a"], k) for k, r in spec.items()], "s--",
           label="(1 - a^(k+1)) / (1 - a)")
ax[0].set(xlabel="draft length k", ylabel="tokens per target pass", title="tokens per pass over the weights")
ax[0].legend()
ax[1].plot(SPEC_KS, [r["S"] for r in spec.values()], "o-")
ax[1].axhline(1, color="gray", ls=":")
ax[1].set(xlabel="draft length k", ylabel="speed-up S over the target alone",
          title="measured here (NumPy, 1 thread)")
plt.tight_layout()
plt.show()

# %% [markdown]
# Tokens per pass follow the formula closely: it assumes every draft is accepted independently with
# the same probability, which a real draft only approximates. The speed-up is the tokens per pass
# divided by the cost of a round, $k$ draft steps plus one verify pass: each extra drafted token costs a
# draft step whether or not it survives, while the chance that it survives, $a^k$, shrinks, so past some
# $k$ longer drafts cost more than they return. On a GPU the verify pass over $k+1$ tokens costs about
# one decode step (memory-bound); in NumPy it costs a little more, because attention runs per row, and
# the timings move with the load of a shared machine.
#
# ## 5. The same task with production libraries: torchao, PyTorch and transformers
#
# **torchao.** `quantize_(model, Int8WeightOnlyConfig())` replaces each `nn.Linear` weight by an
# `Int8Tensor` with one scale per output channel. Its convention differs from ours in one detail: it
# uses all 256 codes, step $\max|W|/127.5$ and codes in $[-128, 127]$ (our `levels="full"`), where the
# chapter's default keeps the range symmetric at $\pm 127$. With that option our codes and scales
# equal torchao's bit for bit, on a matrix of our decoder.

# %%
hf.quiet()  # torchao's note on the CUDA kernels it cannot load here, torch's deprecations, progress bars
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is downloaded: the models below are built from a config
warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
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
# **PyTorch's attention.** `torch.nn.functional.scaled_dot_product_attention` is the production entry
# point: on a GPU it dispatches to a FlashAttention kernel, on this CPU to a fused C++ kernel. Our tiled
# loop must agree with it, causal or not:

# %%
for causal in (False, True):
    ref_att = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in qkv),
                                                               is_causal=causal).numpy()
    for bq, bk in ((16, 16), (37, 50)):
        np.testing.assert_allclose(fa.flash_attention(*qkv, causal=causal, block_q=bq, block_k=bk), ref_att,
                                   rtol=1e-12, atol=1e-12)
print(f"flash_attention == torch scaled_dot_product_attention (float64, N = {FLASH_N}, causal and not), "
      f"to {np.abs(fa.flash_attention(*qkv, causal=True, block_q=37, block_k=50) - ref_att).max():.1e}")

# %% [markdown]
# **Assisted generation in transformers.** `generate(..., assistant_model=...)` is transformers'
# speculative decoding. Our target and its one-block draft go into two GPT-2 models (`ef.to_gpt2`);
# greedy assisted generation must emit the target's greedy tokens, which our speculative decoder emits
# too. We time it against the GPT-2 target decoding alone.

# %%
import transformers  # noqa: E402

transformers.logging.set_verbosity_error()  # its notice about generation arguments is not a result
hf_target, hf_draft = ef.to_gpt2(target), ef.to_gpt2(draft)
ids = torch.from_numpy(spec_prompt[None])
hf_kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=SPEC_NEW, min_new_tokens=SPEC_NEW)
with threadpool_limits(limits=1):
    torch.set_num_threads(1)
    hf_target.generate(ids, assistant_model=hf_draft, **dict(hf_kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
    t0 = time.perf_counter()
    assisted = hf_target.generate(ids, assistant_model=hf_draft, **hf_kw)
    t_assisted = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain_hf = hf_target.generate(ids, **hf_kw)
    t_plain_hf = time.perf_counter() - t0
assert assisted[0, len(spec_prompt):].tolist() == want_spec == plain_hf[0, len(spec_prompt):].tolist()
print(f"transformers assisted generation: {SPEC_NEW} greedy tokens == the target's == our speculative decoder's; "
      f"{t_assisted:.2f} s against {t_plain_hf:.2f} s without the assistant ({t_plain_hf / t_assisted:.2f}x)")

# %% [markdown]
# transformers adapts the number of drafted tokens as it goes (it grows the draft while drafts are
# accepted and shrinks it after a rejection), where our `k` is fixed. Its speed-up on this CPU depends
# on how much of a step of these small GPT-2 models is framework overhead rather than reading weights:
# the draft, one block of the target, still pays the per-call overhead of a whole model, and each round
# adds the bookkeeping of candidates and caches, which with models this small can cost more than the
# saved target steps (the ratio printed above). The exactness holds either way; the speed-up needs a
# target whose step is dominated by reading its weights.

# %% [markdown]
# ### The real model: SmolLM2-135M-Instruct in int8 and int4
#
# Everything so far ran on decoders with random weights. The course also has a real one:
# SmolLM2-135M-Instruct (Allal et al., 2025; Apache-2.0), an instruction-tuned Llama of 30 layers of
# width $d = 576$, with 9 query heads sharing 3 key/value heads of $d_h = 64$ (grouped-query attention),
# a SwiGLU MLP of 1536 and a vocabulary of 49152 whose embedding is also the output head. `make install`
# unpacks it as one GGUF file of 98 MB in llama.cpp's Q4_1 format (`serving.model_files`), and
# `serving.llama` runs it: a NumPy decoder with RMSNorm, rotary positions, grouped-query attention and a
# KV cache (Chapter 36 shows it and uses it to read retrieved passages). The file is read once here and
# dequantized to float32. That float32 model is the reference for everything below; its values are the
# file's own 4-bit ones, unpacked, so "float32" means "the weights as shipped".

# %%
from scaleoutai.serving import llama, model_files  # noqa: E402

lm_file = model_files.read_gguf()  # read and dequantized once for the chapter
lm = llama.llama_weights(lm_file)
lm_tok = model_files.load_tokenizer()
lm_cfg, lm_P = lm.config, lm_file.n_params
assert (lm_cfg.n_layers, lm_cfg.d_model, lm_cfg.n_heads, lm_cfg.n_kv_heads, lm_cfg.d_head) == (30, 576, 9, 3, 64)
print(f"SmolLM2-135M-Instruct: P = {lm_P:,} parameters; {lm_cfg.n_layers} layers, d = {lm_cfg.d_model}, "
      f"{lm_cfg.n_heads} query heads sharing {lm_cfg.n_kv_heads} KV heads of {lm_cfg.d_head}, MLP {lm_cfg.d_ff}, "
      f"vocabulary {lm_cfg.vocab} (tied head); the file stores it in {lm_file.stored_bytes / 1e6:.1f} MB")

# %% [markdown]
# **Quantizing it.** Its matrices are stored as (out, in), so int8 per channel is `quantize_int8` with
# `axis=0`: one scale per output row. The 4-bit variant cannot afford one scale per row: with 15 levels
# a row's largest weight would leave most of the others one or two codes. `quantize_int4` gives every
# run of `LM_GROUP` consecutive inputs of a row its own scale $s = \max|W_{group}|/7$ and codes in
# $[-7, 7]$, the grouping of llama.cpp's Q4_0 blocks and of AWQ and GPTQ checkpoints; the bound is
# still half a step, now the step of the weight's own group. Stored, two codes share a byte and each
# group adds one scale: $4 + 32/g$ bits per weight with float32 scales ($g = 32$: 5 bits).

# %%
show(qz.quantize_int4)

# %% [markdown]
# `quantize_llama` quantizes the seven matrices of every layer and the tied embedding (which is also the
# head: 21% of the parameters) and keeps the norms in float32. It returns a `LlamaWeights` whose matrices
# are the **dequantized** codes, with the bytes the codes and scales would occupy counted beside it. We
# chose this over a second decoder that multiplies codes and scales itself because then one `forward`
# runs float32, int8 and int4 alike, so any change in the answers is the quantization's and not a second
# implementation's; and the numbers multiplied are exactly those of a weight-only kernel, which widens
# the codes to float on their way into the product (as `int8_linear` does). What it does not show is the
# speed: our product still reads float32 (Section 7 measures what that costs). The bytes must equal the
# count from the shapes, matrix by matrix:

# %%
with threadpool_limits(limits=1):
    lm_q = {"int8": qz.quantize_llama(lm, bits=8), "int4": qz.quantize_llama(lm, bits=4, group=LM_GROUP)}
lm_mats = [lm.embed] + [L[k] for L in lm.layers for k in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")]
lm_vec = lm_P - sum(m.size for m in lm_mats)  # the norms' weights, kept in float32
lm_want = {"int8": sum(m.size + 4 * m.shape[0] for m in lm_mats) + 4 * lm_vec,
           "int4": sum(m.size // 2 + 4 * m.size // LM_GROUP for m in lm_mats) + 4 * lm_vec}
for name, Qm in lm_q.items():
    assert Qm.nbytes == lm_want[name] and Qm.float_nbytes == 4 * lm_P, name
print(f"{'weights':>34} {'MB':>7} {'bits/param':>10} {'vs float32':>10}")
for label, nb in [("float32", 4 * lm_P), ("the file (Q4_1, embedding Q8_0)", lm_file.stored_bytes),
                  ("int8, a scale per row", lm_q["int8"].nbytes),
                  (f"int4, a scale per {LM_GROUP} inputs", lm_q["int4"].nbytes)]:
    print(f"{label:>34} {nb / 1e6:7.1f} {8 * nb / lm_P:10.2f} {4 * lm_P / nb:9.2f}x")
fig, ax = plt.subplots(figsize=(7, 3.5))
for name, Qm in lm_q.items():
    per_layer = [np.mean([Qm.rel_error[(i, k)] for k in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")])
                 for i in range(lm_cfg.n_layers)]
    ax.semilogy(per_layer, "o-", ms=3, label=f"{name} (embedding: {Qm.rel_error[('embed', 'embed')]:.3f})")
ax.set(xlabel="layer", ylabel="mean ||W - deq(W)|| / ||W||", title="SmolLM2-135M: relative weight error per layer")
ax.legend()
plt.show()

# %% [markdown]
# **What the answers become.** Each prompt in the chat template, answered greedily with at most `LM_NEW`
# tokens by the float32 model, its int8 and its int4 versions, and by transformers' `LlamaForCausalLM`
# holding the same float32 weights (`llama.reference_model`, built once): ours and transformers' must
# emit the same tokens, and so must int8. Over the first prompt's positions we also compare the logits
# themselves: the largest difference from float32's and the share of positions whose top-1 token agrees.

# %%
lm_ref = llama.reference_model(lm)  # transformers' LlamaForCausalLM holding the same float32 weights
lm_models = {"float32": lm, "int8": lm_q["int8"].weights, "int4": lm_q["int4"].weights}
lm_answers = {}
with threadpool_limits(limits=1):
    for prompt in LM_PROMPTS:
        ids = llama.chat_ids(lm_tok, prompt)
        outs = {name: llama.generate(m, ids, LM_NEW) for name, m in lm_models.items()}
        assert outs["float32"] == llama.reference_generate(lm_ref, ids, LM_NEW, lm_cfg.eos_id), prompt
        lm_answers[prompt] = outs
        print(f"{prompt!r} ({len(ids)} prompt tokens; transformers' tokens == float32's)")
        for name, out in outs.items():
            print(f"  {name:>7}: {lm_tok.decode(out, skip_special_tokens=True)!r}")
    lm_ids0 = llama.chat_ids(lm_tok, LM_PROMPTS[0])
    lm_logits = {name: llama.forward(m, lm_ids0) for name, m in lm_models.items()}
lm_err = {name: (float(np.abs(lm_logits[name] - lm_logits["float32"]).max()),
                 float((lm_logits[name].argmax(-1) == lm_logits["float32"].argmax(-1)).mean())) for name in lm_q}
for name, (e, a) in lm_err.items():
    print(f"{name}: max |logit - float32's| {e:.2f} (logits' std {lm_logits['float32'].std():.2f}); top-1 agrees at "
          f"{a:.0%} of the {len(lm_ids0)} prompt positions")
assert all(o["int8"] == o["float32"] for o in lm_answers.values())
assert lm_err["int4"][0] > lm_err["int8"][0] and lm_err["int8"][1] >= 0.9

# %% [markdown]
# Int8 with a scale per row moves each matrix by about 1% and the answers not at all: the same tokens,
# with a top-1 token that agrees at nearly every prompt position. Round-to-nearest int4 moves each
# matrix by about 10%, even with a scale per 32 weights, and the logits several times more than int8's;
# an answer may survive (a short fact) or change (the arithmetic). That gap is why 4-bit schemes do not
# just round: AWQ (Lin et al., 2024) rescales the input channels that the activations say matter before
# rounding, GPTQ (Section 9) corrects the rounding error column by column. A second reason is
# particular to this file: its weights already sit on a 4-bit grid, Q4_1's $d q + m$ with an offset $m$
# per block of 32, which a symmetric grid without offset cannot reproduce.

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
# **A draft that disagrees.** Speculative decoding is only as good as the draft's agreement with the
# target. Keep the same draft but let the target's upper blocks write their full output
# (`SPEC_EPS` = 1, the undamped decoder): the draft now predicts a different model, and the drafted
# tokens are mostly wasted work. The output stays exactly the target's; only the speed is lost.

# %%
k_bad = best_k
with threadpool_limits(limits=1):  # the undamped decoder has the target's shape: its plain decoding costs t_plain
    (got_bad, st_bad), t_bad = timed(sp.speculative_generate, spec_base, sp.draft_by_layer_skip(spec_base, 1),
                                     spec_prompt, SPEC_NEW, k=k_bad, greedy=True)
assert got_bad == generate(spec_base, [spec_prompt], SPEC_NEW)[0]
print(f"k = {k_bad}: agreeing draft acceptance {spec[k_bad]['a']:.2f}, {spec[k_bad]['tpp']:.2f} tokens/pass, "
      f"S = {spec[k_bad]['S']:.2f}; disagreeing draft acceptance {st_bad.acceptance:.2f}, "
      f"{st_bad.tokens_per_pass:.2f} tokens/pass, S = {t_plain / t_bad:.2f}")
assert st_bad.acceptance < spec[k_bad]["a"] and st_bad.tokens_per_pass < spec[k_bad]["tpp"]

# %% [markdown]
# Serving engines guard against this by measuring the acceptance rate online and shrinking $k$, or
# switching speculation off, when it drops (transformers' assisted generation adapts $k$ this way).
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
# so their rows are the roofline's prediction (`perf.hardware.decode_step_seconds`), priced per GPU.
# A decode step for $B$ sequences at context $t$ reads the weights once **and** each sequence's KV cache:
#
# $$t_{step} = \max\Big(\frac{P w + B\, t \cdot \text{bytes per token}}{\text{bandwidth}},\;
#   \frac{2PB}{\text{peak}}\Big), \qquad \text{tokens/s} = B / t_{step},$$
#
# with $w$ bytes per weight and the cache in bf16. The GPU rows show a 7B model with multi-head
# attention (Llama-2-7B's shape) and one with GQA (Mistral-7B), 16-bit and int8 weights, at batch 1 and
# 64 and context `DECODE_CONTEXT`; the "weights only" column is the model that forgets the cache.

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
print(f"\n{'GPU model, context ' + str(DECODE_CONTEXT):>52} {'weights only':>12} {'+ KV reads':>10} {'ratio':>6} "
      f"{'USD / M tokens':>15}")
gpu_rows = {"aws-g5.xlarge": hardware.A10G, "aws-p5.48xlarge": hardware.H100_SXM}
overstated = {}
for itype, gpu in gpu_rows.items():
    price = capstone.lookup(itype)
    for mname in ("Llama-2-7B (MHA)", "Mistral-7B"):
        m7 = ef.OPEN_MODELS[mname]
        for label, w in (("16-bit", 2), ("int8", 1)):
            for B in (1, 64):
                label_row = f"{mname}, {label}, B = {B}, 1 GPU of {itype}"
                need = m7.params * w + B * DECODE_CONTEXT * m7.kv_bytes_per_token()
                if need > gpu.memory_bytes:
                    nofit = f"does not fit: {need / 1e9:.0f} GB > {gpu.memory_bytes / 1e9:.0f} GB"
                    print(f"{label_row:>52} {nofit:>44}")
                    continue
                w_only = ef.decode_tokens_per_s(m7, B, DECODE_CONTEXT, gpu, weight_itemsize=w, kv=False)
                both = ef.decode_tokens_per_s(m7, B, DECODE_CONTEXT, gpu, weight_itemsize=w)
                overstated[(itype, mname, label, B)] = w_only / both
                usd = perf.run_cost(price.price_per_hour / price.gpus, 1, 1e6 / both)
                print(f"{label_row:>52} {w_only:>12.0f} {both:>10.0f} {w_only / both:>6.2f} {usd:>15.4f}")
print(f"CPU rows priced as one {cpu.instance_type} at {cpu.price_per_hour} USD/h ({cpu.date}); GPU rows per GPU of "
      f"the instance; GPU tokens/s are roofline predictions from spec-sheet bandwidth and peak, not measurements")
assert uncached < cached and tput[BATCHES[-1]] > tput[BATCHES[0]]
mha_64 = overstated[("aws-p5.48xlarge", "Llama-2-7B (MHA)", "16-bit", 64)]
gqa_64 = overstated[("aws-p5.48xlarge", "Mistral-7B", "16-bit", 64)]
assert mha_64 > gqa_64 > 1 and overstated[("aws-p5.48xlarge", "Llama-2-7B (MHA)", "16-bit", 1)] < 1.05
print(f"H100, 16-bit, B = 64, context {DECODE_CONTEXT}: the weights-only model overstates throughput "
      f"{mha_64:.2f}x for the MHA 7B, {gqa_64:.2f}x for the GQA 7B")

# %% [markdown]
# Batching is the cheapest lever: the same weights, read once, serve $B$ tokens. But only the weights
# are shared: every sequence brings its own cache, and at batch 64 and a few hundred tokens of context
# the caches of a multi-head 7B model outweigh its weights, so the weights-only model overstates its
# throughput by the ratio printed above. GQA cuts the cache term fourfold and most of that gap with it;
# at batch 1 the cache hardly matters. On this CPU the cost per token falls by
# the measured $S$, far less than $B$, because of the per-token work that batching does not share.
# Int8 halves the bytes a 16-bit model reads per token, and the predicted memory-bound throughput
# doubles with it. Our NumPy `int8_linear` does not get that speedup: it widens the codes to float
# before the product, so it saves memory for storage but not traffic into the arithmetic units; a
# fused int8 kernel reads the codes themselves. Without the cache a token costs many times what it
# costs with it at the same context, and the gap grows with the context (Section 4's plot).
#
# **Speculative decoding on a GPU.** At batch 1 a decode step is memory-bound, so the target's pass over
# $k+1$ tokens costs about one step, and a draft step costs the draft's bytes over the bandwidth. Take a
# pair that shares a tokenizer, Llama-3-70B with Llama-3-8B as its draft, both with int8 weights and a
# bf16 cache at context `GPU_CONTEXT` on one H200; with the step times from `perf.hardware`, the
# speed-up at each $k$ for the acceptance rates measured in Section 4, and for three typical ones:

# %%
big, small_m = ef.OPEN_MODELS["Llama-3-70B"], ef.OPEN_MODELS["Llama-3-8B"]
gpu_s = hardware.H200


def step_time(m, tokens=1):
    return tokens / ef.decode_tokens_per_s(m, 1, GPU_CONTEXT, gpu_s, weight_itemsize=1, tokens_per_seq=tokens)


t_target, t_draft = step_time(big), step_time(small_m)
c_ratio = t_draft / t_target
print(f"{gpu_s.name}: target step {t_target * 1e3:.1f} ms, draft step {t_draft * 1e3:.2f} ms (c = {c_ratio:.3f}); "
      f"verify pass over 9 tokens {step_time(big, 9) * 1e3:.1f} ms")
alphas = {"measured (Section 4)": None, "a = 0.6": 0.6, "a = 0.8": 0.8, "a = 0.9": 0.9}
print(f"{'k':>3} " + " ".join(f"{name:>21}" for name in alphas))
modelled = {name: [] for name in alphas}
for k in SPEC_KS:
    cells = []
    for name, a in alphas.items():
        a_k = spec[k]["a"] if a is None else a
        S_k = sp.modelled_speedup(a_k, k, t_target, t_draft, step_time(big, k + 1))
        modelled[name].append(S_k)
        cells.append(f"{S_k:>21.2f}")
    print(f"{k:>3} " + " ".join(cells))
assert all(abs(sp.modelled_speedup(0.8, k, t_target, t_draft, step_time(big, k + 1))
               - sp.expected_speedup(0.8, k, c_ratio)) < 0.05 for k in SPEC_KS)

# %% [markdown]
# With the verify pass costing one step, the modelled speed-up is Leviathan et al.'s
# $(1 - a^{k+1}) / ((1 - a)(ck + 1))$ (the assert checks the two agree). The modelled GPU can gain more
# than our CPU at the same acceptance rate because its draft is cheaper relative to the target ($c$
# above) and its verify pass really is one step. Speculative decoding helps where the step is memory-bound, at small
# batch; at large batch the step is already compute-heavy, the verify pass is no longer free, and
# serving engines turn speculation down.

# %% [markdown]
# ### The real model on this CPU: measured beside modelled
#
# **Its KV cache.** SmolLM2 keeps, per token, a key and a value for each of its 3 KV heads of 64 in each
# of its 30 layers: $2 \cdot 30 \cdot 3 \cdot 64 = 11{,}520$ numbers, 45 KiB in float32. With multi-head
# attention (9 KV heads) it would be three times that. `llama.KVCache` must hold exactly that after the
# first prompt and `LM_STEPS` decode steps, which we time one by one (batch 1, one BLAS thread):

# %%
lm_cache = llama.KVCache(lm_cfg, len(lm_ids0) + LM_STEPS)
lm_step_s = []
with threadpool_limits(limits=1):
    lm_last = llama.forward(lm, lm_ids0, lm_cache, last_only=True)  # prefill
    for _ in range(LM_STEPS):
        t0 = time.perf_counter()
        lm_last = llama.forward(lm, [int(np.argmax(lm_last[-1]))], lm_cache)
        lm_step_s.append(time.perf_counter() - t0)
lm_kv = ef.kv_bytes_per_token(lm_cfg.n_layers, lm_cfg.n_kv_heads, lm_cfg.d_head, itemsize=4)
lm_kv_mha = ef.kv_bytes_per_token(lm_cfg.n_layers, lm_cfg.n_heads, lm_cfg.d_head, itemsize=4)
assert lm_kv == lm_cfg.kv_bytes_per_token() == 11_520 * 4 and lm_kv_mha == 3 * lm_kv
assert lm_cache.length == len(lm_ids0) + LM_STEPS and lm_cache.nbytes == lm_cache.length * lm_kv
print(f"KV cache after {lm_cache.length} tokens: {lm_cache.nbytes:,} bytes = {lm_cache.length} x {lm_kv:,} "
      f"(GQA, {lm_cfg.n_kv_heads} KV heads); multi-head attention would hold {lm_cache.length * lm_kv_mha:,}")
print(f"a full {lm_cfg.context}-token context: {lm_cfg.context * lm_kv / 1e6:.0f} MB with GQA, "
      f"{lm_cfg.context * lm_kv_mha / 1e6:.0f} MB with MHA, beside {4 * lm_P / 1e6:.0f} MB of float32 weights")

# %% [markdown]
# **Measured beside modelled.** The roofline of this machine (`peak`, `bw`, measured in Section 4 on one
# thread) goes into Part V's one cost model, `step_cost.StepCost`, as an accelerator of its own: a decode
# step reads the $4P$ bytes of the float32 weights and the cache, and does $2P$ FLOPs plus attention's.
# The measured steps are slower than that bound by a wide margin. Chapter 3 calibrates a model by fitting
# the constant it leaves out: a step is $t = \alpha + n/bw$ for the $n$ bytes the roofline moves, with
# $bw$ fixed at the measured bandwidth, and the least-squares $\alpha$ is the mean of the measured time
# minus the modelled one; `StepCost`'s `overhead` term is that $\alpha$.

# %%
import dataclasses  # noqa: E402

from scaleoutai.serving.step_cost import StepCost  # noqa: E402

this_cpu = hardware.Accelerator("this CPU, 1 thread (measured)", bw, peak,
                                float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
lm_cost = StepCost(weight_bytes=4 * lm_P, kv_bytes_per_token=lm_kv, flops_per_token=2 * lm_P, gpu=this_cpu,
                   attn_flops_per_pair=4 * lm_cfg.n_layers * lm_cfg.n_heads * lm_cfg.d_head)
lm_ctx = len(lm_ids0) + np.arange(LM_STEPS) + 1  # the step at cache length c reads c tokens and writes one
lm_model_s = lm_cost(np.ones(LM_STEPS), lm_ctx, lm_ctx)
lm_meas = np.array(lm_step_s)
alpha_lm = max(0.0, float(np.mean(lm_meas - lm_model_s)))  # least squares with the slope fixed: the mean
lm_cal = dataclasses.replace(lm_cost, overhead=alpha_lm)
print(f"decode at batch 1: measured {1 / np.median(lm_meas):.1f} tokens/s ({np.median(lm_meas) * 1e3:.0f} ms/step); "
      f"roofline {1 / np.median(lm_model_s):.1f} tokens/s ({np.median(lm_model_s) * 1e3:.0f} ms/step: "
      f"{lm_cost.weight_bytes / 1e6:.0f} MB at {bw / 1e9:.1f} GB/s); measured / modelled time "
      f"{np.median(lm_meas) / np.median(lm_model_s):.1f}x")
print(f"calibrated: overhead alpha = {alpha_lm * 1e3:.0f} ms per step; the calibrated model predicts "
      f"{1 / np.median(lm_cal(np.ones(LM_STEPS), lm_ctx, lm_ctx)):.1f} tokens/s")
print(f"{'weights read per step':>40} {'roofline tokens/s':>17} {'calibrated tokens/s':>19}")
for name, nb in (("float32", 4 * lm_P), ("int8 (a fused kernel)", lm_q["int8"].nbytes),
                 (f"int4, g = {LM_GROUP} (a fused kernel)", lm_q["int4"].nbytes)):
    ideal, cal = (dataclasses.replace(cm, weight_bytes=nb) for cm in (lm_cost, lm_cal))
    print(f"{name:>40} {1 / ideal.step_seconds(1, lm_ctx[-1], lm_ctx[-1]):>17.1f} "
          f"{1 / cal.step_seconds(1, lm_ctx[-1], lm_ctx[-1]):>19.1f}")
assert alpha_lm == 0.0 or abs(np.mean(lm_cal(np.ones(LM_STEPS), lm_ctx, lm_ctx)) - np.mean(lm_meas)) < 1e-9  # fitted

# %% [markdown]
# The roofline is a lower bound, and our decoder sits well above it, for reasons a serving engine
# removes: every layer is a dozen separate NumPy calls (norms, RoPE, attention, SwiGLU), each allocating
# its output and paying Python's dispatch; the matrix-vector products at batch 1 run in BLAS, but the
# attention over the cache and the rotations are small operations whose fixed costs do not shrink with
# the bytes; and the bandwidth we measured is that of a streaming copy, which a product that reads a
# (576, 1536) matrix row by row through a transposed view need not reach. The fitted $\alpha$ carries all
# of that. It also changes what int8 would buy here: the roofline says int8 weights make a step up to
# four times faster than float32 (a quarter of the bytes, until the arithmetic binds: where the int8
# and int4 rows are equal, both have reached the compute roof of this CPU), the calibrated model says
# much less, because the overhead does not shrink with the weights. That is the general lesson of
# calibration: a lever that attacks one term of the model gains only that term's share of the measured
# time. (The compute roof is generous too: `peak` is a float64 product's, and float32 runs about twice
# as fast.) On a GPU, fused kernels and CUDA graphs shrink $\alpha$ to microseconds, and the weights'
# bytes are most of the step.

# %% [markdown]
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
# 6. **Tiles for decoding.** At decode time attention has one query row and $N$ cached keys, so tiling
#    the queries does nothing. Split the keys into $S$ chunks instead, let each chunk return its
#    partial $(m, \ell, \text{acc})$ independently (on a GPU, in parallel: Flash-Decoding), and merge the
#    partials with the online-softmax rescaling. Implement the merge and check it against
#    `naive_attention` for several $S$, including chunks of unequal size.
# 7. **How many KV heads?** For a model of Llama-3-8B's shape (32 layers, 32 query heads of 128) on one
#    H100 at context 8192 in bf16, compute the largest batch that fits and the modelled decode
#    throughput at that batch (weights and cache reads, `ef.decode_tokens_per_s`) for 32, 8 and 1 KV
#    heads. How much of GQA's gain is memory capacity and how much is bandwidth?
# 8. **The best draft length.** From $S(k) = (1 - a^{k+1}) / ((1 - a)(ck + 1))$, find the $k$ that
#    maximises the speed-up for $a \in \{0.6, 0.8, 0.9\}$ and $c \in \{0.05, 0.11, 0.3\}$. How does the
#    best $k$ move with $a$ and with $c$, and what speed-up does it give? Compare with the best $k$
#    measured in Section 4.
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
#   - Lin, Tang, Tang, Yang, Chen, Wang, Xiao, Dang, Gan and Han, "AWQ: Activation-aware Weight
#     Quantization for On-Device LLM Compression and Acceleration", MLSys, 2024 (arXiv:2306.00978).
#     Group-wise 4-bit weights whose salient input channels, found from the activations, are scaled up
#     before rounding; the round-to-nearest int4 of Section 5 is its baseline.
#   - Allal et al., "SmolLM2: When Smol Goes Big -- Data-Centric Training of a Small Language Model",
#     arXiv preprint, 2025 (arXiv:2502.02737). The family whose 135M instruction-tuned member is quantized
#     and timed in Sections 5 and 7; how far small, heavily over-trained models can be quantized before
#     their answers change is an open question.
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
#     IO-Awareness", NeurIPS, 2022. Tiles attention so the score matrix never reaches slow memory; the
#     online softmax and HBM-traffic count of Sections 2-4.
#   - Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning", ICLR, 2024
#     (arXiv:2307.08691). Swaps the loops (queries outside, as our `flash_attention` does), parallelises
#     over the sequence and cuts non-matmul FLOPs: about 2x over FlashAttention on A100.
#   - Shah, Bikshandi, Zhang, Thakkar, Ramani and Dao, "FlashAttention-3: Fast and Accurate Attention
#     with Asynchrony and Low-precision", NeurIPS, 2024. Overlaps data movement and matrix units with
#     warp specialisation on Hopper GPUs and adds FP8 with block quantization; the open question is
#     how much of this each new accelerator generation must redo by hand.
#   - Ainslie, Lee-Thorp, de Jong, Zemlyanskiy, Lebron and Sanghai, "GQA: Training Generalized
#     Multi-Query Transformer Models from Multi-Head Checkpoints", EMNLP, 2023 (arXiv:2305.13245).
#     Grouped-query attention, and uptraining a multi-head checkpoint into it with 5% of the
#     pre-training compute; how few KV heads a model can afford is still settled by experiment.
# - **Speculative decoding.** A draft model's guesses, checked in one pass, turn a memory-bound step
#   into several tokens without changing the output distribution; the open questions are where the
#   draft comes from (a smaller model, the target's own early layers, extra heads), how to adapt $k$
#   to the acceptance rate, and how speculation interacts with large batches, where the step is no
#   longer memory-bound.
#   - Leviathan, Kalman and Matias, "Fast Inference from Transformers via Speculative Decoding", ICML,
#     2023 (arXiv:2211.17192). The rejection rule of Section 2 with its proof that the output
#     distribution is the target's, and the $(1 - a^{k+1})/(1 - a)$ analysis of Sections 4 and 7.
#
# ## What's next
#
# Chapter 23 (Distributed inference) takes this one efficient node and multiplies it: replicas behind
# a router for throughput and tail latency, and tensor parallelism for a model that one node cannot
# hold. Chapter 24 (LLM serving) then replaces static batching with iteration-level scheduling and the
# contiguous cache with a paged one, removing the two wastes measured in Section 6.
