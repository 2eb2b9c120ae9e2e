# mutant: every rank sends all of its band rows to every rank, and each keeps the rows of the buckets it owns
# loses: shuffle
# says: not to every rank
REPLACE = [("mine = np.concatenate(exchange([rows[owner == q] for q in range(K)], np.uint64, 3))",
            "mine = np.concatenate(exchange([rows] * K, np.uint64, 3))\n"
            "    mine = mine[(mine[:, 0] % np.uint64(K)).astype(np.int64) == me]")]
