# mutant: the course's sampler pasted and adapted by hand: the chapter's shard_indices with start = consumed // K
# (pad the epoch's order to K*ceil(n/K), take order[rank::K], skip the rank's first entries), and the chapter's
# crash drill for the resume point (each rank resumes from its own saved step on the job's current K, no message)
# loses: k_changes, schedules, agree
# says: the lab asks for resumption when K changes
# score-at-most: 50
def resume_indices(n, K, rank, epoch, seed, consumed, drop_last=False):
    order = np.random.default_rng(int(seed) + int(epoch)).permutation(n).astype(np.int64)  # noqa: F821
    per_rank = n // K if drop_last else -(-n // K)
    total = K * per_rank
    order = order[:total] if drop_last else np.resize(order, total)  # noqa: F821
    start = consumed // K  # resume_position: the entries of its own list this rank already read
    return order[rank::K][start:].copy()


def agree_progress(comm, n, saved):
    rows = np.asarray(saved, dtype=np.int64).reshape(-1, 4)  # noqa: F821
    if not len(rows):
        return np.zeros(2, dtype=np.int64)  # noqa: F821
    epoch, _, _, steps_done = rows[0]
    return np.array([epoch, steps_done * comm.size], dtype=np.int64)  # noqa: F821
