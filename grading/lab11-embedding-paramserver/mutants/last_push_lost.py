# mutant: the push carried by the DONE message is dropped: the last clock's gradients are lost
# (under SSP a slow worker may still read those rows, so some pulls are stale too)
# loses: bsp_exact, exactly_once, pulls_current, staleness, schedule, owners, sparse
# says: none lost
REPLACE = [("            if len(push_keys):\n", "            if len(push_keys) and kind != DONE:\n")]
