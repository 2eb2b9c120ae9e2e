# mutant: events exactly `gap` apart are put in one session (the overlap test includes the ends)
# loses: sessions, edge_cases, interleavings, correct_process
# says: exactly gap splits
REPLACE = [("        if start < t + gap and t < end:", "        if start <= t + gap and t <= end:")]
