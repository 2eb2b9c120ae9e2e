# mutant: the save students write first: open(path, "wb") and np.savez, no temporary file
# loses: atomic
REPLACE = [
    ('    fd, tmp = tempfile.mkstemp(prefix=".writing-", suffix=".tmp", dir=folder)\n    try:\n        with os.fdopen(fd, "wb") as f:',
     '    tmp = path\n    try:\n        with open(path, "wb") as f:'),
]
