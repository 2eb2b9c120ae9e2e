"""The real model on this machine: our NumPy Llama against transformers (Chapters 22, 24, 36).

SmolLM2-135M-Instruct (Q4_1 GGUF, installed by `make install`) dequantized to float32 and run by
``serving.llama`` (NumPy, BLAS matmuls) and by transformers' ``LlamaForCausalLM`` (torch, eager attention)
holding the same weights. Reported: load time (our GGUF read + dequantization, the tokenizer, the
reference built from our weights, and transformers' own ``from_pretrained(gguf_file=...)``), prefill
tokens/s for a prompt of `--prompt` tokens, and decode tokens/s over `--new` greedy tokens with the KV
cache (each side's own cache). The greedy tokens of both are asserted equal. Times are medians of
`--repeats` runs; the threads line says how many BLAS and torch threads ran.
Usage: python benchmarks/bench_real_model.py [--threads T] [--prompt 128] [--new 32] [--repeats 3] [--no-hf-load] [--smoke]
"""
from __future__ import annotations

import argparse
import statistics
import time

from _common import machine
from scaleoutai.serving import llama, model_files


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens for the prefill measurement")
    ap.add_argument("--new", type=int, default=32, help="greedy tokens for the decode measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="BLAS and torch threads (default: the libraries' own)")
    ap.add_argument("--no-hf-load", action="store_true", help="skip timing transformers' own GGUF loader")
    ap.add_argument("--smoke", action="store_true", help="a 32-token prompt, 8 new tokens, one repeat")
    a = ap.parse_args()
    if a.smoke:
        a.prompt, a.new, a.repeats, a.no_hf_load = 32, 8, 1, True
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    if a.threads:
        torch.set_num_threads(a.threads)
        threadpool_limits(a.threads)

    blas = sum(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    print(f"# real model: SmolLM2-135M-Instruct (Q4_1 GGUF -> float32); {machine()}")
    print(f"# threads: NumPy BLAS {blas}, torch {torch.get_num_threads()}")

    t0 = time.perf_counter()
    f = model_files.read_gguf()
    t_read = time.perf_counter() - t0
    w = llama.llama_weights(f)
    t0 = time.perf_counter()
    tok = model_files.load_tokenizer()
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = llama.reference_model(w)
    t_ref = time.perf_counter() - t0
    print(f"load: GGUF read + dequantize {t_read:.1f} s ({f.n_params / 1e6:.0f} M parameters, "
          f"{f.stored_bytes / 1e6:.0f} MB stored -> {4 * f.n_params / 1e6:.0f} MB float32), tokenizer {t_tok:.1f} s, "
          f"transformers model from our weights {t_ref:.1f} s")
    if not a.no_hf_load:
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        t0 = time.perf_counter()
        AutoModelForCausalLM.from_pretrained(str(f.path.parent), gguf_file=f.path.name, dtype=torch.float32)
        print(f"load: transformers from_pretrained(gguf_file=...) {time.perf_counter() - t0:.1f} s")

    text = "Distributed training splits a model's work across many machines. " * 64
    ids = llama.chat_ids(tok, "Summarise: " + text)[: a.prompt]
    P, N = len(ids), a.new

    def hf_prefill():
        with torch.no_grad():
            return ref(torch.tensor([ids])).logits[0, -1]

    def hf_generate():
        with torch.no_grad():
            return ref.generate(torch.tensor([ids]), attention_mask=torch.ones(1, P, dtype=torch.long),
                                max_new_tokens=N, min_new_tokens=N, do_sample=False, pad_token_id=w.config.eos_id)

    p_ours, _ = timed(lambda: llama.forward(w, ids, last_only=True), a.repeats)
    g_ours, toks_ours = timed(lambda: llama.generate(w, ids, N, eos_id=-1), a.repeats)
    p_hf, _ = timed(hf_prefill, a.repeats)
    g_hf, out_hf = timed(hf_generate, a.repeats)
    toks_hf = out_hf[0, P:].tolist()
    assert toks_ours == toks_hf, (toks_ours, toks_hf)
    print(f"\nprompt {P} tokens, {N} greedy tokens (equal token for token: {tok.decode(toks_ours)[:60]!r}...)")
    print(f"{'engine':<34}{'prefill tok/s':>14}{'decode tok/s':>14}{'ms/token':>10}")
    for name, p, g in (("ours (NumPy, float32, KV cache)", p_ours, g_ours),
                       ("transformers (torch, float32)", p_hf, g_hf)):
        decode = max(g - p, 1e-9) / max(N - 1, 1)  # generate = prefill + (N - 1) decode steps
        print(f"{name:<34}{P / p:>14.0f}{1 / decode:>14.1f}{1e3 * decode:>10.1f}")


if __name__ == "__main__":
    main()
