# mutant: rank r takes the contiguous block order[r*len:(r+1)*len] instead of torch's interleaved order[r::K]
# loses: spec, resume
# says: contiguous block
REPLACE = [("return order[rank::K][start:].copy()",
            "return order[rank * per_rank:(rank + 1) * per_rank][start:].copy()")]
