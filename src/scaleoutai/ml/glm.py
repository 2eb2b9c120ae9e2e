"""Chapter 12, Section 4: a distributed GLM, L2-regularised logistic regression on K ranks of rows.

    f(w) = (1/n) sum_i log(1 + exp(-y_i x_i.w)) + (lambda/2) ||w||^2,   y_i in {-1, +1}, no intercept

(append a column of ones for one: it is then penalised like every weight, in the reference too). The
loss and its gradient are sums over rows, so K shards add up to the whole: ONE ring all-reduce of d + 1
numbers (loss sum, gradient sum) per evaluation, whatever n is. Unlike least squares, the minimiser is
not a function of a fixed set of sums, so the fit iterates. Three solvers:

    train_newton  Newton's method: each evaluation all-reduces the Hessian too (d^2 + d + 1 numbers), the
                  sufficient statistics of Section 2 recomputed at every iterate (IRLS)
    train_lbfgs   L-BFGS (Nocedal 1980; Liu and Nocedal 1989): d + 1 numbers per evaluation; the
                  two-loop recursion runs on every rank on the same all-reduced history, so every rank
                  computes the same direction bit for bit and no broadcast is needed
    train_admm    consensus ADMM (Boyd et al. 2011, Sections 7.1 and 8.2): local Newton x-updates, one
                  all-reduce of d + 1 numbers per iteration, z = average, dual updates

Every rank first all-reduces its row count (1 number). Arithmetic is float64 whatever the data's dtype.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..cluster import Comm
from ..collectives import ring_allreduce

__all__ = ["logistic_sums", "objective", "reference_glm", "train_lbfgs", "train_newton", "train_admm",
           "two_loop"]


def _check(X: Any, y: Any, lam: float) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2 or y.shape != (len(X),):
        raise ValueError(f"the GLM needs X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}")
    if not np.isin(y, (-1.0, 1.0)).all():
        raise ValueError("logistic regression here takes labels -1 or +1: map the classes with 2 * y - 1")
    if not lam > 0:
        raise ValueError(f"lam must be > 0 (it makes f strongly convex and the minimiser unique), got {lam!r}")
    return X.astype(np.float64, copy=False), y.astype(np.float64, copy=False)


def logistic_sums(X: np.ndarray, y: np.ndarray, w: np.ndarray, hessian: bool = False) -> np.ndarray:
    """One shard's [sum_i log(1 + e^{-m_i}), sum_i -y_i s(-m_i) x_i (, sum_i s(m_i) s(-m_i) x_i x_i^T)], m = y x.w.

    s is the logistic sigmoid; sums over rows, so the shards' vectors add up to the whole data's.
    """
    m = y * (X @ w)
    p = 0.5 * (1.0 + np.tanh(-m / 2))  # s(-m) without overflow
    parts = [[np.logaddexp(0.0, -m).sum()], X.T @ (-y * p)]
    if hessian:
        parts.append((X.T @ (X * (p * (1 - p))[:, None])).ravel())
    return np.concatenate(parts)


def objective(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> float:
    """f(w) on the whole data (single machine): the value every solver minimises."""
    X, y = _check(X, y, lam)
    return float(logistic_sums(X, y, w)[0] / len(y) + lam / 2 * w @ w)


def reference_glm(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """scikit-learn's ``LogisticRegression`` on the whole data with C = 1 / (n lambda), no intercept.

    scikit-learn minimises C sum_i log(1 + e^{-m_i}) + ||w||^2 / 2 = C n f(w): the same minimiser.
    """
    from sklearn.linear_model import LogisticRegression

    X, y = _check(X, y, lam)
    model = LogisticRegression(C=1.0 / (len(y) * lam), fit_intercept=False, solver="newton-cholesky",
                               tol=1e-12, max_iter=100)
    return model.fit(X, y).coef_.ravel().copy()


def _evaluator(comm: Comm, X: np.ndarray, y: np.ndarray, lam: float, hessian: bool = False
               ) -> tuple[Callable[[np.ndarray], tuple], list[int]]:
    """evaluate(w) -> (f, g[, H]) of the WHOLE data from one ring all-reduce; ``count[0]`` counts them."""
    n = ring_allreduce(comm, np.array([float(len(y))]))[0]
    if n == 0:
        raise ValueError("no rows on any rank: logistic regression needs at least one sample")
    d, count = X.shape[1], [0]

    def evaluate(w: np.ndarray) -> tuple:
        s = ring_allreduce(comm, logistic_sums(X, y, w, hessian)) / n
        count[0] += 1
        f, g = s[0] + lam / 2 * w @ w, s[1: d + 1] + lam * w
        return (f, g, s[d + 1:].reshape(d, d) + lam * np.eye(d)) if hessian else (f, g)

    return evaluate, count


def _armijo(evaluate: Callable[[np.ndarray], tuple], w: np.ndarray, f: float, g: np.ndarray, p: np.ndarray,
            c1: float = 1e-4, shrink: float = 0.5, trials: int = 40) -> tuple[np.ndarray, tuple]:
    """Backtracking from step 1 until f(w + t p) <= f + c1 t g.p; every trial is one all-reduce.

    A slack of a few ulps of f accepts steps whose decrease is below f's rounding (near the optimum)."""
    t, slope, slack = 1.0, float(g @ p), 8 * np.finfo(np.float64).eps * abs(f)
    for _ in range(trials):
        out = evaluate(w + t * p)
        if out[0] <= f + c1 * t * slope + slack:
            return w + t * p, out
        t *= shrink
    raise RuntimeError(f"the line search found no decrease in {trials} trials: p is not a descent direction")


def two_loop(g: np.ndarray, S: list[np.ndarray], Y: list[np.ndarray]) -> np.ndarray:
    """L-BFGS direction -H g from the last m pairs s = w' - w, y = g' - g (oldest first), H_0 = (s.y / y.y) I."""
    q, alphas = g.copy(), []
    for s, yv in zip(reversed(S), reversed(Y)):
        a = (s @ q) / (yv @ s)
        q -= a * yv
        alphas.append(a)
    if S:
        q *= (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1])
    for (s, yv), a in zip(zip(S, Y), reversed(alphas)):
        q += (a - (yv @ q) / (yv @ s)) * s
    return -q


def _result(w: np.ndarray, history: list[float], rounds: list[int], gnorm: float, tol: float) -> dict[str, Any]:
    return {"w": w, "loss": history[-1], "history": np.array(history), "rounds": np.array(rounds),
            "iterations": len(history) - 1, "converged": gnorm <= tol}


def train_lbfgs(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, lam: float, m: int = 10, iters: int = 100,
                tol: float = 1e-10) -> dict[str, Any]:
    """Per rank: L-BFGS with memory m and an Armijo line search; stops when ||grad f||_inf <= tol.

    Each line-search trial is one ring all-reduce of d + 1 numbers (loss and gradient, so the accepted
    trial needs no extra round); an iteration whose unit step is accepted costs exactly one. The
    history (s, y) is built from all-reduced values only, identical on every rank, so the two-loop
    recursion gives every rank the same direction without a broadcast. ``rounds[t]`` counts the
    all-reduces after iteration t (not the setup one of the row count).
    """
    X, y = _check(X_shard, y_shard, lam)
    evaluate, count = _evaluator(comm, X, y, lam)
    w = np.zeros(X.shape[1])
    f, g = evaluate(w)
    S: list[np.ndarray] = []
    Y: list[np.ndarray] = []
    history, rounds = [f], [count[0]]
    for _ in range(iters):
        if np.abs(g).max() <= tol:
            break
        w_new, (f, g_new) = _armijo(evaluate, w, f, g, two_loop(g, S, Y))
        S.append(w_new - w), Y.append(g_new - g)
        S, Y = S[-m:], Y[-m:]
        w, g = w_new, g_new
        history.append(f), rounds.append(count[0])
    return _result(w, history, rounds, float(np.abs(g).max()), tol)


def train_newton(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, lam: float, iters: int = 30,
                 tol: float = 1e-10) -> dict[str, Any]:
    """Per rank: Newton's method; each evaluation all-reduces loss, gradient and Hessian (d^2 + d + 1).

    The Section 2 idea applied per iterate: X^T D X is a sum over rows. Few rounds, d^2 numbers each.
    """
    X, y = _check(X_shard, y_shard, lam)
    evaluate, count = _evaluator(comm, X, y, lam, hessian=True)
    w = np.zeros(X.shape[1])
    f, g, H = evaluate(w)
    history, rounds = [f], [count[0]]
    for _ in range(iters):
        if np.abs(g).max() <= tol:
            break
        w, (f, g, H) = _armijo(evaluate, w, f, g, -np.linalg.solve(H, g))
        history.append(f), rounds.append(count[0])
    return _result(w, history, rounds, float(np.abs(g).max()), tol)


def _local_x(X: np.ndarray, y: np.ndarray, n: float, v: np.ndarray, rho: float, x: np.ndarray,
             tol: float = 1e-12, steps: int = 30) -> tuple[np.ndarray, float]:
    """argmin_x (1/n) sum_{i in shard} log(1 + e^{-m_i}) + (rho/2) ||x - v||^2 by damped Newton (no messages).

    Returns x and the norm of the local objective's gradient there (0 when solved exactly)."""
    d = len(v)

    def local(x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        s = logistic_sums(X, y, x, hessian=True) / n
        return (s[0] + rho / 2 * (x - v) @ (x - v), s[1: d + 1] + rho * (x - v),
                s[d + 1:].reshape(d, d) + rho * np.eye(d))

    f, g, H = local(x)
    for _ in range(steps):
        if np.linalg.norm(g) <= tol:
            break
        x, (f, g, H) = _armijo(local, x, f, g, -np.linalg.solve(H, g))
    return x, float(np.linalg.norm(g))


def train_admm(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, lam: float, rho: float = 1.0,
               iters: int = 50) -> dict[str, Any]:
    """Per rank: consensus ADMM in scaled form (Boyd et al. 2011, (7.6) with g(z) = (lambda/2)||z||^2).

        x_k <- argmin f_k(x) + (rho/2)||x - z + u_k||^2       local Newton, f_k = this shard's (1/n) loss sum
        z   <- K rho (xbar + ubar) / (lambda + K rho)           from ONE all-reduce of sum_k (x_k + u_k)
        u_k <- u_k + x_k - z
    The same all-reduce (d + 1 numbers) carries sum_k ||x_k - z||^2 of the previous iteration, so the
    primal residual r = sqrt(sum_k ||x_k - z||^2) of iteration t is known at t + 1 (a last all-reduce of
    two numbers closes the final one); the dual residual s = rho sqrt(K) ||z - z_prev|| needs no message.
    Error bound. The x-update leaves grad f_k(x_k) = e_k - rho u_k' - rho (z' - z) (e_k: the local solve's
    leftover gradient), and the z-update gives rho sum_k u_k' = lambda z'; summing,
        grad f(z') = sum_k [grad f_k(z') - grad f_k(x_k)] + sum_k e_k - K rho (z' - z).
    Each grad f_k is L_k-Lipschitz (L_k = ||X_k||_2^2 / (4n)) and f is lambda-strongly convex, so
        ||z' - w*|| <= (sqrt(sum_k L_k^2) r + sqrt(K) s + sum_k ||e_k||) / lambda = ``error_bound``.
    """
    X, y = _check(X_shard, y_shard, lam)
    if not rho > 0:
        raise ValueError(f"rho must be > 0 (the ADMM penalty), got {rho!r}")
    K, d = comm.size, X.shape[1]
    Lk = np.linalg.norm(X, 2) ** 2 / 4 if len(X) else 0.0
    n, L2 = ring_allreduce(comm, np.array([float(len(y)), Lk ** 2]))
    if n == 0:
        raise ValueError("no rows on any rank: logistic regression needs at least one sample")
    L = np.sqrt(L2) / n
    x, u, z = np.zeros(d), np.zeros(d), np.zeros(d)
    prev_r2, r_hist, s_hist, zs, err = 0.0, [], [], [], 0.0
    for t in range(iters):
        x, err = _local_x(X, y, n, z - u, rho, x)
        s = ring_allreduce(comm, np.concatenate([x + u, [prev_r2]]))
        if t > 0:
            r_hist.append(float(np.sqrt(s[d])))
        z_old, z = z, K * rho * (s[:d] / K) / (lam + K * rho)
        u = u + x - z
        prev_r2 = float((x - z) @ (x - z))
        s_hist.append(float(rho * np.sqrt(K) * np.linalg.norm(z - z_old)))
        zs.append(z)
    last = ring_allreduce(comm, np.array([prev_r2, err]))
    r_hist.append(float(np.sqrt(last[0])))
    bound = (L * r_hist[-1] + np.sqrt(K) * s_hist[-1] + last[1]) / lam
    return {"w": z, "z_history": np.array(zs), "primal_residual": np.array(r_hist),
            "dual_residual": np.array(s_hist), "error_bound": float(bound), "iterations": iters,
            "rounds": np.arange(1, iters + 1)}
