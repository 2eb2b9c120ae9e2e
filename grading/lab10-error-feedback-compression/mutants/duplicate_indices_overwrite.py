# mutant: total[every_idx] += every_val: where two ranks send the same index only one value is added
# loses: allreduce, correct_process
REPLACE = [("    np.add.at(total, every_idx, every_val)\n", "    total[every_idx] += every_val\n")]
