# mutant: decodes all 8 ceil(d/8) bits, padding included: C(p) is too long when d is not a multiple of 8
# loses: compressor, contraction, allreduce, residual, correct_process, traffic, training
REPLACE = [("    plus = ((bits[:, None] >> shifts) & 1).reshape(-1)[:int(d)].astype(bool)\n",
            "    plus = ((bits[:, None] >> shifts) & 1).reshape(-1).astype(bool)\n")]
