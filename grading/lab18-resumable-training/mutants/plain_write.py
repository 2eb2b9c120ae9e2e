# mutant: the write students try first: open(path, "wb") on the final path, no temporary file
# loses: atomic
# says: temporary file
def atomic_write(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # noqa: F821
    with open(path, "wb") as f:
        f.write(data)
