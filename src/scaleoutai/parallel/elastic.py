"""Chapter 18: elastic and fault-tolerant training: atomic checkpoints, resume, re-sharding, injected crashes.

Atomic write: the checkpoint goes to a temp file in the same directory, is flushed and fsync'ed, then
``os.replace`` renames it over the old one. A rename within one file system is atomic, so a crash at any
moment leaves either the old checkpoint or the new one, never a torn mix (``save_checkpoint_naive``,
which writes in place, shows the failure). Resume: training is a pure function of (state, step), so
restarting from the checkpoint of step s and replaying steps s, s+1, ... gives the uninterrupted result.
Re-sharding: shards are ``np.array_split`` blocks along axis 0, so K -> K' is concatenate-then-split.
"""
from __future__ import annotations

import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import cluster
from ..collectives import all_gather, gather, reduce_scatter
from ..nn import flatten, mlp_backward, mlp_forward, mlp_init, mse_loss, unflatten
from ..cluster import Comm

__all__ = ["save_checkpoint", "save_checkpoint_naive", "load_checkpoint", "checkpoint_path",
           "latest_checkpoint", "train_with_checkpoints", "reshard", "ElasticResult", "elastic_train"]

_NAME = re.compile(r"^ckpt-(\d{8})\.npz$")


def _flat(state: dict[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, v in state.items():
        if "/" in str(key):
            raise ValueError(f"checkpoint key {key!r} contains '/', which separates nesting levels")
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            out.update(_flat(v, name + "/"))
        elif isinstance(v, (list, tuple)):
            out.update(_flat({f"[{i}]": x for i, x in enumerate(v)}, name + "/"))
        else:
            out[name] = np.asarray(v)
    return out


def _nest(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for name, arr in flat.items():
        *path, leaf = name.split("/")
        node = root
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = arr[()] if arr.ndim == 0 else arr

    def lists(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        node = {k: lists(v) for k, v in node.items()}
        if node and all(re.fullmatch(r"\[\d+\]", k) for k in node):
            return [node[f"[{i}]"] for i in range(len(node))]
        return node
    return lists(root)


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` (nested dicts/lists of arrays and scalars) to ``path`` as .npz, atomically."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    flat = _flat(state)
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **flat)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a directory
        pass


def save_checkpoint_naive(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """The unsafe way: write over ``path`` in place. A crash mid-write leaves a torn, unreadable file."""
    with open(path, "wb") as f:
        np.savez(f, **_flat(state))


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint``; a torn or foreign file raises one clear ValueError."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as z:
            return _nest({k: z[k] for k in z.files})
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: train first or point to an existing .npz") from None
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
        raise ValueError(f"checkpoint {path} is unreadable ({type(exc).__name__}): it was torn by a crash "
                         f"mid-write or is not a checkpoint; resume from an older one") from None


def checkpoint_path(ckpt_dir: str | os.PathLike, step: int) -> str:
    return os.path.join(os.fspath(ckpt_dir), f"ckpt-{step:08d}.npz")


def latest_checkpoint(ckpt_dir: str | os.PathLike) -> tuple[int, dict[str, Any]] | None:
    """(step, state) of the newest readable checkpoint in ``ckpt_dir`` (temp files ignored), or None."""
    if not os.path.isdir(ckpt_dir):
        return None
    steps = sorted((int(m.group(1)) for m in map(_NAME.match, os.listdir(ckpt_dir)) if m), reverse=True)
    for step in steps:
        try:
            return step, load_checkpoint(checkpoint_path(ckpt_dir, step))
        except ValueError:
            continue  # a torn file (naive writer): fall back to the one before
    return None


def train_with_checkpoints(step_fn: Callable[[dict[str, Any], int], dict[str, Any]],
                           init_state: Callable[[], dict[str, Any]], n_steps: int, ckpt_dir: str | os.PathLike,
                           every: int, keep: int = 2) -> tuple[dict[str, Any], int]:
    """Run ``state = step_fn(state, s)`` for s < n_steps, saving every ``every`` steps; resume from the latest.

    Returns (final state, the step it resumed from: 0 for a fresh start). Keeps the newest ``keep`` files.
    """
    if every < 1 or keep < 1:
        raise ValueError(f"every and keep must be >= 1, got every={every}, keep={keep}")
    os.makedirs(ckpt_dir, exist_ok=True)
    found = latest_checkpoint(ckpt_dir)
    start, state = found if found else (0, init_state())
    for s in range(start, n_steps):
        state = step_fn(state, s)
        if (s + 1) % every == 0 or s + 1 == n_steps:
            save_checkpoint(checkpoint_path(ckpt_dir, s + 1), state)
            old = sorted(int(m.group(1)) for m in map(_NAME.match, os.listdir(ckpt_dir)) if m)
            for step in old[:-keep]:
                os.unlink(checkpoint_path(ckpt_dir, step))
    return state, start


def reshard(shards: list[np.ndarray], K_new: int) -> list[np.ndarray]:
    """Re-split K shards (blocks along axis 0, in rank order) into K_new: ``np.array_split(concat, K_new)``."""
    if isinstance(K_new, bool) or not isinstance(K_new, (int, np.integer)) or K_new < 1:
        raise ValueError(f"K_new must be an int >= 1, got {K_new!r}")
    if not shards:
        raise ValueError("reshard needs the list of K >= 1 shards, got an empty list")
    tails = {np.shape(s)[1:] for s in shards}
    if len(tails) > 1:
        raise ValueError(f"shards must agree beyond axis 0 to be concatenated, got trailing shapes {sorted(tails)}")
    return [b.copy() for b in np.array_split(np.concatenate([np.asarray(s) for s in shards]), int(K_new))]


# --- a data-parallel run with a ZeRO-1-style sharded momentum, crashed and resumed ------------------

def _worker(comm: Comm, X: np.ndarray, Y: np.ndarray, sizes: list[int], n_steps: int, batch: int,
            ckpt_dir: str, every: int, lr: float, mu: float, seed: int) -> np.ndarray:
    K, r = comm.size, comm.rank
    like = mlp_init(sizes, seed=seed, dtype=X.dtype)
    found = latest_checkpoint(ckpt_dir)
    if found:
        start, ck = found
        w, mom = ck["w"], reshard(ck["mom"], K)[r]  # the checkpoint may come from another K
    else:
        start, w = 0, flatten(like)
        mom = np.zeros_like(np.array_split(w, K)[r])
    for s in range(start, n_steps):
        idx = np.random.default_rng([seed, s]).choice(len(X), batch, replace=False)
        mine = np.array_split(idx, K)[r]
        params = unflatten(w, like)
        if len(mine):
            y, cache = mlp_forward(params, X[mine])
            _, dy = mse_loss(y, Y[mine])
            _, g = mlp_backward(params, cache, dy * (len(mine) / batch))  # local mean -> share of global mean
            grad = flatten(g)
        else:
            grad = np.zeros_like(w)
        g_shard = reduce_scatter(comm, grad)  # my block of the summed gradient
        mom = mu * mom + g_shard
        w = all_gather(comm, np.array_split(w, K)[r] - lr * mom)
        if (s + 1) % every == 0:
            full = gather(comm, mom, root=0)
            if r == 0:
                bounds = np.cumsum([len(b) for b in np.array_split(w, K)])[:-1]
                save_checkpoint(checkpoint_path(ckpt_dir, s + 1), {"w": w, "mom": np.split(full, bounds), "K": K})
            comm.barrier()
    return w


@dataclass
class ElasticResult:
    """Final parameters and the history: world size of each attempt and the step each attempt started at."""

    params: dict[str, np.ndarray]
    world_sizes: list[int] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        return len(self.world_sizes) - 1


def elastic_train(X: np.ndarray, Y: np.ndarray, sizes: list[int], n_steps: int, batch: int, ckpt_dir: str,
                  every: int, K: int, faults: cluster.Faults | None = None, K_after: int | None = None,
                  lr: float = 0.05, mu: float = 0.9, seed: int = 0, backend: str = "sim",
                  max_restarts: int = 3, timeout: float = 60.0) -> ElasticResult:
    """Momentum SGD on K data-parallel ranks (momentum sharded as in ZeRO-1), checkpointing every ``every`` steps.

    ``faults`` apply to the first attempt only; after a crash the job restarts from the newest checkpoint
    on ``K_after`` ranks (default K), re-sharding the momentum. Errors other than crashes are raised.
    """
    os.makedirs(ckpt_dir, exist_ok=True)
    result = ElasticResult(params={})
    k_now, f_now = K, faults
    for _ in range(max_restarts + 1):
        found = latest_checkpoint(ckpt_dir)
        result.world_sizes.append(k_now)
        result.resumed_from.append(found[0] if found else 0)
        try:
            res = cluster.run(_worker, k_now, backend=backend, faults=f_now, timeout=timeout, quiet=True,
                              args=(X, Y, sizes, n_steps, batch, ckpt_dir, every, lr, mu, seed))
            crashed = [v for v in res.values if isinstance(v, cluster.RankCrashed)]
            if not crashed:
                result.params = unflatten(res.values[0], mlp_init(sizes, seed=seed, dtype=X.dtype))
                return result
            result.errors.append(str(crashed[0]))
        except cluster.RankCrashed as exc:  # the process backend reports the crashed rank itself
            result.errors.append(str(exc))
        except cluster.RankError as exc:
            if not isinstance(exc.__cause__, cluster.PeerCrashedError):
                raise
            result.errors.append(exc.summary)
        k_now, f_now = K_after or k_now, None
    raise RuntimeError(f"training did not finish after {max_restarts} restarts: {result.errors}")
