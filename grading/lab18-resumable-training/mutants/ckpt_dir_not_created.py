# mutant: train_resumable leaves creating the folder to the first save: a crash before it leaves no folder
# loses: intact
# says: there is no folder
REPLACE = [
    ('    os.makedirs(ckpt_dir, exist_ok=True)\n    found = latest_checkpoint(ckpt_dir)\n',
     '    found = latest_checkpoint(ckpt_dir)\n'),
]
