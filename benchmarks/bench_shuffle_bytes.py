"""Shuffle bytes per rank, measured against the model, for K = 1..8 on the simulator (Chapter 6).

A rank holding m pairs whose keys hash uniformly over R = K partitions keeps m/K of them and sends the
other (K-1)/K m. With a combiner it first folds its pairs to one per distinct key, m' <= m, and sends
(K-1)/K m'. Measured: ``res.stats[r].bytes_sent`` (every byte the rank put on the network, headers of
the pickled blocks included) and the pairs that left it; model: (K-1)/K of its mapped pairs (or of its
combined pairs) times the bytes a pair costs in the one-rank encoding of the same pairs.
Usage: python benchmarks/bench_shuffle_bytes.py [--lines 20000] [--vocab 5000] [--smoke]
"""
from __future__ import annotations

import argparse

import numpy as np

from _common import machine
from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_range
from scaleoutai.data import mapreduce as mr


def job(comm, lines, combiner):
    mine, stats = mr.run_mapreduce(comm, lines, mr.word_count_mapper, mr.sum_reducer, combiner=combiner)
    return stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--vocab", type=int, default=5_000)
    ap.add_argument("--kmax", type=int, default=8)
    ap.add_argument("--smoke", action="store_true", help="1000 lines: checks the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.lines = 1_000
    lines = datasets.zipf_lines(a.lines, words_per_line=10, vocab=a.vocab, seed=0)
    print(f"# shuffle bytes per rank, word count of {a.lines} lines (vocab {a.vocab}); simulator; {machine()}")
    print(f"{'K':>2s} {'combiner':>8s} {'pairs/rank':>10s} {'sent/rank':>10s} {'model':>10s} "
          f"{'meas/model':>10s} {'bytes/rank':>11s} {'model B':>11s} {'meas/model':>10s}")
    for combiner in (None, mr.sum_reducer):
        for K in range(1, a.kmax + 1):
            res = cluster.run(job, K, args=(lines, combiner), network=cluster.Network(0.0, 0.0), timeout=600)
            pairs, sent, sent_model, nbytes, bytes_model = [], [], [], [], []
            for r, st in enumerate(res.values):
                lo, hi = block_range(len(lines), K, r)
                mapped = [p for line in lines[lo:hi] for p in mr.word_count_mapper(line)]
                if combiner is not None:
                    mapped = [(k, combiner(k, vs)) for k, vs in mr._group(mapped).items()]
                per_pair = mr.encode(mapped).nbytes / max(1, len(mapped))  # what a pair costs pickled
                assert res.stats[r].bytes_sent == st.bytes_sent  # the shuffle is all this rank sent
                pairs.append(len(mapped))
                sent.append(st.pairs_sent)
                sent_model.append(mr.shuffle_fraction(K) * len(mapped))
                nbytes.append(res.stats[r].bytes_sent)
                bytes_model.append(mr.shuffle_fraction(K) * len(mapped) * per_pair)
            ratio = np.mean(sent) / max(np.mean(sent_model), 1e-12) if K > 1 else float("nan")
            bratio = np.mean(nbytes) / max(np.mean(bytes_model), 1e-12) if K > 1 else float("nan")
            print(f"{K:2d} {'yes' if combiner else 'no':>8s} {np.mean(pairs):10.0f} {np.mean(sent):10.0f} "
                  f"{np.mean(sent_model):10.0f} {ratio:10.3f} {np.mean(nbytes):11.0f} {np.mean(bytes_model):11.0f} "
                  f"{bratio:10.3f}")


if __name__ == "__main__":
    main()
