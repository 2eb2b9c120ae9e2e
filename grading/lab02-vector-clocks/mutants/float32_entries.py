# mutant: the leader sends each entry as float32, so the followers' logs lose precision
# loses: commit, minority, majority_lost
REPLACE = [
    ('comm.send(np.array([value]), f)', 'comm.send(np.array([value], dtype=np.float32), f)'),
]
