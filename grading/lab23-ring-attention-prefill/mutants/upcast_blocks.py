# mutant: a rank sends its own block in float64 whatever the activations' dtype (and casts what it receives
# back): right rows, twice the bytes of the causal ring's first message per layer on float32 data
# loses: payload, random
# says: activations' dtype
REPLACE = [("    block = np.stack([k, v])  # this rank's block leaves first",
            "    block = np.stack([k, v]).astype(np.float64)"),
           ("            block = comm.recv(me - 1)\n", "            block = comm.recv(me - 1).astype(q.dtype)\n")]
