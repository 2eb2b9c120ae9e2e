# mutant: the temporary file is named like a checkpoint, so a killed save leaves a torn 'checkpoint'
# loses: atomic
import os
import tempfile

import numpy as np


def save_checkpoint(path, state):
    """Write ``state`` to ``path`` as .npz atomically: temp file in the same folder, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="ckpt-9999", suffix=".npz", dir=folder)
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
