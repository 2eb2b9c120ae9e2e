# mutant: no join: all S servers serve from clock 0 on the full ring, so nothing ever moves (right values, the
# wrong membership)
# loses: routing, migration
# says: one request per clock to every server of that clock's ring
REPLACE = [("        members = list(range(S)) if c >= join else list(range(S - 1))\n",
            "        members = list(range(S))\n"),
           ("    first = join if (me == new and join > 0) else 0\n", "    first = 0\n"),
           ("        if c == join and join > 0:\n", "        if False:\n")]
