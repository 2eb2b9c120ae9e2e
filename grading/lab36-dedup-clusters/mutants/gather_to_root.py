# mutant: the chapter's last step: every verified pair to rank 0, which runs the union-find and sends every
#   rank the labels of its pages (right labels, but rank 0 receives every pair of every cluster)
# loses: edges
# says: without a coordinator
REPLACE = [("    root = local_roots(good)\n",
            "    pile = exchange([good if q == 0 else [] for q in range(K)], np.int64, 2)\n"
            "    top = local_roots([tuple(e) for g in pile for e in g.tolist()]) if me == 0 else {}\n"
            "    asks = exchange([ids] * K, np.int64, 1)\n"
            "    back = exchange([[top.get(int(v), int(v)) for v in a.ravel()] for a in asks] if me == 0 else [[]] * K,"
            " np.int64, 1)\n"
            "    return back[0].ravel().astype(np.int64)\n"
            "    root = local_roots(good)\n")]
