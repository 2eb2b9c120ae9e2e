# mutant: the end is tested after every round, so round 0 (where no agent has counted its conflicts) looks solved
# loses: solved_lossless, solved_lossy, unsolvable, correct_process, traffic_lossless, traffic_lossy
REPLACE = [("            if r % 2 == 1 and total == 0:", "            if total == 0:")]
