# mutant: clients report (delta_y, delta_c) in float32 to halve the bytes: off by ~1e-8, not float64
# loses: no_drop, dropout, edge, privacy, clients, broadcast, correct_process
REPLACE = [("            comm.send(np.concatenate([delta_y, delta_c]), 0)\n",
            "            comm.send(np.concatenate([delta_y, delta_c]).astype(np.float32), 0)\n")]
