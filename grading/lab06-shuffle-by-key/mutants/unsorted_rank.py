# mutant: concatenates the runs it receives instead of merging them: the right ranges, unsorted within a rank
#   (and with combine='sum' the sum of adjacent pairs leaves a key several times on the rank)
# loses: sorted, combine, correct_process
# says: merge the sorted runs you receive
REPLACE = [("    merged = list(heapq.merge(*runs, key=lambda p: order(p[0])))",
            "    merged = [p for run in runs for p in run]")]
