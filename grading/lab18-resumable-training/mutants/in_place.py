# mutant: writes over the checkpoint in place: a writer killed half-way tears it
# loses: atomic
# says: do not load
REPLACE = [
    ('    fd, tmp = tempfile.mkstemp(prefix=".writing-", suffix=".tmp", dir=folder)\n',
     '    fd, tmp = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), path\n'),
]
