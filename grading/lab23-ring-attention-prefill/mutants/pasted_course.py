# mutant: the chapter's tensor-parallel forward (tensor_inference.tp_decoder_forward with
# collectives.block_range, all_gather and ring_allreduce) adapted by hand to chunks: ring-all-gather the
# prompt so every rank holds all T positions, split the heads and hidden units over the ranks, all-reduce
# each sub-layer's parts, keep this rank's rows. Right rows, but the prompt and 2 all-reduces per layer
# cross the ring instead of the causal key/value blocks
# loses: ring, payload, random
# says: causal ring
# score-at-most: 50
def _bounds(n, K):
    q, extra = divmod(int(n), int(K))
    edges = np.cumsum([0] + [q + (j < extra) for j in range(int(K))])  # noqa: F821
    return [(int(edges[j]), int(edges[j + 1])) for j in range(int(K))]


def _gather(comm, block):
    K, r = comm.size, comm.rank
    parts = [None] * K
    parts[r] = block
    for s in range(K - 1):
        parts[(r - s - 1) % K] = comm.sendrecv(parts[(r - s) % K], (r + 1) % K, (r - 1) % K)
    return parts


def _allreduce(comm, x):
    flat = x.reshape(-1).copy()
    K, r = comm.size, comm.rank
    blk = [slice(a, b) for a, b in _bounds(len(flat), K)]
    for s in range(K - 1):
        i = (r - s - 2) % K
        got = comm.sendrecv(flat[blk[(r - s - 1) % K]].copy(), (r + 1) % K, (r - 1) % K)
        flat[blk[i]] += got
    for s in range(K - 1):
        flat[blk[(r - s - 1) % K]] = comm.sendrecv(flat[blk[(r - s) % K]].copy(), (r + 1) % K, (r - 1) % K)
    return flat.reshape(x.shape)


def cp_block_stack(comm, blocks, x, n_heads):
    K, r = comm.size, comm.rank
    parts = _gather(comm, x.reshape(-1))
    B, d = x.shape[0], x.shape[2]
    full = np.concatenate([p.reshape(B, -1, d) for p in parts], axis=1)  # noqa: F821
    lo = sum(p.size for p in parts[:r]) // (B * d)
    dh = d // n_heads
    for p in blocks:
        h0, h1 = _bounds(n_heads, K)[r]
        f0, f1 = _bounds(p["W1"].shape[1], K)[r]
        cols = slice(h0 * dh, h1 * dh)
        a, _ = nn.layer_norm_forward(full, p["ln1_g"], p["ln1_b"])  # noqa: F821
        if h1 > h0:
            o, _ = nn.causal_attention_forward(a @ p["Wq"][:, cols], a @ p["Wk"][:, cols], a @ p["Wv"][:, cols],  # noqa: F821
                                               h1 - h0)
            part = o @ p["Wo"][cols, :]
        else:
            part = np.zeros_like(full)  # noqa: F821
        x2 = full + _allreduce(comm, part)
        h2, _ = nn.layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])  # noqa: F821
        part = nn.gelu(h2 @ p["W1"][:, f0:f1] + p["b1"][f0:f1]) @ p["W2"][f0:f1, :]  # noqa: F821
        full = x2 + _allreduce(comm, part) + p["b2"]
    return full[:, lo:lo + x.shape[1]]
