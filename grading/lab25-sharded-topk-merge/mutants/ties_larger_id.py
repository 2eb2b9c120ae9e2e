# mutant: equal distances are broken by the larger id
# loses: ids, small_shards, correct_process
# says: smaller id
REPLACE = [("        order = np.lexsort((gid, d))[:m]  # distance first, the id breaks ties",
            "        order = np.lexsort((-gid, d))[:m]"),
           ("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.lexsort((-I[r], D[r]))[:k]")]
