# mutant: rank 0 sums the workers' contributions but leaves out its own gradient
# loses: server, traffic, correct_process
REPLACE = [("        total = contribution(z)\n", "        total = 0 * contribution(z)\n")]
