# mutant: the chapter's fetch_features and gcn_aggregate through an import path a grep does not see
# loses: forward, input_grads, weight_grads, small, process, random, halo_traffic
import importlib


def halo_forward(comm, X_own, edges_in, parts, W_l, b_l, W_r):
    S = importlib.import_module("scaleoutai.ml." + "graph_" + "sampling")
    parts = np.asarray(parts)  # noqa: F821
    e = np.asarray(edges_in).reshape(-1, 2)  # noqa: F821
    needed = np.unique(np.concatenate([np.flatnonzero(parts == comm.rank), e[:, 0]]))  # noqa: F821
    h, _ = S.fetch_features(comm, X_own, parts, needed)
    pos = np.searchsorted(needed, e.T)  # noqa: F821
    agg = S.gcn_aggregate(h, pos, len(h))[np.searchsorted(needed, np.flatnonzero(parts == comm.rank))]  # noqa: F821
    return agg @ W_l + b_l + X_own @ W_r, None
