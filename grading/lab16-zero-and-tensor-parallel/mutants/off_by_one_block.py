# mutant: a rank's block starts at rank * (Psi // K), not where np.array_split puts it (wrong whenever K does not divide Psi)
# loses: zero_sim, zero_process
REPLACE = [('"lo": int(owned[0]) if owned.size else 0', '"lo": comm.rank * (params_flat.size // comm.size)')]
