# mutant: ignores the checkpoints on restart: right answer, every step redone
# loses: resume
# says: redid
REPLACE = [
    ('    found = latest_checkpoint(ckpt_dir)\n    if found is None:',
     '    found = None\n    if found is None:'),
]
