# mutant: latest_checkpoint takes the file written last (modification time), not the highest step
# loses: resume
# says: written before
REPLACE = [
    ('    for step in sorted(steps, reverse=True):\n',
     '    for step in sorted(steps, key=lambda s: os.stat(checkpoint_path(ckpt_dir, s)).st_mtime_ns, reverse=True):\n'),
]
