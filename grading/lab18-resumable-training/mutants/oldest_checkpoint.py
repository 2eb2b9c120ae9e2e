# mutant: latest_checkpoint walks the steps in ascending order and returns the oldest checkpoint that loads
# loses: resume
# says: resume from the newest checkpoint
REPLACE = [
    ('    for step in sorted(steps, reverse=True):\n', '    for step in sorted(steps):\n'),
]
