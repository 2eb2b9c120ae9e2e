# mutant: the server answers the waiting pulls first and applies the request's push afterwards
# loses: bsp_exact, pulls_current, staleness
# says: at that moment
REPLACE = [("            if len(push_keys):\n                rows[np.searchsorted(keys, push_keys)] -= lr * grads\n",
            "            late = (push_keys, grads)\n"),
           ("            state[q] = \"answered\"\n",
            "            state[q] = \"answered\"\n"
            "        if ready and len(late[0]):\n"
            "            rows[np.searchsorted(keys, late[0])] -= lr * late[1]\n")]
