# mutant: the checkpoint of step s + 1 holds the state before step s + 1's update
# loses: resume, reshard, checksum, traffic, commit
REPLACE = [
    ('        g = gradient(A, b, all_gather(comm, w))[lo:hi]\n',
     '        g = gradient(A, b, all_gather(comm, w))[lo:hi]\n        old = np.stack([w, m])\n'),
    ('write_checkpoint(comm, ckpt_dir, done, np.stack([w, m]), n)',
     'write_checkpoint(comm, ckpt_dir, done, old, n)'),
]
