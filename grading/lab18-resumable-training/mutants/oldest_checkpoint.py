# mutant: the candidates are tried oldest first: every restart resumes from the first checkpoint
# loses: resume, reshard, checksum
# says: resume from it
REPLACE = [
    (', reverse=True)\n    candidates = []',
     ')\n    candidates = []'),
]
