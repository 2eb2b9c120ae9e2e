# mutant: no exact master copy: the owner overwrites its shard with the dequantized weights it received,
# so the rounding error of every step enters Adam
# loses: master_sim, master_process, weights_sim, weights_process
# says: master shard
REPLACE = [("    return weights\n    ### END SOLUTION",
            "    master[...] = weights[state['lo']:state['lo'] + master.size]\n    return weights\n    ### END SOLUTION")]
