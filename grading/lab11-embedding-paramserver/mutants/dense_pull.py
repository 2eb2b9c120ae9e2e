# mutant: the worker pulls the whole table every clock and picks its rows: right values, dense traffic
# loses: sparse
# says: no more
REPLACE = [("        pull_owner, push_owner = shard_of(keys, n_rows, S), shard_of(push_keys, n_rows, S)\n",
            "        every = np.arange(n_rows, dtype=np.int64) if c < T else keys\n"
            "        pull_owner, push_owner = shard_of(every, n_rows, S), shard_of(push_keys, n_rows, S)\n"),
           ("            comm.send(pack(kind, c, push_keys[mine], keys[pull_owner == j], push_grad[mine]), j)",
            "            comm.send(pack(kind, c, push_keys[mine], every[pull_owner == j], push_grad[mine]), j)"),
           ("        rows = np.zeros((len(keys), d))\n"
            "        for j in range(S):\n            rows[pull_owner == j] = comm.recv(j)\n",
            "        table = np.zeros((n_rows, d))\n"
            "        for j in range(S):\n            table[pull_owner == j] = comm.recv(j)\n"
            "        rows = table[keys]\n")]
