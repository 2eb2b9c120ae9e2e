# mutant: sends the indices as int16 to save bytes: right while n <= 32768, wrapped beyond
# loses: allreduce
# says: too narrow
REPLACE = [("every_idx, every_val = all_gather(comm, idx), all_gather(comm, vals)",
            "every_idx, every_val = all_gather(comm, idx.astype(np.int16)), all_gather(comm, vals)")]
