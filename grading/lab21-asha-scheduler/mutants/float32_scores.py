# mutant: the scheduler keeps scores in float32: results closer than float32 can tell become ties
# loses: decisions, jobs, driver
REPLACE = [('        self.scores[rung][trial] = float(score)\n', '        self.scores[rung][trial] = float(np.float32(score))\n')]
