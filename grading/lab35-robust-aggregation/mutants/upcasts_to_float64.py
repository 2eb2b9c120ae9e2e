# mutant: the aggregate comes back in float64 whatever the gradients' dtype
# loses: geometric_median, weighted, server
# says: dtype
REPLACE = [("    return z.astype(rows.dtype)\n", "    return z\n"),
           ("        return msg[:-1].astype(g.dtype)", "        return msg[:-1]"),
           ("    return z.astype(g.dtype)\n", "    return z\n")]
