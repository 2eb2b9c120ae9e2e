# mutant: the server sends only w; clients correct with c = 0 (the server's c never reaches them)
# loses: no_drop, dropout, edge, drift, correct_process
REPLACE = [("        message = np.concatenate([w, c])\n", "        message = w\n"),
           ("            if down.shape != (2 * d,):\n"
            "                raise ValueError(f\"client {rank} expected (w, c) of {2 * d} numbers, got shape {down.shape}\")\n"
            "            delta_y, delta_c = client_round(down[:d], down[d:], c_i, X, y, lr, steps)\n",
            "            delta_y, delta_c = client_round(down, np.zeros(d), c_i, X, y, lr, steps)\n")]
