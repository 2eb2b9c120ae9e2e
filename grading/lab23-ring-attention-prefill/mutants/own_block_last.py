# mutant: a rank forwards the blocks it receives first and sends its own block last: right rows and counts,
# but the blocks leave out of the causal ring's order (r, r-1, ..., 0)
# loses: payload, random
# says: in that order
def ring_attention(comm, q, k, v, n_heads):
    me, world = comm.rank, comm.size
    state = partial_attention(q, k, v, n_heads, causal=True)
    for hop in range(me):
        visiting = comm.recv(me - 1)
        if me + 1 < world:
            comm.send(visiting, me + 1)
        state = merge_partials(state, partial_attention(q, visiting[0], visiting[1], n_heads, causal=False))
    if me + 1 < world:
        comm.send(np.stack([k, v]), me + 1)  # noqa: F821
    return finish_attention(state)
