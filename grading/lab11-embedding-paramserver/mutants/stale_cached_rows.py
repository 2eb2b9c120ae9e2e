# mutant: the worker keeps every row it has pulled and pulls only keys it has never seen: cached rows go stale
# loses: bsp_exact, sparse
# says: stale
REPLACE = [("    push_keys, push_grad = np.zeros(0, np.int64), np.zeros((0, d))\n",
            "    push_keys, push_grad = np.zeros(0, np.int64), np.zeros((0, d))\n    cache = {}\n"),
           ("        pull_owner, push_owner = shard_of(keys, n_rows, S), shard_of(push_keys, n_rows, S)\n",
            "        ask = np.array([x for x in keys if int(x) not in cache], dtype=np.int64)\n"
            "        pull_owner, push_owner = shard_of(ask, n_rows, S), shard_of(push_keys, n_rows, S)\n"),
           ("            comm.send(pack(kind, c, push_keys[mine], keys[pull_owner == j], push_grad[mine]), j)",
            "            comm.send(pack(kind, c, push_keys[mine], ask[pull_owner == j], push_grad[mine]), j)"),
           ("        rows = np.zeros((len(keys), d))\n"
            "        for j in range(S):\n            rows[pull_owner == j] = comm.recv(j)\n",
            "        for j in range(S):\n            for x, row in zip(ask[pull_owner == j], comm.recv(j)):\n"
            "                cache[int(x)] = row\n"
            "        rows = np.array([cache[int(x)] for x in keys]).reshape(len(keys), d)\n")]
