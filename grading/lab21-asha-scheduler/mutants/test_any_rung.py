# mutant: the ranking test runs on a result at any rung k >= 1 (comparing k with k-1), not only at the top
# loses: decisions, jobs, growth, driver
REPLACE = [("        if rung == self.top < self.last and self.disagree():",
            "        if 1 <= rung <= self.top < self.last and self._disagree_at(rung):")]


def _disagree_at(self, rung):
    saved, self.top = self.top, rung
    try:
        return self.disagree()
    finally:
        self.top = saved


PASHA._disagree_at = _disagree_at  # noqa: F821
