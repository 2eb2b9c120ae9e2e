# mutant: bags are pooled with np.add.reduceat at the offsets, which returns the row at a repeated offset instead
# of zeros: empty bags go wrong
# loses: small
REPLACE = [("    np.add.at(pooled, bag, picked)\n",
            "    if len(picked):\n"
            "        pooled = np.add.reduceat(picked, np.minimum(np.asarray(offsets, dtype=np.int64), len(picked) - 1), axis=0)\n")]
