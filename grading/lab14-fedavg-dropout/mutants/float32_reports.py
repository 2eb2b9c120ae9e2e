# mutant: a client reports (n_k, w_k) in float32 to halve the bytes: the average is off by ~1e-8, not float64
# loses: no_drop, dropout, all_drop, correct_process
REPLACE = [("            comm.send(np.concatenate([[float(len(y))], w_k]), 0)\n",
            "            comm.send(np.concatenate([[float(len(y))], w_k]).astype(np.float32), 0)\n")]
