# mutant: the counts weigh the starting mean only; every Weiszfeld step uses beta_i = 1 / max(nu, |g_i - z|) (empty shards still count)
# loses: weighted, server, traffic, correct_process
# says: carries the count
REPLACE = [("        beta = c / np.maximum(nu, np.linalg.norm(G - z, axis=1))",
            "        beta = 1.0 / np.maximum(nu, np.linalg.norm(G - z, axis=1))"),
           ("count / max(nu, float(np.linalg.norm(g64 - z)))", "1.0 / max(nu, float(np.linalg.norm(g64 - z)))")]
