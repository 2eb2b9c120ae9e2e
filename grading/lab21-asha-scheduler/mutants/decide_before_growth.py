# mutant: on_result decides the trial's fate before it tests the ranking, so the result that grows the top
# is told "continue" although it is promotable at once (next_job still promotes it)
# loses: decisions
REPLACE = [("        if rung == self.top < self.last and self.disagree():\n            self.top += 1\n",
            "        grow = rung == self.top < self.last and self.disagree()\n"),
           ("        return fate", "        self.top += int(grow)\n        return fate")]
