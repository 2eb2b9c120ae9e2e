# mutant: right values by the protocol, but every rank also all-gathers every shard (a "cache" of the table)
# loses: gradients
REPLACE = [("    pooled = pool_bags(rows_u, inv, offsets, weights, mode)  # 3. forward from one copy per row\n",
            "    for j in peers:\n        comm.send(my_rows, j)\n    cache = [comm.recv(j) for j in peers]\n"
            "    pooled = pool_bags(rows_u, inv, offsets, weights, mode)  # 3. forward from one copy per row\n")]
