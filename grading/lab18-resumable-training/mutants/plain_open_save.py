# mutant: the save students write first: open(path, "wb") and np.savez, no temporary file
# loses: atomic
import os
import tempfile

import numpy as np


def save_checkpoint(path, state):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as f:
        np.savez(f, **state)
