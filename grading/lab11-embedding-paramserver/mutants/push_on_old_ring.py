# mutant: the push of clock c-1 is routed by the ring of clock c-1 (where its rows were pulled), not clock c's: at the
# join the gradients of the moved rows go to the old server, which no longer holds them (and fails)
# loses: routing, final_rows, pulls_current, migration, sparse, correct_process
# says: route every key of a clock-c request
REPLACE = [("ring_owner(prev, members, vnodes)",
            "ring_owner(prev, list(range(S)) if c - 1 >= join else list(range(S - 1)), vnodes)")]
