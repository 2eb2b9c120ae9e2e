# mutant: the temporary file is named like a checkpoint, so a killed save leaves a torn 'checkpoint'
# loses: atomic
REPLACE = [
    ('prefix=".writing-", suffix=".tmp"',
     'prefix="ckpt-9999", suffix=".npz"'),
]
