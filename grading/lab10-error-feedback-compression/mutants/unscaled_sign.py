# mutant: sends the bare signs: the scale is 1 instead of ||p||_1 / d
# loses: compressor, contraction, allreduce, residual, correct_process, training
# says: ||p||_1 / d
REPLACE = [("        scale[0] = total / p.dtype.type(d)\n", "        scale[0] = 1\n")]
