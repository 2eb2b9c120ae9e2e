# mutant: the list length is the course's ceil(n/K) minus the entries already read, consumed // K: after a change
# of K the ranks read one entry too many or too few
# loses: k_changes, schedules
REPLACE = [("length = left // K if drop_last else (left + K - 1) // K",
            "length = n // K - consumed // K if drop_last else (n + K - 1) // K - consumed // K")]
