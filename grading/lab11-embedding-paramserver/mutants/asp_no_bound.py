# mutant: the bound is never enforced (ASP): every pull is answered as soon as it arrives
# loses: bsp_exact, staleness
# says: gap
REPLACE = [("state[q] == \"waiting\" and clock[q] - slowest <= s]", "state[q] == \"waiting\"]")]
