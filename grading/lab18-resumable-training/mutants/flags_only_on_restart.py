# mutant: the flags are all-gathered only when a candidate checkpoint exists: a fresh run skips the agreement
# loses: traffic, resume, reshard, commit
# says: flag
REPLACE = [("    every_rank = all_gather(comm, flags).reshape(comm.size, len(candidates))\n",
            "    if not candidates:\n        return 0, None\n    every_rank = all_gather(comm, flags).reshape(comm.size, len(candidates))\n")]
