"""One table of accelerators for every chapter, and the roofline time of a decode step (Chapters 3, 19, 22, 24).

Each row is a spec-sheet value (vendor datasheets; dense peaks, i.e. WITHOUT 2:4 structured sparsity,
which the datasheets' headline numbers include and which doubles them):

    name                    HBM/GDDR bandwidth   dense bf16 peak   memory      ridge (FLOP/byte)
    NVIDIA A10G             600 GB/s             70 TFLOP/s        24 GB       117
    NVIDIA L4               300 GB/s             121 TFLOP/s       24 GB       403
    NVIDIA A100 80GB SXM    2,039 GB/s           312 TFLOP/s       80 GB       153
    NVIDIA H100 SXM         3,350 GB/s           989 TFLOP/s       80 GB       295
    NVIDIA H200             4,800 GB/s           989 TFLOP/s       141 GB      206

GB here is 1e9 bytes, as the datasheets print it. The A10G (AWS g5 instances) is AWS's variant of the A10
with the same 24 GB and 600 GB/s; NVIDIA publishes no datasheet for it, and its dense tensor peak (about
70 TFLOP/s, as published comparisons of the two cards give it) is below the A10's 125 TFLOP/s: the one row
not read off a vendor datasheet, and one that matters little, as decode is memory-bound. The H200 is the H100's GH100 die with HBM3e: same FLOP/s, more and faster memory.

Decoding one token per sequence is memory-bound at small batch: every weight is read once per step, and
every sequence's KV cache is read once. The roofline (Chapter 3) bounds the step time from below:

    t_step = max((weight_bytes + kv_bytes_read) / bandwidth,  flops / peak)

Use one of these rows (or ``accelerator(name)``) wherever a chapter models a GPU, so that two chapters never model
the same GPU two ways.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check as ck

__all__ = ["Accelerator", "A10G", "L4", "A100_80GB_SXM", "H100_SXM", "H200", "ACCELERATORS", "accelerator",
           "decode_step_seconds"]


@dataclass(frozen=True)
class Accelerator:
    """An accelerator's spec-sheet roofline: HBM bandwidth (bytes/s), dense bf16 peak (FLOP/s), memory (bytes)."""

    name: str
    hbm_bandwidth: float
    bf16_flops: float
    memory_bytes: float

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline bends: peak / bandwidth (Chapter 3)."""
        return self.bf16_flops / self.hbm_bandwidth


A10G = Accelerator("NVIDIA A10G", 600e9, 70e12, 24e9)
L4 = Accelerator("NVIDIA L4", 300e9, 121e12, 24e9)
A100_80GB_SXM = Accelerator("NVIDIA A100 80GB SXM", 2039e9, 312e12, 80e9)
H100_SXM = Accelerator("NVIDIA H100 SXM", 3350e9, 989e12, 80e9)
H200 = Accelerator("NVIDIA H200", 4800e9, 989e12, 141e9)

ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (A10G, L4, A100_80GB_SXM, H100_SXM, H200)}


def _key(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum()).removeprefix("nvidia")


def accelerator(name: str | Accelerator) -> Accelerator:
    """The table's row for ``name`` ("H100 SXM", "nvidia-h100-sxm" and "H100_SXM" all match); an
    Accelerator is returned as is. KeyError listing the table when there is no such row."""
    if isinstance(name, Accelerator):
        return name
    rows = {_key(a.name): a for a in ACCELERATORS.values()}
    try:
        return rows[_key(name)]
    except KeyError:
        raise KeyError(f"no accelerator named {name!r}; the table has {sorted(ACCELERATORS)}") from None


def decode_step_seconds(weight_bytes: float, kv_bytes_read: float, flops: float,
                        gpu: str | Accelerator) -> float:
    """Roofline time of one forward step: max((weight_bytes + kv_bytes_read) / bandwidth, flops / peak).

    For decoding, ``weight_bytes`` is read once per step whatever the batch, ``kv_bytes_read`` is the
    sum over the batch of each sequence's cached K and V, ``flops`` = 2 P per token (plus attention's).
    A lower bound: real kernels reach 60-90% of either roof (Chapter 3, Section 4; Chapter 24, Section 7).
    """
    g = accelerator(gpu)
    moved = float(ck.non_negative("weight_bytes", weight_bytes)) + float(ck.non_negative("kv_bytes_read",
                                                                                         kv_bytes_read))
    return max(moved / g.hbm_bandwidth, float(ck.non_negative("flops", flops)) / g.bf16_flops)
