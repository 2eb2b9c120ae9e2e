# mutant: the course library's server and worker through an import path a grep does not see
# loses: final_rows, pulls_current, routing, migration, sparse, correct_process
import importlib


def run_ps(comm, S, join, vnodes, users, items, r, batches, n_users, d, dtype, lr, mu, seed):
    lib = importlib.import_module("scaleoutai.ml." + "param" + "server")
    T, B = batches.shape
    n_rows = int(n_users) + int(np.max(items)) + 1  # noqa: F821
    cfg = lib.PSConfig(S, comm.size - S, n_rows, int(d), int(n_users), B, T, float(lr), 0, "hash", seed=int(seed))
    if comm.rank < S:
        return lib.serve_shard(comm, cfg)["shards"][comm.rank]["rows"]
    return lib.train_worker(comm, cfg, users, items, r)["sse"]
