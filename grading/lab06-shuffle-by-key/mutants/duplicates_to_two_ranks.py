# mutant: each pair also goes to the next rank "for safety": duplicated pairs
# loses: complete, placement, correct_process, traffic
# says: more than once
REPLACE = [("        outgoing[partition(key, R) % K].append((key, value))\n",
            "        outgoing[partition(key, R) % K].append((key, value))\n"
            "        if K > 1:\n"
            "            outgoing[(partition(key, R) + 1) % K].append((key, value))\n")]
