# mutant: cuts the vector at i*n//P instead of into np.array_split's blocks: right sums and bytes, but the larger
# blocks come last, so some messages carry other sizes than the schedule's
# loses: schedule
# says: np.array_split
REPLACE = [
    ("    edges[1:] = np.cumsum([len(b) for b in np.array_split(np.empty(len(buf)), P)])\n",
     "    edges = np.array([i * len(buf) // P for i in range(P + 1)])\n"),
]
