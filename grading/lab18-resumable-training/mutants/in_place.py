# mutant: writes over the checkpoint in place: a writer killed half-way tears it
# loses: atomic
# says: do not load
import os
import tempfile

import numpy as np


def save_checkpoint(path, state):
    """Write ``state`` to ``path`` as .npz atomically: temp file in the same folder, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), path
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
