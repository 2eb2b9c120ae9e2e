# mutant: updates c_i with option I done wrong for this lab: c_i+ = g_i(w), the gradient at the server's model,
# instead of option II's average corrected step c_i - c + (w - y) / (steps lr)
# loses: no_drop, dropout, edge, privacy, clients, broadcast, correct_process
# says: control variate c
REPLACE = [("    c_new = c_i - c + (w - local) / (steps * lr)   # option II: the average corrected gradient, uncorrected\n",
            "    c_new = grad(w, X, y)\n")]
