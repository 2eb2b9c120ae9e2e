# mutant: every worker pulls (and pushes zeros for) the rows of the whole global batch, not of its block: right
# values, W times the traffic
# loses: sparse
# says: pull exactly the rows
REPLACE = [("        n = len(idx)\n"
            "        keys, inv = np.unique(np.concatenate([users[idx], items[idx] + n_users]), return_inverse=True)\n",
            "        whole = batches[c] if c < T else idx\n"
            "        n, m = len(idx), len(whole)\n"
            "        keys, inv = np.unique(np.concatenate([users[whole], items[whole] + n_users]), "
            "return_inverse=True)\n"
            "        inv = np.concatenate([inv[lo:lo + n], inv[m + lo:m + lo + n]])\n")]
