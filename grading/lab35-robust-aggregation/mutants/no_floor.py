# mutant: no floor nu: beta_i = c_i / |g_i - z| is infinite when z sits on a gradient (K = 1, a symmetric stack), and z turns NaN
# loses: geometric_median, weighted, server
REPLACE = [("        beta = c / np.maximum(nu, np.linalg.norm(G - z, axis=1))",
            "        beta = c / np.linalg.norm(G - z, axis=1)"),
           ("count / max(nu, float(np.linalg.norm(g64 - z)))", "count / float(np.linalg.norm(g64 - z))")]
