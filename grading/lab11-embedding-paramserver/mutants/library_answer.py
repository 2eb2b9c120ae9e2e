# mutant: the course library's server and worker through an import path a grep does not see
# loses: bsp_exact, exactly_once, pulls_current, staleness, schedule, owners, sparse
import importlib


def run_ps(comm, S, shard_keys, shard_rows, users, items, r, batches, speeds, n_users, n_rows, lr, s):
    lib = importlib.import_module("scaleoutai.ml." + "param" + "server")
    T, B = batches.shape
    cfg = lib.PSConfig(S, comm.size - S, int(n_rows), shard_rows.shape[1], int(n_users), B, T, float(lr), int(s))
    if comm.rank < S:
        return lib.serve_shard(comm, cfg)["shards"][comm.rank]["rows"]
    return lib.train_worker(comm, cfg, users, items, r)["sse"]
