# mutant: sends the kept values in float16 to halve the bytes: exact on small integers, off by 1e-3 on real data
# loses: allreduce, correct_process
REPLACE = [("every_idx, every_val = all_gather(comm, idx), all_gather(comm, vals)",
            "every_idx, every_val = all_gather(comm, idx), all_gather(comm, vals.astype(np.float16)).astype(p.dtype)")]
