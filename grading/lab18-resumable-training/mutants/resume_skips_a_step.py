# mutant: resumes at the step after the checkpoint's (start = step + 1): one step is never run
# loses: resume
# says: then restarted
REPLACE = [
    ('        start, state = found\n', '        start, state = found\n        start += 1\n'),
]
