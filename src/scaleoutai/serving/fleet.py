"""Fleet MLOps: a model registry with aliases, canary and shadow rollout with automatic rollback
(Chapter 26, Sections 3-4, 6 and 7).

The registry keeps numbered versions per model name and movable aliases ("champion", "canary"), as
MLflow's registry does: serving code asks for ``name@champion``, so a rollout or a rollback is one
alias move, never a redeploy.

A rollout routes a share of live traffic to the candidate in stages (by default 5%, 25%, 50%, 100%). After
each window of ``window`` candidate requests it compares the candidate's error rate with the
champion's over the same period and rolls back when the candidate is worse by more than
``max_error_increase`` with a one-sided two-proportion z-test at ``z`` (so noise alone seldom
triggers it), or when its p99 latency exceeds ``max_p99_ms``. Shadow mode sends every request to
both, answers with the champion, and applies the same rule with no user exposed. The numbers a
rollout is judged by: requests the candidate answered (exposure), errors users saw, and how many
candidate requests passed before a bad version was rolled back.

Time (Section 7). Requests arrive at ``rate`` per second (a Poisson stream), so a stage with share s
sends the candidate s * rate requests per second and its decision, which needs ``window`` candidate
requests, comes after window / (s * rate) seconds. A rollback takes effect ``reaction_s`` seconds after
the decision (metrics scrape, analysis interval, the alias reaching every replica), and the candidate
keeps its share meanwhile. So a bad version rolled back at its first stage answers

    E[exposed] = window + s * rate * reaction_s          requests, after
    E[T]       = window / (s * rate) + reaction_s        seconds            (``canary_exposure``),

the share trading users exposed against time to a decision. ``canary_trials`` draws the first stage's
decision for many independent rollouts at once from the same model (the champion's requests until the
window-th candidate request are negative-binomial, the errors binomial), and ``wilson_interval`` gives
the confidence interval of a measured rate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# A served model: features -> (prediction, latency in ms, failed?). Failures count as errors.
Model = Callable[[np.ndarray, np.random.Generator], tuple[Any, float, bool]]


@dataclass
class ModelVersion:
    name: str
    version: int
    model: Model
    tags: dict[str, Any] = field(default_factory=dict)


class ModelRegistry:
    """Versions numbered from 1 per name; aliases point at versions; every change is logged."""

    def __init__(self) -> None:
        self._versions: dict[str, list[ModelVersion]] = {}
        self._aliases: dict[str, dict[str, int]] = {}
        self.log: list[tuple[str, str, str, int]] = []

    def register(self, name: str, model: Model, **tags: Any) -> int:
        versions = self._versions.setdefault(name, [])
        versions.append(ModelVersion(name, len(versions) + 1, model, dict(tags)))
        self.log.append(("register", name, "", len(versions)))
        return len(versions)

    def set_alias(self, name: str, alias: str, version: int) -> None:
        self._version(name, version)
        self._aliases.setdefault(name, {})[alias] = version
        self.log.append(("alias", name, alias, version))

    def delete_alias(self, name: str, alias: str) -> None:
        if alias not in self._aliases.get(name, {}):
            raise KeyError(f"model {name!r} has no alias {alias!r}; it has {sorted(self.aliases(name))}")
        version = self._aliases[name].pop(alias)
        self.log.append(("delete_alias", name, alias, version))

    def aliases(self, name: str) -> dict[str, int]:
        return dict(self._aliases.get(name, {}))

    def get(self, name: str, ref: str | int) -> ModelVersion:
        """``ref`` is a version number or an alias: ``get("churn", "champion")``."""
        if isinstance(ref, str):
            if ref not in self._aliases.get(name, {}):
                raise KeyError(f"model {name!r} has no alias {ref!r}; it has {sorted(self.aliases(name))}")
            ref = self._aliases[name][ref]
        return self._version(name, ref)

    def _version(self, name: str, version: int) -> ModelVersion:
        versions = self._versions.get(name)
        if not versions:
            raise KeyError(f"no model named {name!r} is registered; register it first")
        if not 1 <= version <= len(versions):
            raise KeyError(f"model {name!r} has versions 1..{len(versions)}, not {version}")
        return versions[version - 1]


@dataclass
class RolloutReport:
    decision: str                      # "promoted" or "rolled_back"
    reason: str
    exposed: int                       # requests the candidate answered (0 in shadow mode)
    user_errors: int                   # errors returned to users, champion and candidate together
    candidate_seen: int                # requests the candidate processed before the decision
    events: list[tuple[int, str]]      # (request index, what happened)
    stage_of: np.ndarray               # traffic share of the candidate at each request
    time_s: float = 0.0                # when the decision took effect (a rollback: decision + reaction_s)


def _worse(err_c: Any, n_c: Any, err_b: Any, n_b: Any, max_increase: float, z: float,
           baseline: float | None = None) -> Any:
    """One-sided two-proportion z-test: is the candidate's error rate above the champion's by more
    than max_increase, beyond noise? With no champion requests yet, a one-sample test against the
    champion's known ``baseline`` rate. Works on scalars and, element-wise, on arrays of counts."""
    err_c, n_c, err_b, n_b = (np.asarray(a, dtype=float) for a in (err_c, n_c, err_b, n_b))
    nc = np.maximum(n_c, 1)
    pc = err_c / nc
    pb = np.where(n_b > 0, err_b / np.maximum(n_b, 1), np.nan if baseline is None else float(baseline))
    pooled = (err_c + err_b) / np.maximum(n_c + n_b, 1)
    se = np.where(n_b > 0, np.sqrt(np.maximum(pooled * (1 - pooled), 1e-12) * (1 / nc + 1 / np.maximum(n_b, 1))),
                  np.sqrt(np.maximum(pb * (1 - pb), 1e-12) / nc))  # rollout() refuses n_b = 0 without a baseline
    out = ((pc - pb) > max_increase) & ((pc - pb - max_increase) / se > z)
    return bool(out) if out.ndim == 0 else out


def rollout(registry: ModelRegistry, name: str, candidate: int, X: np.ndarray, y: np.ndarray,
            stages: tuple[float, ...] = (0.05, 0.25, 0.5, 1.0), window: int = 200,
            max_error_increase: float = 0.02, z: float = 2.33, max_p99_ms: float | None = None,
            shadow: bool = False, baseline_error: float | None = None, rate: float = 1.0, reaction_s: float = 0.0,
            seed: int = 0) -> RolloutReport:
    """Roll ``candidate`` out over the request stream (X, y) behind the ``champion`` alias.

    Requests arrive at ``rate`` per second (Poisson); a rollback takes effect ``reaction_s`` seconds
    after its decision, and until then the candidate keeps answering its share (counted in ``exposed``).

    The champion's counts accumulate over the whole rollout (at a 100% stage it serves nothing, and
    its earlier requests are the baseline); the candidate's restart at every stage. On success the
    champion alias moves to the candidate; on rollback the canary alias is removed and the champion
    stays. Deterministic given ``seed``.
    """
    if not stages or any(not 0 < s <= 1 for s in stages) or list(stages) != sorted(stages):
        raise ValueError(f"stages must be increasing traffic shares in (0, 1], got {stages}")
    if window < 1 or len(X) != len(y):
        raise ValueError("window must be >= 1 and X, y the same length")
    if rate <= 0 or reaction_s < 0:
        raise ValueError(f"rate must be > 0 requests/s and reaction_s >= 0, got rate={rate}, reaction_s={reaction_s}")
    if stages[0] == 1.0 and not shadow and baseline_error is None:
        raise ValueError("a first stage of 100% leaves no champion traffic to compare with: start with a "
                         "share below 1, use shadow=True, or pass the champion's baseline_error")
    champ = registry.get(name, "champion")
    cand = registry.get(name, candidate)
    registry.set_alias(name, "canary", candidate)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(np.random.default_rng([seed, 1]).exponential(1.0 / rate, len(y)))  # own stream
    stage, events = 0, []
    stage_of = np.zeros(len(y))
    counts = {"c_err": 0, "c_n": 0, "b_err": 0, "b_n": 0}
    lat: list[float] = []
    exposed = user_errors = seen = 0

    def serve(m: ModelVersion, i: int) -> tuple[bool, float]:
        pred, ms, failed = m.model(X[i], rng)
        return failed or pred != y[i], ms

    rollback_at, reason = np.inf, ""
    for i in range(len(y)):
        if arrival[i] >= rollback_at:  # the rollback has reached every replica
            return _end(registry, name, "rolled_back", reason, exposed, user_errors, seen, events, stage_of,
                        float(rollback_at))
        stage_of[i] = stages[stage]
        to_candidate = shadow or rng.random() < stages[stage]
        b_wrong, _ = serve(champ, i) if (shadow or not to_candidate) else (False, 0.0)
        if shadow or not to_candidate:
            counts["b_err"] += b_wrong
            counts["b_n"] += 1
            user_errors += b_wrong
        if to_candidate:
            c_wrong, ms = serve(cand, i)
            seen += 1
            counts["c_err"] += c_wrong
            counts["c_n"] += 1
            lat.append(ms)
            if not shadow:
                exposed += 1
                user_errors += c_wrong
        if counts["c_n"] >= window and rollback_at == np.inf:
            p99 = float(np.percentile(lat, 99))
            if _worse(counts["c_err"], counts["c_n"], counts["b_err"], counts["b_n"], max_error_increase, z,
                      baseline_error):
                base = counts["b_err"] / counts["b_n"] if counts["b_n"] else baseline_error
                reason = f"error rate {counts['c_err'] / counts['c_n']:.3f} vs champion {base:.3f}"
            elif max_p99_ms is not None and p99 > max_p99_ms:
                reason = f"p99 latency {p99:.1f} ms > {max_p99_ms} ms"
            if reason:
                events.append((i, "rollback: " + reason))
                rollback_at = arrival[i] + reaction_s
                if shadow or reaction_s == 0:
                    return _end(registry, name, "rolled_back", reason, exposed, user_errors, seen, events,
                                stage_of, float(rollback_at))
                continue
            events.append((i, f"stage {stages[stage]:.0%} passed"))
            if stage == len(stages) - 1:
                registry.set_alias(name, "champion", candidate)
                return _end(registry, name, "promoted", "every stage passed", exposed, user_errors, seen,
                            events, stage_of, float(arrival[i]))
            stage += 1
            counts["c_err"] = counts["c_n"] = 0
            lat = []
    if reason:
        return _end(registry, name, "rolled_back", reason + " (the stream ended before the rollback took effect)",
                    exposed, user_errors, seen, events, stage_of, float(rollback_at))
    return _end(registry, name, "rolled_back", "the stream ended before every stage passed", exposed,
                user_errors, seen, events, stage_of, float(arrival[-1]) if len(y) else 0.0)


def _end(registry: ModelRegistry, name: str, decision: str, reason: str, exposed: int, user_errors: int,
         seen: int, events: list[tuple[int, str]], stage_of: np.ndarray, time_s: float) -> RolloutReport:
    registry.delete_alias(name, "canary")
    return RolloutReport(decision, reason, int(exposed), int(user_errors), int(seen), events, stage_of, time_s)


def canary_exposure(share: float, window: int, rate: float, reaction_s: float) -> tuple[float, float]:
    """The model of a bad version rolled back at a stage of share s: (E[requests it answers], E[seconds
    it serves]) = (window + s * rate * reaction_s, window / (s * rate) + reaction_s)."""
    if not 0 < share <= 1 or window < 1 or rate <= 0 or reaction_s < 0:
        raise ValueError(f"need 0 < share <= 1, window >= 1, rate > 0, reaction_s >= 0; got {share}, {window}, "
                         f"{rate}, {reaction_s}")
    return window + share * rate * reaction_s, window / (share * rate) + reaction_s


@dataclass
class CanaryTrials:
    rolled_back: np.ndarray            # (trials,) bool: the stage's decision
    exposed: np.ndarray                # requests the candidate answered (window, plus the reaction's if rolled back)
    time_s: np.ndarray                 # seconds until the decision took effect

    @property
    def rate(self) -> float:
        return float(self.rolled_back.mean())


def canary_trials(p_champion: float, p_candidate: float, share: float, window: int, trials: int,
                  rate: float = 1.0, reaction_s: float = 0.0, max_error_increase: float = 0.02, z: float = 2.33,
                  seed: int = 0) -> CanaryTrials:
    """``trials`` independent first stages of ``rollout`` at once, from the rollout's own model: until the
    window-th candidate request the champion serves n_b ~ NegativeBinomial(window, share) requests; errors
    are Binomial(window, p_candidate) and Binomial(n_b, p_champion); ``_worse`` decides. Arrivals are
    Poisson, so the decision comes after Gamma(window, 1 / (share * rate)) seconds and a rollback's
    reaction adds Poisson(share * rate * reaction_s) exposed requests. Deterministic given ``seed``."""
    if not 0 < share < 1:
        raise ValueError(f"share must lie in (0, 1): a stage needs champion traffic to compare with, got {share}")
    canary_exposure(share, window, rate, reaction_s)  # validates the rest
    rng = np.random.default_rng(seed)
    n_b = rng.negative_binomial(window, share, trials)
    err_c = rng.binomial(window, p_candidate, trials)
    err_b = rng.binomial(n_b, p_champion)
    back = _worse(err_c, np.full(trials, window), err_b, n_b, max_error_increase, z)
    late = rng.poisson(share * rate * reaction_s, trials)
    decide = rng.gamma(window, 1.0 / (share * rate), trials)
    return CanaryTrials(back, window + np.where(back, late, 0), decide + np.where(back, reaction_s, 0.0))


def wilson_interval(k: Any, n: Any, z: float = 1.96) -> tuple[Any, Any]:
    """Wilson score interval of a proportion k/n: (c - h, c + h) with c = (p + z^2/2n) / (1 + z^2/n) and
    h = z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n); never outside [0, 1], sensible at k = 0 or k = n."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo, hi = np.minimum(np.maximum(centre - half, 0.0), p), np.maximum(np.minimum(centre + half, 1.0), p)  # p inside
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def classifier_model(w: np.ndarray, latency_ms: float = 5.0, fail_rate: float = 0.0,
                     label_noise: float = 0.0) -> Model:
    """A served linear classifier sign(x . w) > 0 with exponential latency around ``latency_ms``,
    a share ``fail_rate`` of requests failing (timeouts, crashes) and ``label_noise`` of answers flipped."""
    def model(x: np.ndarray, rng: np.random.Generator) -> tuple[int, float, bool]:
        pred = int(x @ w > 0)
        if rng.random() < label_noise:
            pred = 1 - pred
        return pred, float(rng.exponential(latency_ms)), bool(rng.random() < fail_rate)
    return model
