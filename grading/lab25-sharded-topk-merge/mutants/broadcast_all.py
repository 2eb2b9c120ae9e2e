# mutant: rank 0 sends every rank all the round-1 distances and each rank computes tau itself: the right
# answer, but K m numbers per query go back instead of one
# loses: threshold
# says: one number per query
REPLACE = [("        tau = comm.recv(0)", "        tau = threshold(comm.recv(0), k)"),
           ("        comm.send(tau, peer)",
            "        comm.send(np.hstack([dists[:, :m]] + [first[p][0] for p in sorted(first)]), peer)")]
