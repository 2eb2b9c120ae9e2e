# mutant: pads x to a multiple of K with its own first entries, x[:pad]: too short once K - n % K > n, so the
# chunks come out empty (K=7, n=2) and the result has the wrong length
# loses: correct_sim
# says: shape
REPLACE = [
    ("    chunks = [c.copy() for c in np.array_split(x, K)]\n",
     "    xp = np.concatenate([x, x[:(-len(x)) % K]])\n"
     "    c = len(xp) // K\n"
     "    chunks = [xp[i * c:(i + 1) * c].copy() for i in range(K)]\n"),
    ("    return np.concatenate(chunks)\n", "    return np.concatenate(chunks)[:len(x)]\n"),
]
