# mutant: skips `consumed` entries of every rank's own list (K * consumed samples of the epoch)
# loses: same_k, k_changes, schedules
# says: consumed counts the whole job
REPLACE = [("left = n - consumed  #", "left = n - K * consumed  #"),
           ("tape = consumed + rank + K * np.arange", "tape = K * consumed + rank + K * np.arange")]
