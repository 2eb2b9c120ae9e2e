# mutant: off by one: a worker may run s + 1 clocks ahead of the slowest
# loses: bsp_exact, staleness
# says: gap
REPLACE = [("clock[q] - slowest <= s]", "clock[q] - slowest <= s + 1]")]
