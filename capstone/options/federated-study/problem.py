"""Federated-study option: FedAvg over C clients with Dirichlet non-IID splits (Chapter 14).

Data: ``datasets.classification`` (10 Gaussian classes in d dimensions, one seed) and a held-out test set
from the same draw. The n training samples are split over C clients by ``federated.dirichlet_split``:
for each class, the clients' shares come from Dirichlet(alpha), so a small alpha gives each client few
classes (strong label skew) and a large alpha the global mix (IID). The model is a ``scaleoutai.nn``
MLP carried as one flat vector of P numbers.

The study: rounds to a target test accuracy against alpha (and against the knobs FedAvg exposes:
local epochs E, client fraction, FedProx mu, client dropout).

Distribution axis: intelligence / training at the edge (the data never leaves its client). K ranks:
rank 0 is the server, clients live on ranks 1..K-1 in contiguous blocks (``collectives.worker_range``);
K = 1 runs every client on the server. Per round the server sends w_t (P float64) to each rank hosting
a selected client and gets back (k, n_k) rows and the client models; the aggregate sums the reports in
client order, so the K-rank run equals the single-process simulation bit for bit.
"""
from __future__ import annotations

import os

CLASSES = 10


def set_threads(threads: int) -> None:
    """One BLAS thread per process (before NumPy loads), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def make_clients(args):
    """(shards, test set, model template, w0): the same on every rank and at any K.

    Every rank regenerates the data from the seed (cheap at these sizes) and reads only its clients'
    shards: the label-skewed split needs every label, which a real deployment never sees in one place."""
    import numpy as np

    from scaleoutai import datasets, nn
    from scaleoutai.ml import federated as fd

    X_all, y_all = datasets.classification(args.n + args.n_test, args.d, classes=CLASSES,
                                           separation=args.separation, seed=args.seed)
    X, y = X_all[:args.n], y_all[:args.n]
    parts = fd.dirichlet_split(y, args.clients, args.alpha, seed=args.seed + 1)
    shards = [(X[p], y[p]) for p in parts]
    like = nn.mlp_init([args.d, args.hidden, CLASSES], seed=args.seed + 2)
    w0 = nn.flatten(like)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(args.n))  # every sample exactly once
    return shards, (X_all[args.n:], y_all[args.n:]), like, w0


def options(args) -> dict:
    """The FedAvg keyword arguments shared by the K-rank run and the single-process simulation."""
    return dict(rounds=args.rounds, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                fraction=args.fraction, mu=args.mu, p_drop=args.p_drop, seed=args.seed, keep_models=True)


def accuracy_curve(history, like, test) -> list[float]:
    """Test accuracy of the global model after each round."""
    from scaleoutai.ml import federated as fd

    return [fd.accuracy(h["w"], like, *test) for h in history]


def rounds_to_target(curve: list[float], target: float) -> int:
    """The first round (1-based) whose model reaches ``target`` accuracy; -1 when none does."""
    return next((t + 1 for t, a in enumerate(curve) if a >= target), -1)


def log_study(run, curve: list[float], target: float, history) -> int:
    """Accuracy per round (metric steps), rounds to target, final accuracy, clients that reported."""
    for t, a in enumerate(curve):
        run.log_metric("test_accuracy", a, step=t + 1)
    hit = rounds_to_target(curve, target)
    run.log_metrics({"rounds_to_target": hit, "final_accuracy": curve[-1] if curve else float("nan"),
                     "reports": sum(len(h["reported"]) for h in history)})
    return hit


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --n 4000 --clients 8 --rounds 8)."""
    parser.add_argument("--n", type=int, default=40_000, help="training samples over all clients")
    parser.add_argument("--n-test", type=int, default=2000, help="held-out test samples")
    parser.add_argument("--d", type=int, default=20, help="features")
    parser.add_argument("--separation", type=float, default=3.0, help="distance of the class means")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units of the MLP")
    parser.add_argument("--clients", type=int, default=32, help="clients C")
    parser.add_argument("--alpha", type=float, default=0.3, help="Dirichlet alpha: small = strong label skew")
    parser.add_argument("--rounds", type=int, default=30, help="communication rounds")
    parser.add_argument("--epochs", type=int, default=1, help="local epochs E per round")
    parser.add_argument("--lr", type=float, default=0.1, help="client SGD step size")
    parser.add_argument("--batch-size", type=int, default=32, help="client mini-batch")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of clients selected per round")
    parser.add_argument("--mu", type=float, default=0.0, help="FedProx proximal weight (0: FedAvg)")
    parser.add_argument("--p-drop", type=float, default=0.0, help="probability a selected client fails to report")
    parser.add_argument("--target", type=float, default=0.8, help="target test accuracy for rounds_to_target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
