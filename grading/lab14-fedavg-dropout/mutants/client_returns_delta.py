# mutant: a client returns its last delta_c instead of its control variate c_i
# loses: clients
# says: c_i
REPLACE = [("            c_i = c_i + delta_c\n        return c_i\n", "            c_i = c_i + delta_c\n        return delta_c\n")]
