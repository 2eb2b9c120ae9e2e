# mutant: saves after steps s with s % every == 0 (one step late, and step 0)
# loses: intact
REPLACE = [
    ('if (s + 1) % every == 0 and comm.rank == 0:',
     'if s % every == 0 and comm.rank == 0:'),
]
