# mutant: the stopping rule compares the step with tol alone, not tol * max(1, |z|): far from 0 it runs extra rounds
# loses: geometric_median, weighted, traffic
REPLACE = [("        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))\n"
            "        z, steps = z_new, steps + 1\n    return z.astype(rows.dtype)",
            "        moving = np.linalg.norm(z_new - z) > tol\n"
            "        z, steps = z_new, steps + 1\n    return z.astype(rows.dtype)"),
           ("        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))\n"
            "        z, steps = z_new, steps + 1\n    for q in range(1, K):",
            "        moving = np.linalg.norm(z_new - z) > tol\n"
            "        z, steps = z_new, steps + 1\n    for q in range(1, K):")]
