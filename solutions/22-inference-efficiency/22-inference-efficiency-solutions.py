# %% [markdown]
# # Chapter 22 solutions: Inference efficiency
#
# Worked solutions to the exercises of `chapters/22-inference-efficiency` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import itertools

import numpy as np
from threadpoolctl import threadpool_limits

from scaleoutai import nn
from scaleoutai.serving import efficiency as ef
from scaleoutai.serving import quantize as qz
from scaleoutai.serving.decoder import ContiguousCache, decoder_forward, decoder_init, generate

SEED = 0
rng = np.random.default_rng(SEED)
params = decoder_init(vocab=512, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, seed=SEED)
probe = rng.integers(0, 512, size=(8, 48))

# %% [markdown]
# ## Exercise 1 (coding): one scale per group of 32 input rows
#
# **Answer.** With a scale $s_{gc} = \max_{i \in g} |W_{ic}|/127$ for every group $g$ of 32 input rows
# of column $c$, rounding moves $W_{ic}$ by at most $s_{g(i)c}/2$, so
#
# $$|(xW)_c - (x\hat W)_c| \le \tfrac12 \sum_g s_{gc} \sum_{i \in g} |x_i|,$$
#
# which is never larger than the per-channel bound $\tfrac12 s_c \sum_i |x_i|$ because
# $s_{gc} \le s_c$ for every group. On the outlier matrix of Section 6 (column 7 scaled by 40) the
# per-channel scale already isolates the outlier *column*, so the gain is the within-column spread: the
# block maxima are smaller than the column maximum, and the measured error drops by roughly a third. The
# price is $d_{in}/32$ scales per column instead of one: with 16-bit scales, $2/32 = 0.0625$ extra
# bytes per weight (half a bit), so an int8 model grows by about 6%; with float64 scales as here,
# $8/32 = 0.25$ bytes per weight.

# %%
def quantize_groupwise(W, group=32):
    """int8 codes with one scale per (group of `group` input rows, output column); scales (G, d_out)."""
    d_in, d_out = W.shape
    blocks = W.reshape(d_in // group, group, d_out)
    amax = np.abs(blocks).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0)
    q = np.clip(np.round(blocks / scale[:, None, :]), -127, 127).astype(np.int8)
    return q.reshape(d_in, d_out), scale


def groupwise_linear(x, q, scale, group=32):
    """x @ deq(q): each group's partial product is rescaled by its own scale before the sum."""
    xg = x.reshape(x.shape[0], -1, group)                      # (rows, G, group)
    qg = q.reshape(-1, group, q.shape[1]).astype(x.dtype)     # (G, group, d_out)
    return np.einsum("rgi,gio,go->ro", xg, qg, scale)


def groupwise_bound(x, scale, group=32):
    """Half a step per weight: sum over groups of s_gc / 2 times the group's sum of |x_i|."""
    return 0.5 * np.abs(x).reshape(x.shape[0], -1, group).sum(axis=2) @ scale


W2 = params["blocks"][0]["W2"].copy()
W2[:, 7] *= 40.0
h = rng.standard_normal((64, len(W2)))
qg, sg = quantize_groupwise(W2)
deq = (qg.reshape(-1, 32, W2.shape[1]) * sg[:, None, :]).reshape(W2.shape)
assert np.all(np.abs(W2 - deq) <= np.repeat(sg, 32, axis=0) / 2 * (1 + 1e-12))
y_g = groupwise_linear(h, qg, sg)
np.testing.assert_allclose(y_g, h @ deq, rtol=1e-10, atol=1e-10)
err_g = np.abs(h @ W2 - y_g)
assert np.all(err_g <= groupwise_bound(h, sg) * (1 + 1e-12))
qc, sc = qz.quantize_int8(W2)
err_c = np.abs(h @ W2 - qz.int8_linear(h, qc, sc))
assert np.all(groupwise_bound(h, sg) <= qz.matmul_error_bound(h, sc) * (1 + 1e-12))  # the bound is tighter
print(f"mean |error|: per channel {err_c.mean():.5f}, per group of 32 {err_g.mean():.5f} "
      f"({err_c.mean() / err_g.mean():.2f}x smaller); scales {sc.size} -> {sg.size}")
assert err_g.mean() < err_c.mean()
extra_per_weight = sg.size * 2 / W2.size  # 16-bit scales
assert abs(extra_per_weight - 2 / 32) < 1e-15

# %% [markdown]
# ## Exercise 2 (analysis): dynamic int8 activations in the MLP, and an outlier
#
# **Answer.** With `int8_linear_dynamic` for $W_1$ and $W_2$ of every block (activations quantized
# per row, int8 products accumulated in int32), the greedy token still agrees at nearly every
# position of the probe (the code prints the share, about the same as weight-only int8). Injecting a
# $100\times$ outlier into one hidden unit of the MLP (its GELU output multiplied by 100 and the matching
# row of $W_2$ divided by 100, so the float model is unchanged) ruins it: the per-row activation step
# $\max_j |a_j|/127$ is now set by the outlier, and every other hidden unit of that row is rounded to a
# handful of codes. The agreement drops sharply.
#
# **Mitigation to try first: SmoothQuant-style scale migration.** Divide the outlier unit's activation
# by a per-channel factor and multiply the same row of $W_2$ by it: $a W = (a\,\mathrm{diag}(s)^{-1})
# (\mathrm{diag}(s) W)$ is exact in float, costs nothing at inference (fold $s$ into the previous
# layer), and moves the difficulty from the activations, quantized per row on the fly, into the
# weights, quantized offline per channel. The code applies it and shows the agreement coming back.
# The alternative, LLM.int8()'s mixed precision (the outlier column in float16), needs a second
# kernel and a gather at run time.

# %%
def forward_mlp(params, tokens, mode, hidden_scale=None):
    """Teacher-forced logits via the cache path, MLP in float ('float') or dynamic int8 ('int8')."""
    B, T = tokens.shape
    cache = ContiguousCache(params, B, max_len=T)
    n_heads = params["config"]["n_heads"]
    codes = [(qz.quantize_int8(p["W1"]), p["W2"]) for p in params["blocks"]]
    out = []
    for t in range(T):
        x = params["tok"][tokens[:, t]] + params["pos"][t]
        for layer, bp in enumerate(params.get("blocks")):
            p = bp
            h1 = nn.layer_norm_forward(x, p["ln1_g"], p["ln1_b"])[0]
            qh, kh, vh = h1 @ p["Wq"], h1 @ p["Wk"], h1 @ p["Wv"]
            o = np.empty_like(qh)
            for i in range(B):
                cache.write(layer, i, t, kh[i], vh[i])
                K, V = cache.read(layer, i, t + 1)
                dh = qh.shape[1] // n_heads
                s = np.einsum("hd,thd->ht", qh[i].reshape(n_heads, dh), K.reshape(-1, n_heads, dh)) / np.sqrt(dh)
                w = np.exp(s - s.max(axis=1, keepdims=True))
                w /= w.sum(axis=1, keepdims=True)
                o[i] = np.einsum("ht,thd->hd", w, V.reshape(-1, n_heads, dh)).reshape(-1)
            x2 = x + o @ p["Wo"]
            h2 = nn.layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])[0]
            hs = np.ones(p["W2"].shape[0]) if hidden_scale is None else hidden_scale[layer]
            W2s = p["W2"] / hs[:, None]
            if mode == "float":
                a = nn.gelu(h2 @ p["W1"] + p["b1"]) * hs
                x = x2 + a @ W2s + p["b2"]
            else:
                (q1, s1), _ = codes[layer]
                a = nn.gelu(qz.int8_linear_dynamic(h2, q1, s1) + p["b1"]) * hs
                q2, s2 = qz.quantize_int8(W2s)
                x = x2 + qz.int8_linear_dynamic(a, q2, s2) + p["b2"]
        hf, _ = nn.layer_norm_forward(x, params["lnf_g"], params["lnf_b"])
        out.append(hf @ params["head"])
    return np.stack(out, axis=1)


small_probe = probe[:4, :24]
ref = decoder_forward(params, small_probe)
np.testing.assert_allclose(forward_mlp(params, small_probe, "float"), ref, rtol=1e-9, atol=1e-9)


def agreement(logits):
    return float((logits.argmax(-1) == ref.argmax(-1)).mean())


n_layers, d_ff = 4, 512
spike = [np.ones(d_ff) for _ in range(n_layers)]
for s_ in spike:
    s_[11] = 100.0
smooth = [s_ / np.where(s_ > 1, 100.0, 1.0) for s_ in spike]  # the migration divides the unit back
np.testing.assert_allclose(forward_mlp(params, small_probe, "float", spike), ref, rtol=1e-9, atol=1e-9)
a_plain = agreement(forward_mlp(params, small_probe, "int8"))
a_spike = agreement(forward_mlp(params, small_probe, "int8", spike))
a_smooth = agreement(forward_mlp(params, small_probe, "int8", smooth))
print(f"greedy agreement with dynamic int8 MLP: {a_plain:.1%}; with a 100x hidden outlier {a_spike:.1%}; "
      f"after migrating the scale into W2 {a_smooth:.1%}")
assert a_plain > 0.9 and a_spike < a_plain - 0.1 and a_smooth == a_plain

# %% [markdown]
# ## Exercise 3 (coding): an int8 KV cache with one scale per row
#
# **Answer.** Storing each cached key and value row (length $d$) as int8 codes plus one float scale
# costs $2L(d + \text{itemsize})$ bytes per token instead of $2Ld\cdot\text{itemsize}$. For this decoder
# ($L = 4$, $d = 128$, float64): $2\cdot4\cdot136 = 1088$ bytes instead of $8192$, a $7.5\times$ saving
# (against a 16-bit cache with a 16-bit scale: $d+2$ against $2d$ bytes, just under $2\times$). Each
# dequantized entry is within half a step $s_{row}/2$ of the float one. Over 200 greedy steps from one
# prompt, the code counts the tokens that differ from the float-cache run: greedy decoding is chaotic
# once one token flips (everything after it is a different continuation), so report both the first
# divergence and the count; the teacher-forced agreement (same prefix, compare the argmax at each
# position) is the fairer per-token measure and stays above 90%.

# %%
class Int8RowCache:
    """KV cache holding int8 codes and one scale per (layer, sequence, position) row of K and of V."""

    def __init__(self, params, sequences, max_len=None):
        cfg = params["config"]
        self.max_len = cfg["max_len"] if max_len is None else max_len
        shape = (cfg["n_layers"], sequences, self.max_len, cfg["d_model"])[:4]
        self.kq, self.vq = np.zeros(shape, np.int8), np.zeros(shape, np.int8)
        self.ks, self.vs = np.ones(shape[:3]), np.ones(shape[:3])

    def write(self, layer, seq, pos, k, v):
        if pos >= self.max_len:
            raise ValueError(f"position {pos} is beyond the {self.max_len} rows of this cache")
        for row, codes, scales in ((k, self.kq, self.ks), (v, self.vq, self.vs)):
            q, s = qz.quantize_int8(row[:, None], axis=1)
            codes[layer, seq, pos], scales[layer, seq, pos] = q[:, 0], s[0]

    def read(self, layer, seq, length):
        k = self.kq[layer, seq, :length] * self.ks[layer, seq, :length, None]
        v = self.vq[layer, seq, :length] * self.vs[layer, seq, :length, None]
        return k, v

    @property
    def nbytes(self):
        return self.kq.nbytes + self.vq.nbytes + self.ks.nbytes + self.vs.nbytes


L, d = 4, 128
c8, c64 = Int8RowCache(params, 1, 256), ContiguousCache(params, 1, 256)
per_tok_8, per_tok_64 = c8.nbytes / 256, c64.nbytes / 256
assert per_tok_8 == 2 * L * (d + 8) and per_tok_64 == ef.kv_cache_bytes(params, 1) == 2 * L * d * 8
k_row = rng.standard_normal(d)
c8.write(0, 0, 0, k_row, k_row)
assert np.all(np.abs(c8.read(0, 0, 1)[0][0] - k_row) <= c8.ks[0, 0, 0] / 2 * (1 + 1e-12))
prompt = probe[0, :8]
with threadpool_limits(limits=1):
    toks64 = generate(params, [prompt], 200)[0]
    toks8 = generate(params, [prompt], 200, cache=Int8RowCache(params, 1, 256))[0]
diff = [i for i in range(200) if toks8[i] != toks64[i]]
print(f"KV bytes per token: float64 {per_tok_64:.0f}, int8 + scale {per_tok_8:.0f} ({per_tok_64 / per_tok_8:.2f}x); "
      f"{len(diff)} of 200 greedy tokens differ, first at step {diff[0] if diff else None}")


def teacher_forced(cache_cls, tokens):
    """Argmax at every position when the true tokens are fed, through a given cache class."""
    from scaleoutai.serving.decoder import decode_step
    cache = cache_cls(params, tokens.shape[0], tokens.shape[1])
    return np.stack([decode_step(params, tokens[:, t], np.full(tokens.shape[0], t), cache).argmax(-1)
                     for t in range(tokens.shape[1])], axis=1)


tf = (teacher_forced(Int8RowCache, probe) == decoder_forward(params, probe).argmax(-1)).mean()
print(f"teacher-forced greedy agreement with the int8 cache: {tf:.1%}")
assert tf > 0.9

# %% [markdown]
# ## Exercise 4 (analysis): the batch size where decode becomes compute-bound
#
# **Answer.** Decode for $B$ sequences at context $t$ does $F(B) = B(2P + 4Ltd)$ FLOPs and moves
# $M(B) = w P + 8B(2Ltd + 2d)$ bytes, with $w$ the bytes per weight (8 in float64, 1 in int8; the
# cache and activations stay float64). It becomes compute-bound when $F(B)/M(B) \ge I^*$, the ridge
# point $\pi/\beta_{mem}$ of the measured roofline:
#
# $$B^* = \Big\lceil \frac{I^* w P}{2P + 4Ltd - 8 I^* (2Ltd + 2d)} \Big\rceil$$
#
# (and never, if the denominator is $\le 0$: then the cache traffic alone keeps decode memory-bound,
# the long-context regime). Int8 weights divide the weight bytes by 8, so $B^*$ falls roughly
# eightfold. The code measures the ridge on this machine (small kernels: the value moves between runs
# on a shared machine), computes $B^*$ for the chapter's wide decoder at context 6, and checks it
# against `ef.decode_cost` (the library's intensity crosses the ridge exactly between $B^*-1$ and
# $B^*$ in float64). In a sweep of `decode_throughput` the student sees the tokens/s curve bend and
# flatten around $B^*$, but later and more softly than the roofline says: the NumPy decoder's
# per-sequence Python work (attention loop, layer norms) grows with $B$ and is not in the count.

# %%
wide = decoder_init(vocab=512, d_model=512, n_heads=8, n_layers=2, d_ff=2048, max_len=256, seed=SEED)
with threadpool_limits(limits=1):
    peak, bw = ef.measure_roofline(matmul_n=384, copy_bytes=32 * 2**20, repeats=3)
ridge = peak / bw
Pw, Lw, dw, ctx = ef.matrix_params(wide), 2, 512, 6


def b_star(w_bytes, ridge):
    """Smallest B whose decode intensity reaches the ridge (None if it never does)."""
    den = 2 * Pw + 4 * Lw * ctx * dw - 8 * ridge * (2 * Lw * ctx * dw + 2 * dw)
    return None if den <= 0 else int(np.ceil(ridge * w_bytes * Pw / den))


def intensity(B, w_bytes):
    return B * (2 * Pw + 4 * Lw * ctx * dw) / (w_bytes * Pw + 8 * B * (2 * Lw * ctx * dw + 2 * dw))


b64, b8 = b_star(8, ridge), b_star(1, ridge)
print(f"measured ridge {ridge:.2f} FLOP/byte (peak {peak / 1e9:.1f} GFLOP/s, {bw / 1e9:.1f} GB/s): "
      f"decode compute-bound from B = {b64} (float64 weights), B = {b8} (int8 weights)")
assert b64 is not None and b8 is not None
for B in (1, b64, 2 * b64):  # the closed form agrees with the library's cost model
    assert abs(ef.decode_cost(wide, ctx, B).intensity - intensity(B, 8)) < 1e-12 * intensity(B, 8)
assert (b64 == 1 or ef.decode_cost(wide, ctx, b64 - 1).intensity < ridge) and ef.decode_cost(wide, ctx, b64).intensity >= ridge
assert intensity(b8, 1) >= ridge and (b8 == 1 or intensity(b8 - 1, 1) < ridge)
assert b8 <= b64 and b8 * 6 <= b64 + 6  # about eightfold fewer sequences needed

# %% [markdown]
# ## Exercise 5 (analysis): sort the trace before forming static batches
#
# **Answer.** Sorting the requests by their work $w_i = p_i + n_i - 1$ (prompt plus output steps)
# before cutting them into batches of $B$ puts similar lengths together, so each batch's maximum is
# close to its members' lengths and the padding waste falls (the code prints the numbers for the trace
# of Section 6; a large cut at $B = 16$). For a fixed batch size, consecutive groups of the sorted list
# *minimise* the total slots $\sum_{\text{batches}} B\max_{i\in b} w_i$: an exchange argument (swapping a
# long request into a batch with a larger maximum never raises that maximum and may lower the other),
# checked by brute force on a small instance.
#
# **Latency.** Batches run one after another, and a request finishes when its batch does. Sorted
# ascending (shortest batches first), a short request no longer waits behind long ones: its latency
# drops, and the mean latency drops too (shortest-job-first). The price is paid by the long requests,
# which now run last, and, in a live system, by any short request that **arrives after** a window of
# long ones has been sorted and started: it waits for the whole window, because a static batch cannot
# admit anyone until it ends. Sorting also needs the output length in advance, which a server only
# predicts. Continuous batching (Chapter 24) removes both problems.

# %%
trace_p = rng.integers(1, 32, size=48)
trace_n = rng.integers(1, 64, size=48)
work = trace_p + trace_n - 1


def batch_latencies(order, B):
    """Finish step of every request when batches of the given order run back to back."""
    fin, clock = {}, 0
    for i in range(0, len(order), B):
        grp = order[i:i + B]
        clock += int(work[grp].max())
        for j in grp:
            fin[j] = clock
    return np.array([fin[j] for j in range(len(order))])


for B in (4, 16):
    plain = ef.padding_waste(trace_p, trace_n, B)
    order = np.argsort(work, kind="stable")
    srt = ef.padding_waste(trace_p[order], trace_n[order], B)
    assert srt.useful == plain.useful and srt.computed <= plain.computed
    lat_plain = batch_latencies(np.arange(48), B)
    lat_sorted = batch_latencies(order, B)
    short = work <= np.percentile(work, 25)
    print(f"B={B:>2}: waste {plain.waste:.0%} -> {srt.waste:.0%}; mean latency of the shortest quarter "
          f"{lat_plain[short].mean():.0f} -> {lat_sorted[short].mean():.0f} steps; longest request "
          f"{lat_plain[work.argmax()]} -> {lat_sorted[work.argmax()]}")
    assert lat_sorted[short].mean() < lat_plain[short].mean()
    assert lat_sorted.mean() <= lat_plain.mean()
    assert lat_sorted[work.argmax()] == lat_sorted.max()  # the longest now finishes last

# brute force on 8 requests, batches of 4: sorted contiguous groups are optimal
w8 = rng.integers(1, 40, size=8)
best = min(4 * (w8[list(g)].max() + w8[[i for i in range(8) if i not in g]].max())
           for g in itertools.combinations(range(8), 4))
s8 = np.sort(w8)
assert 4 * (s8[:4].max() + s8[4:].max()) == best

# %% [markdown]
# ## Exercise 6 (coding): tiles for decoding, merged with the online softmax
#
# **Answer.** For one query row $q$ and a chunk $c$ of keys, compute the chunk's scores
# $s_c = qK_c^\top/\sqrt{d_h}$, its maximum $m_c$, its denominator $\ell_c = \sum e^{s_c - m_c}$ and its
# unnormalised output $a_c = e^{s_c - m_c} V_c$. The chunks are independent (on a GPU each goes to its
# own thread block, which is what makes Flash-Decoding fast when one query cannot fill the machine).
# The merge is the same rescaling as the online softmax: with $m = \max_c m_c$,
#
# $$o = \frac{\sum_c e^{m_c - m} a_c}{\sum_c e^{m_c - m} \ell_c},$$
#
# exact for any split, because every partial sum is moved to the common reference maximum $m$ by exactly
# the factor that separates it from its own. Chunks of unequal size change nothing. The code checks
# the merge against `naive_attention` for 1 to 7 chunks of random sizes and against a merge that forgets
# the rescaling (the control that must fail).

# %%
from scaleoutai.serving import flash_attention as fa


def partial_attention(q, K, V):
    """(m, l, acc) of one chunk: its max score, denominator and unnormalised output."""
    s = K @ q / np.sqrt(q.shape[-1])
    m = s.max()
    p = np.exp(s - m)
    return m, p.sum(), p @ V


def merge(parts, rescale=True):
    m = max(pm for pm, _, _ in parts)
    w = [np.exp(pm - m) if rescale else 1.0 for pm, _, _ in parts]
    return sum(wi * a for wi, (_, _, a) in zip(w, parts)) / sum(wi * l for wi, (_, l, _) in zip(w, parts))


N6, d6 = 300, 16
q6, K6, V6 = rng.standard_normal(d6) * 3, rng.standard_normal((N6, d6)) * 3, rng.standard_normal((N6, d6))
want6 = fa.naive_attention(q6[None], K6, V6)[0]
for S in range(1, 8):
    cuts = np.sort(rng.choice(np.arange(1, N6), size=S - 1, replace=False))
    bounds = np.r_[0, cuts, N6]
    parts = [partial_attention(q6, K6[a:b], V6[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    np.testing.assert_allclose(merge(parts), want6, rtol=1e-12, atol=1e-12)
    if S > 1:
        assert not np.allclose(merge(parts, rescale=False), want6, atol=1e-3)
print("split-K decoding attention merged with the online-softmax rescaling == naive attention for 1..7 chunks")

# %% [markdown]
# ## Exercise 7 (analysis): how many KV heads?
#
# **Answer.** With 32 layers, heads of 128 and bf16, a token costs $2 \cdot 32 \cdot n_{kv} \cdot 128
# \cdot 2 = 16384\,n_{kv}$ bytes: 512 KiB for 32 KV heads (MHA), 128 KiB for 8, 16 KiB for 1 (MQA). At
# context 8192 a sequence then needs 4 GiB, 1 GiB or 128 MiB. An 80 GB H100 holding 16 GB of bf16
# weights admits about 14, 59 and 476 sequences. At the batch that fills memory, a decode step reads
# the whole memory, weights and caches, so its time is about memory / bandwidth (24 ms) whatever
# $n_{kv}$: the step time barely changes and the throughput grows with the batch, that is, with the
# capacity. GQA's gain at the memory limit is therefore almost entirely capacity (more sequences per
# pass over the weights); its bandwidth gain shows at a fixed batch, where each step reads fewer cache
# bytes. The code computes both: the throughput at the largest batch, and the throughput at a fixed
# batch of 14 for the three head counts.

# %%
from scaleoutai.perf import hardware

shape = dict(params=8.03e9, n_layers=32, n_heads=32, head_dim=128)
rows = {}
for G in (32, 8, 1):
    m = ef.ModelShape(f"Llama-3-8B shape, {G} KV heads", n_kv_heads=G, **shape)
    B_max = ef.max_batch(m, 8192, hardware.H100_SXM.memory_bytes)
    rows[G] = (m.kv_bytes_per_token(), B_max, ef.decode_tokens_per_s(m, B_max, 8192, hardware.H100_SXM),
               ef.decode_tokens_per_s(m, 14, 8192, hardware.H100_SXM))
    print(f"{G:>2} KV heads: {rows[G][0] // 1024:>3} KiB/token, batch {B_max:>3} fits, {rows[G][2]:7.0f} tokens/s "
          f"at that batch, {rows[G][3]:6.0f} tokens/s at batch 14")
assert rows[32][0] == 4 * rows[8][0] == 32 * rows[1][0] == 512 * 1024
assert rows[32][1] < rows[8][1] < rows[1][1] and rows[8][1] >= 4 * rows[32][1] - 4
step = {G: rows[G][1] / rows[G][2] for G in rows}  # seconds per step at the largest batch
assert max(step.values()) / min(step.values()) < 1.15  # a full-memory step reads ~all of memory: same time
assert rows[1][3] > rows[8][3] > rows[32][3]  # at a fixed batch, fewer KV heads = fewer bytes per step

# %% [markdown]
# ## Exercise 8 (analysis): the best draft length
#
# **Answer.** $S(k) = (1 - a^{k+1}) / ((1 - a)(ck + 1))$ has no closed-form maximiser, but it is
# unimodal in $k$: the numerator's gains $a^{k+1}$ shrink geometrically while the cost grows linearly.
# Evaluating it for $k = 1..20$: the best $k$ grows with the acceptance rate $a$ (a long draft only pays
# if it usually survives) and falls as the draft gets more expensive ($c$ up). For $a = 0.8$ it is 6 at
# $c = 0.11$ (a speed-up of about 2.4) and 8 at $c = 0.05$ (about 3.1); for $a = 0.6$ and $c = 0.3$ the
# best is $k = 1$ and speculation gains only about 1.2x. Section 4's measured best $k$ on the CPU tends
# to be smaller than the formula's for its acceptance rate, because a NumPy draft step costs a larger
# share of a target step than the ratio of their weights suggests (Python overhead per call) and the
# verify pass costs more than one step.

# %%
from scaleoutai.serving import speculative as sp

ks = np.arange(1, 21)
best = {}
for a in (0.6, 0.8, 0.9):
    for c in (0.05, 0.11, 0.3):
        S = np.array([sp.expected_speedup(a, int(k), c) for k in ks])
        best[a, c] = (int(ks[S.argmax()]), float(S.max()))
        print(f"a = {a}, c = {c:4}: best k = {best[a, c][0]:>2}, speed-up {best[a, c][1]:.2f}")
for c in (0.05, 0.11, 0.3):
    assert best[0.6, c][0] <= best[0.8, c][0] <= best[0.9, c][0]  # more acceptance -> longer drafts
for a in (0.6, 0.8, 0.9):
    assert best[a, 0.05][0] >= best[a, 0.11][0] >= best[a, 0.3][0]  # dearer drafts -> shorter drafts
    assert best[a, 0.05][1] > best[a, 0.3][1]
