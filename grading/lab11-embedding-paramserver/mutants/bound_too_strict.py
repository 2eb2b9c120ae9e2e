# mutant: the server ignores s and always waits for everybody (BSP whatever s is): SSP never lets anyone ahead
# loses: staleness
# says: stricter than asked
REPLACE = [("clock[q] - slowest <= s]", "clock[q] - slowest <= 0]")]
