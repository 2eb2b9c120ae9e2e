# mutant: right tables by the wrong protocol: each rank sends its whole policy block (b, 4, 2) and the receivers
# compute the opponent reach themselves
# loses: messages
REPLACE = [("            opp = exchange_reach(comm, terminal_reach(sigma, 1 - player))",
            "            opp = terminal_reach(exchange_policy(comm, sigma), 1 - player)")]


def exchange_policy(comm, sigma):
    parts = [None] * comm.size
    parts[comm.rank] = np.ascontiguousarray(sigma)  # noqa: F821
    for step in range(1, comm.size):
        parts[(comm.rank - step) % comm.size] = comm.sendrecv(sigma, (comm.rank + step) % comm.size,
                                                              (comm.rank - step) % comm.size)
    return np.concatenate([np.asarray(p).reshape(-1, 4, 2) for p in parts])  # noqa: F821
