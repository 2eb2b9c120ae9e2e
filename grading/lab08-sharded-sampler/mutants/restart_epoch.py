# mutant: the new job starts the epoch over on its K: everything the old job read is read again
# loses: same_k, k_changes, schedules
# says: the whole epoch again
REPLACE = [("    left = n - consumed  #", "    consumed = 0\n    left = n - consumed  #")]
