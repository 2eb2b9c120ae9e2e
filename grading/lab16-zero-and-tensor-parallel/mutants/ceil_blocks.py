# mutant: blocks of ceil(Psi/K) values, padded like a flat buffer, not np.array_split's: the last blocks start too late
# (and run past Psi: the rank crashes, which costs every test of those cases)
# loses: zero_sim, zero_memory, zero_bytes, own_code
# says: uneven blocks
REPLACE = [('"lo": int(owned[0]) if owned.size else 0', '"lo": comm.rank * -(-params_flat.size // comm.size)')]
