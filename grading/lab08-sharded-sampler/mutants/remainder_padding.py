# mutant: pads by repeating the unread samples instead of the epoch's order from its start: every sample once plus
# fewer than K repeats, but not the lab's tape, and with more ranks than samples left some are read 3 or 4 times
# loses: same_k, k_changes, schedules
# says: the padding repeats the unread samples
REPLACE = [("return perm[tape % n].astype(np.int64)", "return perm[consumed + (tape - consumed) % left].astype(np.int64)")]
