# mutant: ties at a rung go to the newer trial
# loses: decisions, jobs, driver
# says: first wrong one
REPLACE = [
    ('key=lambda t: (-seen[t], t))\n        return [t',
     'key=lambda t: (-seen[t], -t))\n        return [t'),
]
