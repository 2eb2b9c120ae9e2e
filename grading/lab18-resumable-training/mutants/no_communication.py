# mutant: each rank steps on its own shard's gradient: no allreduce, the replicas drift apart
# loses: train, resume, intact
def allreduce_sum(comm, x):
    return np.asarray(x)  # noqa: F821
