# mutant: gathers every token and every expert's weights to rank 0, which runs the dense layer and
# sends each rank its rows back (right numbers, one rank does all the work and the others ship weights)
# loses: traffic
# says: not the experts' weights
import numpy as np

PARTS = ("W0", "b0", "W1", "b1")


def moe_forward_ep(comm, tokens, router_W, experts_shard, k, capacity_factor):
    size, rank = comm.size, comm.rank
    n_experts = router_W.shape[1]
    if rank != 0:
        comm.send(tokens, 0)
        for e in sorted(experts_shard):
            for n in PARTS:
                comm.send(experts_shard[e][n], 0)
        return comm.recv(0)
    xs, experts = [tokens], dict(experts_shard)
    blocks = np.array_split(np.arange(n_experts), size)
    for j in range(1, size):
        xs.append(comm.recv(j))
        for e in blocks[j]:
            experts[int(e)] = {n: comm.recv(j) for n in PARTS}
    layer = {"Wg": router_W, "bg": np.zeros(n_experts, dtype=router_W.dtype),
             "experts": [experts[e] for e in range(n_experts)]}
    y, _ = moe_forward_dense(layer, np.concatenate(xs), k, capacity_factor)  # noqa: F821
    y = y.astype(tokens.dtype)
    bounds = np.cumsum([0] + [len(x) for x in xs])
    for j in range(1, size):
        comm.send(y[bounds[j]:bounds[j + 1]], j)
    return y[:len(tokens)]
