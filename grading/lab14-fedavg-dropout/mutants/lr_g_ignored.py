# mutant: the server ignores its learning rate lr_g and adds the plain mean of delta_y
# loses: no_drop, dropout, edge, privacy, clients, broadcast, correct_process
# says: global model w
REPLACE = [("            w = w + lr_g * sum_dy / reported\n", "            w = w + sum_dy / reported\n")]
