# mutant: tol is ignored: the server always runs max_iter steps (more rounds than the protocol asks)
# loses: geometric_median, weighted, traffic
# says: at most tol
REPLACE = [("        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))\n"
            "        z, steps = z_new, steps + 1\n    return z.astype(rows.dtype)",
            "        z, steps = z_new, steps + 1\n    return z.astype(rows.dtype)"),
           ("        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))\n"
            "        z, steps = z_new, steps + 1\n    for q in range(1, K):",
            "        z, steps = z_new, steps + 1\n    for q in range(1, K):")]
