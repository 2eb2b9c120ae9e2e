# mutant: a client returns only its last local model (shape (d,)), not one row per round
# loses: clients
# says: has shape
REPLACE = [("            history[t] = w_k\n        return history\n",
            "            history[t] = w_k\n        return history[-1]\n")]
