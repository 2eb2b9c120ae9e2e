# mutant: best() takes the best score over every rung instead of the best at the highest rung reached
# loses: driver
REPLACE = [('        top = max(k for k in range(len(self.rungs)) if self.scores[k])\n        seen = self.scores[top]\n',
            '        seen = {}\n        for k in range(len(self.rungs)):\n'
            '            for q, v in self.scores[k].items():\n                seen[q] = max(v, seen.get(q, -np.inf))\n')]
