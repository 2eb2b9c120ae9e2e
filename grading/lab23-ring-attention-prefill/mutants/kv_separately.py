# mutant: keys and values travel as two messages per hop instead of one stacked (2, B, T_o, d) array
# loses: ring, payload, random
# says: one (2, B, T_o, d) array
def ring_attention(comm, q, k, v, n_heads):
    me, world = comm.rank, comm.size
    state = partial_attention(q, k, v, n_heads, causal=True)
    kb, vb = k, v
    for hop in range(me + 1):
        if me + 1 < world:
            comm.send(kb, me + 1)
            comm.send(vb, me + 1)
        if hop == me:
            break
        kb, vb = comm.recv(me - 1), comm.recv(me - 1)
        state = merge_partials(state, partial_attention(q, kb, vb, n_heads, causal=False))
    return finish_attention(state)
