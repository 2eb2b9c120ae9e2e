# mutant: the top starts at s (every rung open) but still grows on disagreements: ASHA with a dead test
# loses: decisions, jobs, growth, driver
# says: the lab asks for PASHA
REPLACE = [("        self.top = min(1, self.last)", "        self.top = self.last")]
