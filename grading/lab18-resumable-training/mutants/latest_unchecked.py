# mutant: latest_checkpoint returns the newest file named like a checkpoint even if it does not load
# loses: resume
# says: lacks
def latest_checkpoint(ckpt_dir):
    if not os.path.isdir(ckpt_dir):  # noqa: F821
        return None
    names = sorted(n for n in os.listdir(ckpt_dir) if n.startswith("ckpt-") and n.endswith(".npz"))  # noqa: F821
    if not names:
        return None
    return int(names[-1][5:13]), load_checkpoint(os.path.join(ckpt_dir, names[-1]))  # noqa: F821
