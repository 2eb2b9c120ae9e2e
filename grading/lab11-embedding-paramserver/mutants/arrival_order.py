# mutant: the server listens to the workers in the order it answered them (first answered, first heard: the
# arrival order of a world where every worker computes equally fast), not by the virtual-time rule
# loses: schedule
# says: not the order requests arrive in
REPLACE = [("    now = 0.0\n", "    now = 0.0\n    queue = list(range(W))\n"),
           ("k = min(ready, key=lambda q: (vt[q], q))", "k = queue.pop(0)"),
           ("            state[q] = \"answered\"\n",
            "            state[q] = \"answered\"\n            queue.append(q)\n")]
