# %% [markdown]
# # Lab 23: context-parallel prefill with causal ring attention
#
# Chapter 23 ran the decoder **tensor-parallel**: every rank holds all T tokens of the prompt and 1/K
# of each layer's heads and hidden units, and two all-reduces of B*T*d activations per layer sum the
# parts. That divides the weights, not the prompt: every rank still holds the whole (B, T, d) activation
# and the (T, T) scores of its heads. For a long prompt (a book, a code base) it is the **sequence**
# that does not fit, and the next step is to split it: **context parallelism**. Rank r of K holds a
# contiguous chunk of the prompt, positions s_r .. s_r + T_r - 1 (rank 0 the first tokens, chunks in
# rank order, sizes uneven or zero), and a full copy of the block weights. Layer norms, projections and
# the MLP act token by token, so they need nothing from other ranks. Only causal attention mixes
# positions: a query at position i reads the keys and values of every position j <= i, which live on
# rank r and on the ranks before it.
#
# **Ring attention** (Liu, Zaharia and Abbeel, "Ring Attention with Blockwise Transformers for
# Near-Infinite Context", ICLR 2024) passes key/value blocks around a ring of ranks and never builds
# the full score matrix: each rank folds one block at a time into a running softmax (the
# "online softmax" of Milakov and Gimelshein, 2018, that FlashAttention uses), so it holds its own
# chunk, one visiting block and a few per-row statistics. This lab builds it for **causal** prefill,
# where half of the ring's traffic is useless: a block is never needed by the ranks before its owner.
#
# **The running softmax.** For one head, a query row q and a block of keys K_j, values V_j, let
# s = q K_j^T / sqrt(d_h) over the keys the query may see. A block's **partial** is the triple
#
#     m = max(s),   l = sum(exp(s - m)),   acc = exp(s - m) V_j       (m = -inf, l = 0, acc = 0 if it sees no key)
#
# and two partials merge exactly: with M = max(m_a, m_b), l = l_a e^(m_a - M) + l_b e^(m_b - M) and
# acc = acc_a e^(m_a - M) + acc_b e^(m_b - M) (a factor is 0 where its m is -inf; with both -inf the
# merge stays empty, never NaN). The attention output is acc / l. Merging is associative and
# commutative, so the blocks may arrive in any order, and no exp ever sees a positive argument: the
# answer stays finite when scores are in the thousands.
#
# **The causal ring** (the protocol the grader checks, per layer). Rank r computes q, k, v for its chunk
# and its own partial with the causal mask (key j visible to query i iff j <= i inside the chunk). Then
# its block `np.stack([k, v])`, shape (2, B, T_r, d), travels right: rank r sends its own block to
# r + 1, and forwards every block it receives from r - 1 to r + 1 before folding it in. A block from an
# earlier rank is seen whole (every key precedes every query), so it merges without a mask. The last
# rank forwards nothing, and nothing wraps around: the block of rank o reaches exactly the ranks after
# o. So, per layer, **rank r < K - 1 sends exactly r + 1 messages, all to r + 1, the blocks of ranks
# r, r - 1, ..., 0 in that order, each one array (2, B, T_o, d) in the activations' dtype** (an empty
# chunk's block is forwarded too: it costs one header), and rank K - 1 sends none.
#
# **The cost.** Rank r sends sum over o <= r of (2 B T_o d b + 40) bytes per layer (b the itemsize,
# 40 the header of a 4-d array) and receives the same minus its own block: the causal half of the
# all-to-all of keys and values, and about 2/K of tensor parallelism's two all-reduces of B*T*d
# per layer. A rank holds O(B T_r d) activations and one (T_r, T_o) score block at a time, never
# the (T, T) matrix. The classic ring (K - 1 hops for every rank, later blocks masked away on
# arrival) sends twice the messages; gathering the whole prompt on every rank defeats the point.
#
# **The functions.** `partial_attention`, `merge_partials` and `finish_attention` are the running
# softmax; `ring_attention(comm, q, k, v, n_heads)` is one layer's causal ring;
# `cp_block_stack(comm, blocks, x, n_heads)` runs L pre-LN blocks (`nn.block_forward`'s maths) on the
# rank's chunk x (B, T_r, d) and returns the block stack's output for those rows. The grader calls
# `attend_pieces` and `run_cp` below (not yours to change).
#
# **What the grader checks.** Every rank's rows against its own one-machine run of the stack
# (`nn.block_forward`, layer after layer) for K = 1, 2, 3, 5, 8, chunk sizes not divisible by K, empty
# chunks anywhere and K > T, float32 (rtol 1e-4) and float64 (rtol 1e-9), scores in the thousands,
# 2 real processes; the running softmax on its own (any split of the keys, any merge order, empty
# pieces); and, from its own trace, the causal ring: exactly r + 1 messages per rank and layer, all
# to r + 1, with exactly the bytes of the blocks of r, r - 1, ..., 0 in order.
# `scaleoutai.serving`, `scaleoutai.parallel` and `scaleoutai.collectives` cannot be imported in the
# grader; `scaleoutai.nn` (layer norm, GELU, the dense block) can.

# %% tags=["parameters"]
K = 4  # smoke: 3
T = 37  # smoke: 11
B = 2
D_MODEL = 32  # smoke: 16
N_HEADS = 4  # smoke: 2
D_FF = 64  # smoke: 32
N_LAYERS = 2

# %%
import numpy as np

from scaleoutai import cluster, nn

# %%
def partial_attention(q, k, v, n_heads, causal):
    """One key block's partial (m, l, acc) for every query row and head: m, l of shape (B, H, Tq), acc
    (B, H, Tq, d_h), in the inputs' dtype. q is (B, Tq, d); k, v are (B, Tk, d); with causal=True the
    block is the queries' own (Tq == Tk) and key j is visible to query i iff j <= i."""
    ### BEGIN SOLUTION
    bsz, n_q, width = q.shape
    n_k, d_h = k.shape[1], width // n_heads
    if causal and n_k != n_q:
        raise ValueError(f"a causal block pairs a chunk with itself: {n_q} queries but {n_k} keys")
    q4 = q.reshape(bsz, n_q, n_heads, d_h)
    k4, v4 = k.reshape(bsz, n_k, n_heads, d_h), v.reshape(bsz, n_k, n_heads, d_h)
    scores = np.einsum("bqhe,bkhe->bhqk", q4, k4) / float(np.sqrt(d_h))
    if causal:
        seen = np.tri(n_q, n_k, dtype=bool)  # key j <= query i inside the chunk
        scores = np.where(seen, scores, -np.inf)
    top = np.full((bsz, n_heads, n_q), -np.inf, dtype=scores.dtype)
    if n_k:
        top = scores.max(axis=-1)
    shift = np.where(np.isneginf(top), scores.dtype.type(0), top)  # a row that sees nothing stays empty
    weights = np.exp(scores - shift[..., None])
    return top, weights.sum(axis=-1), np.einsum("bhqk,bkhe->bhqe", weights, v4)
    ### END SOLUTION


# %%
def merge_partials(a, b):
    """The partial of the union of two key sets, from their partials a and b: (m, l, acc)."""
    ### BEGIN SOLUTION
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    best = np.maximum(m_a, m_b)
    ref = np.where(np.isneginf(best), best.dtype.type(0), best)  # both empty: no -inf - -inf
    f_a, f_b = np.exp(m_a - ref), np.exp(m_b - ref)  # exp(-inf) = 0 drops an empty side
    return best, l_a * f_a + l_b * f_b, acc_a * f_a[..., None] + acc_b * f_b[..., None]
    ### END SOLUTION


# %%
def finish_attention(state):
    """The attention output acc / l with the heads merged back: (B, Tq, H * d_h)."""
    ### BEGIN SOLUTION
    _, norm, acc = state
    per_head = acc / norm[..., None]  # (B, H, Tq, d_h); l >= 1 wherever a query sees its own key
    return np.concatenate([per_head[:, h] for h in range(per_head.shape[1])], axis=-1)
    ### END SOLUTION


# %%
def ring_attention(comm, q, k, v, n_heads):
    """Causal attention of this rank's queries over every earlier position, by the causal ring:
    returns (B, T_r, d). q, k, v are this rank's chunk, (B, T_r, d)."""
    ### BEGIN SOLUTION
    me, world = comm.rank, comm.size
    state = partial_attention(q, k, v, n_heads, causal=True)
    block = np.stack([k, v])  # this rank's block leaves first
    for origin in range(me, -1, -1):  # the blocks of ranks me, me - 1, ..., 0 pass through, in that order
        if origin < me:
            block = comm.recv(me - 1)
            if block.ndim != 4 or block.shape[0] != 2 or block.shape[1::2] != q.shape[::2]:
                raise ValueError(f"rank {me} got rank {origin}'s block as {block.shape}; expected (2, B, T_o, d)")
        if me < world - 1:  # forward before folding in, so the next rank works meanwhile
            comm.send(block, me + 1)
        if origin < me:  # an earlier rank's keys all precede this chunk: no mask
            state = merge_partials(state, partial_attention(q, block[0], block[1], n_heads, causal=False))
    return finish_attention(state)
    ### END SOLUTION


# %%
def cp_block_stack(comm, blocks, x, n_heads):
    """L pre-LN blocks (the maths of nn.block_forward) on this rank's chunk x (B, T_r, d): the stack's
    output rows of this chunk, (B, T_r, d). blocks is a list of nn.block_init-style dicts."""
    ### BEGIN SOLUTION
    if x.ndim != 3:
        raise ValueError(f"x is this rank's chunk of shape (B, T_r, d), got {x.shape}")
    for layer in blocks:  # attention is the only step that reads other positions
        fused = np.concatenate([layer["Wq"], layer["Wk"], layer["Wv"]], axis=1)
        q, k, v = np.split(nn.layer_norm_forward(x, layer["ln1_g"], layer["ln1_b"])[0] @ fused, 3, axis=-1)
        x = x + ring_attention(comm, q, k, v, n_heads) @ layer["Wo"]
        inner = nn.layer_norm_forward(x, layer["ln2_g"], layer["ln2_b"])[0] @ layer["W1"] + layer["b1"]
        x = x + nn.gelu(inner) @ layer["W2"] + layer["b2"]
    return x
    ### END SOLUTION


# %%
def attend_pieces(q, k, v, n_heads, cuts, order):
    """What the grader calls to test the running softmax alone. q holds the queries of the last
    Tq = len(q[0]) positions of a sequence of keys k and values v (B, T, d). The keys before them are
    cut at `cuts` into pieces seen whole; the last Tq keys are the causal piece; the partials of all
    pieces are merged in `order` (a permutation of their indices, the causal piece last)."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n_q, n_k = q.shape[1], k.shape[1]
    edges = [0] + [int(c) for c in cuts] + [n_k - n_q]
    parts = [partial_attention(q, k[:, a:b], v[:, a:b], int(n_heads), False) for a, b in zip(edges, edges[1:])]
    parts.append(partial_attention(q, k[:, n_k - n_q:], v[:, n_k - n_q:], int(n_heads), True))
    state = parts[int(order[0])]
    for i in order[1:]:
        state = merge_partials(state, parts[int(i)])
    return np.asarray(finish_attention(state))


def unpack_blocks(flat, d_model, n_heads, d_ff, n_layers):
    """The L blocks from one flat vector (nn.flatten of each block, one after the other)."""
    like = nn.block_init(int(d_model), int(n_heads), int(d_ff))
    size = nn.flatten(like).size
    return [nn.unflatten(flat[i * size:(i + 1) * size], like) for i in range(int(n_layers))]


def run_cp(comm, x, flat, d_model, n_heads, d_ff, n_layers):
    """What the grader calls on every rank: x is this rank's chunk, flat the L blocks' weights."""
    blocks = unpack_blocks(np.asarray(flat), d_model, n_heads, d_ff, n_layers)
    return np.asarray(cp_block_stack(comm, blocks, np.asarray(x), int(n_heads)))


# %% [markdown]
# Try it on the simulator: a prompt of T positions cut into K uneven chunks, checked against one
# machine running the same L blocks on the whole prompt, and the bytes each rank sent beside the
# causal ring's formula (the simulator's counts here are payload only; the grader's add the header).

# %% tags=["demo"]
def chunk_worker(comm, x, blocks, bounds):
    lo, hi = bounds[comm.rank], bounds[comm.rank + 1]
    return cp_block_stack(comm, blocks, x[:, lo:hi], N_HEADS)


try:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, D_MODEL))
    blocks = [nn.block_init(D_MODEL, N_HEADS, D_FF, seed=i) for i in range(N_LAYERS)]
    cuts = np.sort(rng.choice(np.arange(T + 1), size=K - 1))  # uneven chunks, maybe empty ones
    bounds = [0] + [int(c) for c in cuts] + [T]
    want = x
    for layer in blocks:
        want, _ = nn.block_forward(layer, want, N_HEADS)
    res = cluster.run(chunk_worker, K, args=(x, blocks, bounds), backend="sim", trace=True)
    got = np.concatenate(res.values, axis=1)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), "the chunks differ from one machine's block stack"
    sizes = np.diff(bounds)
    formula = [N_LAYERS * sum(2 * B * int(sizes[o]) * D_MODEL * 8 for o in range(r + 1)) if r < K - 1 else 0
               for r in range(K)]  # payload only here; the grader adds a 40-byte header per message
    print("chunk sizes:", sizes.tolist())
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats], "| the causal ring's formula:", formula)
    assert [s.bytes_sent for s in res.stats] == formula, "the bytes differ from the causal ring's"
except cluster.RankError as err:
    print("cp_block_stack failed:", err.summary)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
