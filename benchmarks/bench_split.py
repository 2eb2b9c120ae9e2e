"""Split inference (Chapter 34): the latency per cut, modelled and measured, and the edge half in NumPy vs onnxruntime.

Part 1: the chapter's MLP (widths 128-32-512-16-256-10, a task of 64 rows), edge 1e8 FLOP/s, server 1e11,
alpha 10 ms. For a few bandwidths and every cut: the model T(c), the simulator's time over the communicator
(edge = rank 0, server = rank 1; must equal the model), and a measured time where each side's compute is
the NumPy forward timed on this machine and scaled to the device's FLOP rate (the link from the model).
Part 2: the edge half (layers 0-2) as float32 and int8, ours (NumPy) vs onnxruntime (CPUExecutionProvider,
the model exported with torch.onnx.export, int8 by quantize_dynamic with reduce_range), median latency
for 1 row and 64 rows, in one run. Model files go to a temporary directory.
Usage: python benchmarks/bench_split.py [--quick]
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import warnings

import numpy as np

from _common import machine
from scaleoutai import datasets, perf
from scaleoutai.infra import edge

SIZES, BATCH, EDGE, SERVER, ALPHA, CUT = [128, 32, 512, 16, 256, 10], 64, 1e8, 1e11, 1e-2, 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and a smaller training set")
    a = ap.parse_args()
    repeats = 5 if a.quick else 30
    print(machine(), f"| load average {os.getloadavg()[0]:.2f}")
    X, y = datasets.classification(1200 if a.quick else 4000, SIZES[0], classes=SIZES[-1], separation=4.0, seed=0)
    params = edge.fit_mlp(X, y, SIZES, epochs=1 if a.quick else 4, seed=0)
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    x = X[:BATCH].astype(np.float32)
    L = len(SIZES) - 1

    total = edge.layer_flops(SIZES, BATCH).sum()
    rate = total / perf.measure(edge.forward_layers, p32, x, 0, L, repeats=repeats).median
    print(f"\nPart 1: latency per cut (ms); this CPU {rate / 1e9:.2f} GFLOP/s on the whole network")
    part = {}
    for c in range(L + 1):
        h = edge.forward_layers(p32, x, 0, c)
        part[c] = (perf.measure(edge.forward_layers, p32, x, 0, c, repeats=repeats).median if c else 0.0,
                   perf.measure(edge.forward_layers, p32, h, c, L, repeats=repeats).median if c < L else 0.0)
    print(f"{'B/s':>8} {'cut':>3} {'model':>8} {'sim':>8} {'measured':>9}")
    for bw in (3e4, 3e5, 3e6):
        rows = []
        for c in range(L + 1):
            model = edge.split_time(SIZES, c, BATCH, EDGE, SERVER, ALPHA, 1 / bw)
            sim = edge.run_split_inference(params, x, [c], [EDGE, SERVER], ALPHA, 1 / bw)[1].sim_time
            assert abs(sim - model) <= 1e-12 * model
            link = ALPHA + edge.cut_bytes(SIZES, c, BATCH) / bw if c < L else 0.0
            meas = part[c][0] * rate / EDGE + link + part[c][1] * rate / SERVER
            rows.append((model, meas))
            print(f"{bw:>8.0e} {c:>3} {model * 1e3:>8.2f} {sim * 1e3:>8.2f} {meas * 1e3:>9.2f}")
        best_m, best_x = int(np.argmin([r[0] for r in rows])), int(np.argmin([r[1] for r in rows]))
        print(f"{'':>8} best cut: model {best_m}, measured {best_x}")

    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-split-") as d:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            f32 = edge.export_onnx(params, CUT, os.path.join(d, "edge.onnx"))
        i8 = os.path.join(d, "edge_int8.onnx")
        quantize_dynamic(f32, i8, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
        opts = ort.SessionOptions()  # no spinning worker threads: they would starve NumPy's BLAS on a small machine
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        s32, s8 = (ort.InferenceSession(p, opts, providers=["CPUExecutionProvider"]) for p in (f32, i8))
        print(f"\nPart 2: edge half (layers 0-{CUT - 1}), median latency (us); files {os.path.getsize(f32)} B float32, "
              f"{os.path.getsize(i8)} B int8")
        q = edge.quantize_mlp(p32)
        for n in (1, BATCH):
            xb = x[:n]
            t = {"ours float32": perf.measure(edge.forward_layers, p32, xb, 0, CUT, repeats=repeats).median,
                 "ours int8": perf.measure(edge.int8_forward_layers, q, xb, 0, CUT, L, repeats=repeats).median,
                 "ort float32": perf.measure(s32.run, None, {"x": xb}, repeats=repeats).median,
                 "ort int8": perf.measure(s8.run, None, {"x": xb}, repeats=repeats).median}
            print(f"{n:>3} rows: " + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in t.items())
                  + f" | ort/ours float32 speedup {t['ours float32'] / t['ort float32']:.1f}x,"
                  f" int8 {t['ours int8'] / t['ort int8']:.1f}x")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
