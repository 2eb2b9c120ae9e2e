# mutant: the classic (non-causal) ring: every rank passes blocks K-1 hops around the whole ring, wrapping to
# rank 0, and drops the blocks of later ranks on arrival. Right rows, twice the causal ring's messages
# loses: ring, payload, random
# says: causal ring
def ring_attention(comm, q, k, v, n_heads):
    me, world = comm.rank, comm.size
    state = partial_attention(q, k, v, n_heads, causal=True)
    visiting = np.stack([k, v])  # noqa: F821
    for hop in range(world - 1):
        visiting = comm.sendrecv(visiting, (me + 1) % world, (me - 1) % world)
        if (me - 1 - hop) % world < me:  # an earlier rank's block: seen whole
            state = merge_partials(state, partial_attention(q, visiting[0], visiting[1], n_heads, causal=False))
    return finish_attention(state)
