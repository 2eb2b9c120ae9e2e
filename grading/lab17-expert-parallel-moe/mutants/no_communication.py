# mutant: each rank runs only the experts it owns on its own tokens and never communicates
# loses: correct_sim, drops, correct_process, traffic, own_code
import numpy as np


def moe_forward_ep(comm, tokens, router_W, experts_shard, k, capacity_factor):
    y = np.zeros_like(tokens)
    logits = tokens @ router_W
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    for t in range(len(tokens)):
        for c in range(k):
            e = int(choice[t, c])
            if e in experts_shard:
                y[t] += probs[t, e] * mlp_forward(experts_shard[e], tokens[t:t + 1])[0][0]  # noqa: F821
    return y
