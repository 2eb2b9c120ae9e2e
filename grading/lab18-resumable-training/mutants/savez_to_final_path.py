# mutant: np.savez straight to the final path: a writer killed half-way leaves a torn checkpoint
# loses: atomic
# says: do not load
def save_checkpoint(path, state):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # noqa: F821
    np.savez(path, **state)  # noqa: F821
