# mutant: the server averages delta c_i over the clients that reported (|S|), not over all N clients
# loses: dropout, edge
# says: N =
REPLACE = [("            c = c + sum_dc / n_clients\n", "            c = c + sum_dc / reported\n")]
