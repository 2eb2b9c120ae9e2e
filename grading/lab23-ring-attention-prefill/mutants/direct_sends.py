# mutant: no ring: each rank sends its block straight to every later rank (the same bytes in all, but rank r
# sends K-1-r messages to K-1-r ranks and the last ranks' links carry everything)
# loses: ring, random
# says: right neighbour
def ring_attention(comm, q, k, v, n_heads):
    me, world = comm.rank, comm.size
    state = partial_attention(q, k, v, n_heads, causal=True)
    for later in range(me + 1, world):
        comm.send(np.stack([k, v]), later)  # noqa: F821
    for earlier in range(me):
        got = comm.recv(earlier)
        state = merge_partials(state, partial_attention(q, got[0], got[1], n_heads, causal=False))
    return finish_attention(state)
