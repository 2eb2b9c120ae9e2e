# mutant: rank r reads a contiguous block of the unread samples: one change of K works if the run finishes, but a
# run interrupted after some steps has read no prefix of the tape, so the next run rereads and skips
# loses: same_k, k_changes, schedules
REPLACE = [("tape = consumed + rank + K * np.arange(length, dtype=np.int64)",
            "tape = consumed + rank * length + np.arange(length, dtype=np.int64)")]
