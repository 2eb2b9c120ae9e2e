# mutant: the controller feeds the jobs in the order of the login nodes' tables, not by (submit, id)
# loses: cluster, legal
REPLACE = [("    rows.sort(key=lambda a: (a[0], a[1]))\n", "    rows = list(rows)\n")]
