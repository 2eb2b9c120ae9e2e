"""transformers, imported without noise (Part V; issue 33, item 6).

On a CPU machine, importing transformers imports torchao, which logs "Failed to load ..." for each CUDA
kernel library it ships, and torch's pytree logs a deprecation per registered enum; transformers itself
logs notes about optional packages, and it draws a progress bar while it loads a checkpoint's weights
(a small model loads in a blink). None of it concerns a reader, so every place the course imports
transformers or sentence-transformers calls ``quiet()`` first. Real errors still raise.
"""
from __future__ import annotations

import logging
import os
import sys

LOGGERS = ("torchao", "torch.utils._pytree", "transformers")


def quiet() -> None:
    """Raise the import-time loggers of transformers and its dependencies to ERROR and turn off the Hugging
    Face progress bars (read when huggingface_hub is imported, switched off directly if it already is)."""
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
