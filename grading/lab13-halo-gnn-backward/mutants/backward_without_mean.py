# mutant: the backward forgets the 1/deg of the mean: each edge passes dOut[i] back unscaled
# loses: input_grads, small, process, random, halo_traffic
REPLACE = [("per_edge = (dOut * inv[:, None])[dst]", "per_edge = dOut[dst]")]
