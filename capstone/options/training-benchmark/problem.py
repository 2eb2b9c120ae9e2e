"""Training-benchmark option: DDP vs FSDP vs ZeRO-1/2/3 on one MLP, one data stream (Chapters 15, 16).

The model is built from a config (``model_sizes``: input, ``--layers`` hidden layers of ``--hidden``
units, output) with random weights from ``scaleoutai.nn.mlp_init`` (He init, one seed), in float64 so
the distributed runs can be checked against one machine to rounding. The task: regression of a fixed
random teacher, y = tanh(x T) + noise, mean squared error, full-batch Adam on global batches of B rows
(``--n-batches`` seeded batches, cycled).

Distribution axis: training (data parallel, with the model state sharded by the ZeRO stage). Every
strategy splits each global batch of B rows into K blocks (``np.array_split``: uneven blocks allowed)
and sums the gradients so that the update equals the full-batch update exactly:

    ddp    torch DDP (gloo): full replica per rank, one bucketed all-reduce of the gradients per step
    fsdp   torch FSDP2 ``fully_shard`` on each Linear and the root: parameters, gradients and Adam state
           sharded (dim 0); all-gather parameters for forward and backward, reduce-scatter gradients
    zero1  ``scaleoutai.parallel.zero`` on the course communicator: all-reduce gradients, Adam on my block
    zero2  reduce-scatter gradients, Adam on my block, all-gather parameters
    zero3  parameters sharded too: all-gather before forward/backward, reduce-scatter, keep my block

The torch strategies use torch Adam, the ZeRO ones the course's NumPy Adam; each is checked against
the single-machine run of the same engine (``--strategy`` picks it in ``baseline.py`` too).
"""
from __future__ import annotations

import os

STRATEGIES = ("ddp", "fsdp", "zero1", "zero2", "zero3")
TORCH_STRATEGIES = ("ddp", "fsdp")


def set_threads(threads: int) -> None:
    """One BLAS/OpenMP thread per process (before NumPy and torch load), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def model_sizes(args) -> list[int]:
    """The model config: layer widths [d_in, hidden x layers, d_out]."""
    return [args.d_in] + [args.hidden] * args.layers + [args.d_out]


def init_params(args):
    """Random float64 weights from the config (``nn.mlp_init``): W_i (in, out), b_i (out,)."""
    from scaleoutai import nn

    return nn.mlp_init(model_sizes(args), seed=args.seed)


def make_batches(args):
    """``--n-batches`` global batches (X (B, d_in), Y (B, d_out)), each from its own seed: the same at any K."""
    import numpy as np

    T = np.random.default_rng([args.seed, 0]).standard_normal((args.d_in, args.d_out)) / np.sqrt(args.d_in)
    out = []
    for s in range(args.n_batches):
        rng = np.random.default_rng([args.seed, 1, s])
        X = rng.standard_normal((args.batch, args.d_in))
        out.append((X, np.tanh(X @ T) + 0.1 * rng.standard_normal((args.batch, args.d_out))))
    return out


def my_rows(X, rank: int, size: int):
    """Rank's block of the rows of a global batch (``np.array_split``, as ``parallel.ddp`` splits)."""
    import numpy as np

    return np.array_split(X, size)[rank]


# --- torch engine (ddp, fsdp and their baseline) -------------------------------------------------

def torch_model(params):
    """nn.Sequential(Linear, ReLU, ..., Linear) in float64 holding exactly ``params`` (W stored transposed)."""
    import torch

    n = sum(k.startswith("W") for k in params)
    mods = []
    for i in range(n):
        W, b = params[f"W{i}"], params[f"b{i}"]
        lin = torch.nn.Linear(*W.shape).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W.T.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        mods += [lin] + ([torch.nn.ReLU()] if i < n - 1 else [])
    return torch.nn.Sequential(*mods)


def warm_up(strategy: str) -> None:
    """Pay the one-time costs before the timed region: the first torch optimizer step imports
    torch._dynamo (seconds), DDP / FSDP and the course's ZeRO load their modules on first use.
    Both scripts call it, so neither times imports."""
    import torch

    import scaleoutai.parallel.ddp  # noqa: F401  (the NumPy engine of zero1-3 and its baseline)
    import scaleoutai.parallel.zero  # noqa: F401

    if strategy not in TORCH_STRATEGIES:
        return
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    p.grad = torch.ones_like(p)
    torch.optim.Adam([p]).step()
    if strategy == "ddp":
        import torch.nn.parallel  # noqa: F401
    elif strategy == "fsdp":
        import torch.distributed.device_mesh  # noqa: F401
        import torch.distributed.fsdp  # noqa: F401


def torch_params(model) -> dict:
    """The trained weights back in ``nn`` layout (FSDP's sharded DTensors gathered with full_tensor)."""
    import torch

    def full(t):
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        return t.detach().numpy().copy()

    lins = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return {**{f"W{i}": full(m.weight).T for i, m in enumerate(lins)},
            **{f"b{i}": full(m.bias) for i, m in enumerate(lins)}}


def torch_train(model, batches, args, rank: int = 0, size: int = 1, on_step=None) -> list[float]:
    """Adam for ``args.steps`` steps. Each rank's loss is its rows' squared error / (B d_out), times K:
    DDP and FSDP average gradients over the K ranks, so the update is the full-batch MSE update even for
    uneven blocks. Returns this rank's loss share per step (sum over ranks = the global-batch MSE)."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    shares = []
    for s in range(args.steps):
        X, Y = batches[s % len(batches)]
        x, y = torch.from_numpy(my_rows(X, rank, size)), torch.from_numpy(my_rows(Y, rank, size))
        opt.zero_grad()
        sse = ((model(x) - y) ** 2).sum() / (Y.size)  # this rank's share of the global MSE
        (sse * size).backward()
        opt.step()
        shares.append(float(sse.detach()))
        if on_step is not None:
            on_step(s)
    return shares


def torch_state_bytes(model, opt_state_factor: int = 2) -> int:
    """Bytes this rank holds between steps: parameters + gradients + Adam m and v (local shards only)."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size() * (2 + opt_state_factor)
    return total


# --- NumPy engine (zero1-3 and their baseline) ---------------------------------------------------

def zero_stage(strategy: str) -> int:
    return int(strategy[-1])


def numpy_reference(batches, params0, args):
    """Single-machine full-batch Adam with the course's ``nn`` MLP: ``parallel.ddp.reference_train``."""
    from scaleoutai.parallel import ddp

    return ddp.reference_train(batches, params0, args.steps, args.lr, optimizer="adam")


# --- shared -----------------------------------------------------------------------------------------

def compare(params, ref, rtol: float, atol: float) -> tuple[bool, float]:
    """All arrays close (``np.allclose``); returns (ok, max abs difference)."""
    import numpy as np

    err = max(float(np.max(np.abs(params[k] - ref[k]))) for k in ref)
    ok = params.keys() == ref.keys() and all(np.allclose(params[k], ref[k], rtol=rtol, atol=atol) for k in ref)
    return ok, err


def peak_rss_mb() -> float:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def add_arguments(parser) -> None:
    """The knobs both scripts share (smoke runs: --steps 10 --hidden 128 --batch 256)."""
    parser.add_argument("--strategy", choices=STRATEGIES, default="ddp", help="how the training is distributed")
    parser.add_argument("--d-in", type=int, default=128, help="input features")
    parser.add_argument("--hidden", type=int, default=512, help="hidden width")
    parser.add_argument("--layers", type=int, default=4, help="hidden layers")
    parser.add_argument("--d-out", type=int, default=32, help="outputs")
    parser.add_argument("--batch", type=int, default=2048, help="global batch B (rows)")
    parser.add_argument("--n-batches", type=int, default=4, help="distinct seeded global batches, cycled")
    parser.add_argument("--steps", type=int, default=50, help="Adam steps")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam step size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    out = {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
    out["model"] = "mlp " + "-".join(map(str, model_sizes(args)))
    return out
