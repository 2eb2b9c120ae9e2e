# mutant: FedAvg's habit: clients add n_k to the report and the server weights delta_y (and the count) by n_k
# instead of the lab's uniform mean
# loses: no_drop, dropout, edge, correct_process
REPLACE = [("            comm.send(np.concatenate([delta_y, delta_c]), 0)\n",
            "            comm.send(np.concatenate([[float(len(y))], delta_y, delta_c]), 0)\n"),
           ("            sum_dy += report[:d]\n            sum_dc += report[d:]\n            reported += 1\n",
            "            sum_dy += report[0] * report[1:d + 1]\n            sum_dc += report[d + 1:]\n"
            "            reported += report[0]\n")]
