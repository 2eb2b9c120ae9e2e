# mutant: an event joins the first open session it overlaps and stops looking: one that bridges two
# sessions leaves them apart
# loses: sessions, emitted_at, edge_cases, interleavings, correct_process
# says: bridges
REPLACE = [("        if start < t + gap and t < end:  # overlaps the event's interval: absorb it",
            "        if start < t + gap and t < end and n == 1:  # overlaps the event's interval: absorb it")]
