# mutant: keeps the farthest candidates (sorts descending)
# loses: distances, ids, small_shards, correct_process, traffic
REPLACE = [("        order = np.lexsort((gid, d))[:m]  # distance first, the id breaks ties",
            "        order = np.lexsort((gid, -d))[:m]"),
           ("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.lexsort((I[r], -D[r]))[:k]")]
