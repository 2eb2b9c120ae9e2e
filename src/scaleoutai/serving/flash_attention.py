"""Attention that fits the memory hierarchy: tiled attention with the online softmax (Chapter 22, Sections
2 and 4), the algorithm of FlashAttention (Dao et al., 2022) in the loop order of FlashAttention-2.

``naive_attention`` forms the N x M score matrix S = Q K^T / sqrt(d), its softmax P and O = P V; on a GPU
S and P are written to and read back from HBM. ``flash_attention`` never forms them: it walks Q in
blocks of ``block_q`` rows and, for each, K and V in blocks of ``block_k`` rows, keeping in fast memory
(SRAM) only the block's running row maximum m, running denominator l and unnormalised output acc:

    m_new = max(m, rowmax(S_blk));  c = exp(m - m_new)
    l     = c * l + rowsum(exp(S_blk - m_new))
    acc   = c * acc + exp(S_blk - m_new) V_blk;     O_blk = acc / l   after the last K/V block.

Invariant (tested): the result equals softmax(S) V to rounding for any block sizes, causal or not, since
every rescaling multiplies the partial sums by exactly the factor that changes their reference maximum.

HBM traffic (elements; times itemsize for bytes), d the head size, N query rows, M key rows:
- naive: read Q, K (N d + M d), write S (N M), read S and write P (2 N M), read P and V (N M + M d),
  write O (N d): 2 N d + 2 M d + 4 N M;
- tiled: read every Q block once and write every O block once (2 N d), read the K and V blocks each Q
  block visits (2 d per row; all M rows non-causally, ~M/2 causally): 2 N d + 2 d M ceil(N / block_q).
With SRAM of ``sram`` elements, FlashAttention picks block_k = ceil(sram / 4d), block_q = min(block_k, d).
The tiled form's traffic is still quadratic (the K/V re-reads, 2 d N M / block_q), but its coefficient
2 d / block_q is 2 at block_q = d against the naive form's 4, it falls as the SRAM (and block_q) grows,
and no N x M buffer exists anywhere: memory is O(N d) instead of O(N M).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def _check(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> None:
    if q.ndim < 2 or k.shape != v.shape or q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"need q (..., N, d), k and v (..., M, d) with the same leading dims and d; "
                         f"got {q.shape}, {k.shape}, {v.shape}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention needs as many queries as keys, got {q.shape[-2]} and {k.shape[-2]}")


def naive_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """softmax(Q K^T / sqrt(d) [+ causal mask]) V with the whole (..., N, M) score matrix in memory."""
    _check(q, k, v, causal)
    s = q @ np.swapaxes(k, -1, -2) / float(np.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[-2]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@dataclass
class Traffic:
    """Elements moved between slow memory (HBM) and fast memory (SRAM) by one attention call."""

    read: int = 0
    written: int = 0

    @property
    def total(self) -> int:
        return self.read + self.written


def flash_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False, block_q: int = 64,
                    block_k: int = 64, traffic: Traffic | None = None) -> np.ndarray:
    """Tiled attention with the online softmax: Q in blocks of ``block_q`` rows (outer loop), K and V in
    blocks of ``block_k`` rows (inner loop); only (block_q, block_k) scores exist at a time. Blocks need
    not divide the lengths. Causally, K/V blocks wholly after a Q block are skipped. If ``traffic`` is
    given, the HBM elements the loop reads and writes are added to it (Q, K, V blocks in; O blocks out)."""
    _check(q, k, v, causal)
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    N, M, d = q.shape[-2], k.shape[-2], q.shape[-1]
    lead = int(np.prod(q.shape[:-2], dtype=np.int64))
    scale = 1.0 / float(np.sqrt(d))
    out = np.empty(q.shape, dtype=np.result_type(q, k, v))
    for i0 in range(0, N, block_q):
        i1 = min(N, i0 + block_q)
        qb = q[..., i0:i1, :] * scale                     # load Q_i into SRAM
        m = np.full(q.shape[:-2] + (i1 - i0, 1), -np.inf, dtype=out.dtype)
        l = np.zeros_like(m)
        acc = np.zeros(q.shape[:-2] + (i1 - i0, d), dtype=out.dtype)
        if traffic is not None:
            traffic.read += lead * (i1 - i0) * d
        for j0 in range(0, i1 if causal else M, block_k):
            j1 = min(M, j0 + block_k)
            kb, vb = k[..., j0:j1, :], v[..., j0:j1, :]  # load K_j, V_j into SRAM
            if traffic is not None:
                traffic.read += 2 * lead * (j1 - j0) * d
            s = qb @ np.swapaxes(kb, -1, -2)
            if causal and j1 > i0 + 1:                    # the block straddles the diagonal
                s = np.where(np.arange(i0, i1)[:, None] >= np.arange(j0, j1)[None, :], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            c = np.exp(m - m_new)                         # rescales what was summed under the old max
            p = np.exp(s - m_new)
            l = c * l + p.sum(axis=-1, keepdims=True)
            acc = c * acc + p @ vb
            m = m_new
        out[..., i0:i1, :] = acc / l                      # write O_i to HBM once
        if traffic is not None:
            traffic.written += lead * (i1 - i0) * d
    return out


def naive_attention_traffic(N: int, d: int, M: int | None = None, heads: int = 1) -> Traffic:
    """HBM elements of ``naive_attention`` (FlashAttention paper, Algorithm 0): read Q, K, then S, then P
    and V; write S, P and O: 2 N d + 2 M d + 4 N M per head."""
    M = N if M is None else M
    return Traffic(read=heads * (N * d + M * d + N * M + N * M + M * d), written=heads * (2 * N * M + N * d))


def flash_attention_traffic(N: int, d: int, block_q: int, block_k: int, M: int | None = None,
                            causal: bool = False, heads: int = 1) -> Traffic:
    """HBM elements of ``flash_attention`` with these blocks: each Q block read once and its O block
    written once, plus the K and V rows it visits (all M, or causally those up to its last row)."""
    M = N if M is None else M
    kv_rows = 0
    for i0 in range(0, N, block_q):
        i1 = min(N, i0 + block_q)
        stop = i1 if causal else M
        kv_rows += min(M, math.ceil(stop / block_k) * block_k)
    return Traffic(read=heads * (N * d + 2 * d * kv_rows), written=heads * N * d)


def blocks_for_sram(sram_bytes: int, d: int, itemsize: int = 2) -> tuple[int, int]:
    """(block_q, block_k) that FlashAttention picks for an SRAM of ``sram_bytes``: block_k = ceil(S / 4d),
    block_q = min(block_k, d), with S the SRAM size in elements (Q, K, V and O blocks must fit together)."""
    sram = sram_bytes // itemsize
    if sram < 4 * d:
        raise ValueError(f"an SRAM of {sram_bytes} bytes cannot hold one row each of Q, K, V and O at d={d}")
    block_k = math.ceil(sram / (4 * d))
    return min(block_k, d), block_k
