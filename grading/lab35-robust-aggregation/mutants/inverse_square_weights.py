# mutant: the Weiszfeld weights divide by the squared distance, c_i / max(nu, |g_i - z|^2): a different fixed point
# loses: geometric_median, weighted, server, traffic, correct_process
# says: not over the squared distance
REPLACE = [("        beta = c / np.maximum(nu, np.linalg.norm(G - z, axis=1))",
            "        beta = c / np.maximum(nu, np.linalg.norm(G - z, axis=1) ** 2)"),
           ("count / max(nu, float(np.linalg.norm(g64 - z)))", "count / max(nu, float(np.linalg.norm(g64 - z)) ** 2)")]
