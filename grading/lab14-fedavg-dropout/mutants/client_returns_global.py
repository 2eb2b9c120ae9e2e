# mutant: a client records the global model it received instead of its own local model w_k
# loses: clients
# says: local model
REPLACE = [("            history[t] = w_k\n", "            history[t] = w\n")]
