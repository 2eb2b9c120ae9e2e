"""Chapter 10: large-batch training. Linear scaling and warm-up, LARS and LAMB trust ratios (Section 4).

Data-parallel SGD on K workers is one machine with a K times larger batch B = K b (Section 4), so
training faster with more workers means training with larger batches. Three tools keep the small-batch
loss curve:

    linear scaling (Goyal et al. 2017)   eta_B = eta_b * B / b
    warm-up        (Goyal et al. 2017)   eta_t = eta_0 + (eta_B - eta_0) t / t_w  for t < t_w, then eta_B
    LARS  (You, Gitman, Ginsburg 2017)   per layer l: lam_l = c ||w_l|| / (||g_l|| + wd ||w_l||),
                                         v_l <- m v_l + eta lam_l (g_l + wd w_l),  w_l <- w_l - v_l
    LAMB  (You et al. 2020)              Adam's r = m_hat / (sqrt(v_hat) + eps), u_l = r_l + wd w_l,
                                         w_l <- w_l - eta ||w_l|| / ||u_l|| u_l

A trust ratio whose numerator or denominator is 0 is taken as 1 (as the reference implementations do).
Parameters are the chapter's flat vectors w; ``shapes`` (``Model.shapes()``) cuts w into layers.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["linear_scaled_lr", "warmup_lr", "layer_slices", "trust_ratio", "lars_step", "lamb_step",
           "sgd_step", "train_large_batch"]


def linear_scaled_lr(base_lr: float, base_batch: int, batch: int) -> float:
    """The linear scaling rule: eta_B = eta_b * B / b (Goyal et al. 2017, Section 2.1)."""
    if base_batch < 1 or batch < 1:
        raise ValueError(f"batch sizes must be >= 1, got b = {base_batch}, B = {batch}")
    return float(base_lr) * batch / base_batch


def warmup_lr(step: int, peak_lr: float, warmup_steps: int, start_lr: float = 0.0) -> float:
    """Gradual warm-up (Goyal et al. 2017, Section 2.2): eta_t rises linearly from ``start_lr`` at t = 0
    to ``peak_lr`` at t = ``warmup_steps`` and stays there. warmup_steps = 0 is no warm-up."""
    if warmup_steps < 0 or step < 0:
        raise ValueError(f"step and warmup_steps must be >= 0, got {step}, {warmup_steps}")
    if step >= warmup_steps:
        return float(peak_lr)
    return float(start_lr + (peak_lr - start_lr) * step / warmup_steps)


def layer_slices(shapes: Sequence[tuple[int, ...]], n: int | None = None) -> list[slice]:
    """The slice of the flat vector w holding each layer of ``shapes`` (in flat order)."""
    out, off = [], 0
    for sh in shapes:
        size = int(np.prod(sh))
        out.append(slice(off, off + size))
        off += size
    if n is not None and off != n:
        raise ValueError(f"shapes hold {off} values but w has {n}: pass Model.shapes()")
    return out


def trust_ratio(w_norm: float, u_norm: float) -> float:
    """||w|| / ||u||, or 1 when either norm is 0 (a layer at zero, or a zero update)."""
    return float(w_norm / u_norm) if w_norm > 0 and u_norm > 0 else 1.0


def lars_step(w: np.ndarray, g: np.ndarray, shapes: Sequence[tuple[int, ...]], state: dict, lr: float,
              trust: float = 0.001, momentum: float = 0.9, weight_decay: float = 0.0) -> np.ndarray:
    """One LARS step (You, Gitman, Ginsburg 2017, Algorithm 1) on every layer l of w:
    lam_l = trust ||w_l|| / (||g_l|| + weight_decay ||w_l||), v_l <- momentum v_l + lr lam_l (g_l + weight_decay w_l),
    w_l <- w_l - v_l. ``state`` (start with {}) keeps the momentum v. Returns the new w."""
    sl = layer_slices(shapes, w.size)
    v = state.setdefault("v", np.zeros_like(w))
    new = w.copy()
    for s in sl:
        wn, gn = float(np.linalg.norm(w[s])), float(np.linalg.norm(g[s]))
        lam = trust * trust_ratio(wn, gn + weight_decay * wn)
        v[s] = momentum * v[s] + lr * lam * (g[s] + weight_decay * w[s])
        new[s] = w[s] - v[s]
    return new


def lamb_step(w: np.ndarray, g: np.ndarray, shapes: Sequence[tuple[int, ...]], state: dict, lr: float,
              betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0
              ) -> np.ndarray:
    """One LAMB step (You et al. 2020, Algorithm 2, phi = identity): Adam's moments with bias correction,
    r = m_hat / (sqrt(v_hat) + eps), then per layer u_l = r_l + weight_decay w_l and
    w_l <- w_l - lr (||w_l|| / ||u_l||) u_l. ``state`` (start with {}) keeps m, v and the step t."""
    sl = layer_slices(shapes, w.size)
    b1, b2 = betas
    t = state["t"] = state.get("t", 0) + 1
    m = state["m"] = b1 * state.get("m", np.zeros_like(w)) + (1 - b1) * g
    v = state["v"] = b2 * state.get("v", np.zeros_like(w)) + (1 - b2) * g * g
    r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    new = w.copy()
    for s in sl:
        u = r[s] + weight_decay * w[s]
        new[s] = w[s] - lr * trust_ratio(float(np.linalg.norm(w[s])), float(np.linalg.norm(u))) * u
    return new


def sgd_step(w: np.ndarray, g: np.ndarray, shapes: Sequence[tuple[int, ...]], state: dict, lr: float
             ) -> np.ndarray:
    """Plain SGD, w <- w - lr g, with the signature of the two above (shapes and state unused)."""
    return w - lr * g


_STEPS = {"sgd": sgd_step, "lars": lars_step, "lamb": lamb_step}


def train_large_batch(X: np.ndarray, y: np.ndarray, model: Any, w0: np.ndarray, steps: int, batch: int,
                      method: str, lr: float, warmup_steps: int = 0, seed: int = 0, every: int = 1,
                      start_lr: float = 0.0, **hyper: Any) -> tuple[np.ndarray, list[float]]:
    """``steps`` steps on one machine with global batch B = ``batch`` (``optimization.batch_rows``, the rows
    synchronous SGD on K ranks would use), with ``method`` in {"sgd", "lars", "lamb"} at learning rate
    ``warmup_lr(t, lr, warmup_steps, start_lr)`` (Goyal et al. start from the small-batch rate). Returns
    the final w and the full-data loss before steps 0, every, 2 every, ... and after the last step, so
    runs at different B compare per epoch."""
    from .optimization import batch_rows

    if method not in _STEPS:
        raise ValueError(f"method must be one of {sorted(_STEPS)}, got {method!r}")
    step_fn, shapes = _STEPS[method], model.shapes()
    w, state, losses = w0.copy(), {}, []
    for t in range(steps):
        if t % every == 0:
            losses.append(model.loss(w, X, y))
        rows = batch_rows(len(y), batch, t, seed)
        _, g = model.loss_grad(w, X[rows], y[rows])
        w = step_fn(w, g / len(rows), shapes, state, warmup_lr(t, lr, warmup_steps, start_lr), **hyper)
    losses.append(model.loss(w, X, y))
    return w, losses
