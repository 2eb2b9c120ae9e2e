"""Speculative decoding on this machine: acceptance rate and measured speed-up against the draft length k
(Chapter 22, Sections 4 and 7).

The target is the course's NumPy decoder (width 512, MLP 2048, ``--layers`` blocks) whose upper blocks
write ``--eps`` times their output into the residual stream (``speculative.damp_upper_blocks``); the draft
is its first block with its embeddings and head (``draft_by_layer_skip``). For each k: greedy speculative
decoding of ``--new`` tokens (checked equal, token for token, to the target's own greedy decoding), its
acceptance rate, tokens per target pass against (1 - a^(k+1)) / (1 - a), and the wall-clock speed-up over
the target decoding alone (median of ``--repeats`` runs, one BLAS thread); the acceptance rate at
temperature 1 is counted too. Usage: python benchmarks/bench_speculative.py [--layers 8] [--new 128]
[--eps 0.1] [--repeats 5] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from _common import machine
from scaleoutai.serving import speculative as sp
from scaleoutai.serving.decoder import decoder_init, generate


def timed(repeats: int, fn, *args, **kwargs):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 12])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="a 4-block target, 16 tokens, k in 1 2: checks the script")
    a = ap.parse_args()
    if a.smoke:
        a.layers, a.new, a.ks, a.repeats = 4, 16, [1, 2], 1
    base = decoder_init(vocab=512, d_model=512, n_heads=8, n_layers=a.layers, d_ff=2048, max_len=256, seed=0)
    target = sp.damp_upper_blocks(base, 1, a.eps)
    draft = sp.draft_by_layer_skip(target, 1)
    prompt = np.random.default_rng(1).integers(0, 512, size=8)
    print(f"# speculative decoding: target {a.layers} blocks (d 512, MLP 2048, vocab 512, upper blocks x {a.eps}), "
          f"draft = its first block; {a.new} greedy tokens, median of {a.repeats}, 1 BLAS thread")
    print(f"# {machine()}; load average {os.getloadavg()[0]:.2f}")
    with threadpool_limits(limits=1):
        (want,), t_plain = timed(a.repeats, generate, target, [prompt], a.new)
        print(f"# target alone: {a.new / t_plain:.1f} tokens/s")
        print(f"{'k':>3} {'acceptance':>10} {'tokens/pass':>11} {'formula':>8} {'speed-up':>8} {'acceptance T=1':>14}")
        for k in a.ks:
            (got, st), t_k = timed(a.repeats, sp.speculative_generate, target, draft, prompt, a.new, k=k, greedy=True)
            assert got == want, f"k={k}: speculative greedy tokens differ from the target's"
            _, st1 = sp.speculative_generate(target, draft, prompt, a.new, k=k, seed=0)
            formula = sp.expected_tokens_per_pass(st.acceptance, k)
            print(f"{k:>3} {st.acceptance:>10.3f} {st.tokens_per_pass:>11.2f} {formula:>8.2f} {t_plain / t_k:>8.2f} "
                  f"{st1.acceptance:>14.3f}")


if __name__ == "__main__":
    main()
