# mutant: each rank resumes from the newest checkpoint it can read itself, without agreeing with the others
# loses: resume, reshard, traffic, commit, checksum
REPLACE = [("    every_rank = all_gather(comm, flags).reshape(comm.size, len(candidates))\n",
            "    every_rank = flags.reshape(1, len(candidates))\n")]
