# mutant: after an arrival, at most one held message is delivered: messages its delivery released stay held
# loses: causal
REPLACE = [("        while progress:  # one delivery can release messages that waited for it\n",
            "        if progress:\n")]
