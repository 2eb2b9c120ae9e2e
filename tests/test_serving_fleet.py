"""The registry's aliases and the rollout's rule: a good candidate is promoted, a bad one rolled back."""
import math

import numpy as np
import pytest

from scaleoutai.datasets import classification
from scaleoutai.serving.fleet import (ModelRegistry, canary_exposure, canary_trials, classifier_model, rollout,
                                      wilson_interval)


def _setup(cand_noise=0.0, cand_fail=0.0, cand_latency=5.0):
    X, y = classification(20000, 5, classes=2, separation=100.0, seed=0)
    w = np.linalg.lstsq(X, 2.0 * y - 1, rcond=None)[0]
    reg = ModelRegistry()
    v1 = reg.register("churn", classifier_model(w, fail_rate=0.01), stage="baseline")
    reg.set_alias("churn", "champion", v1)
    v2 = reg.register("churn", classifier_model(w, latency_ms=cand_latency, fail_rate=0.01 + cand_fail,
                                                label_noise=cand_noise))
    return reg, v1, v2, X, y


def test_registry_numbers_versions_and_resolves_aliases():
    reg = ModelRegistry()
    assert reg.register("m", lambda x, r: (0, 1.0, False)) == 1
    assert reg.register("m", lambda x, r: (1, 1.0, False)) == 2
    reg.set_alias("m", "champion", 1)
    assert reg.get("m", "champion").version == 1 and reg.get("m", 2).version == 2
    reg.set_alias("m", "champion", 2)
    assert reg.aliases("m") == {"champion": 2}
    with pytest.raises(KeyError, match="has versions 1..2, not 3"):
        reg.set_alias("m", "champion", 3)
    with pytest.raises(KeyError, match="no alias 'canary'"):
        reg.get("m", "canary")
    with pytest.raises(KeyError, match="no model named 'x'"):
        reg.get("x", 1)


def test_an_equal_candidate_is_promoted_through_every_stage():
    reg, v1, v2, X, y = _setup()
    rep = rollout(reg, "churn", v2, X, y, window=300, seed=1)
    assert rep.decision == "promoted", rep.reason
    assert reg.aliases("churn") == {"champion": v2}
    assert [e for _, e in rep.events] == ["stage 5% passed", "stage 25% passed", "stage 50% passed",
                                          "stage 100% passed"]


def test_a_bad_candidate_is_rolled_back_at_the_first_stage_with_few_users_exposed():
    reg, v1, v2, X, y = _setup(cand_noise=0.2)
    rep = rollout(reg, "churn", v2, X, y, window=300, seed=1)
    assert rep.decision == "rolled_back" and "error rate" in rep.reason
    assert reg.aliases("churn") == {"champion": v1}
    assert rep.exposed == 300 and rep.stage_of[: rep.events[-1][0] + 1].max() == 0.05


def test_shadow_mode_catches_the_same_bad_candidate_with_no_user_exposed():
    reg, v1, v2, X, y = _setup(cand_noise=0.2)
    rep = rollout(reg, "churn", v2, X, y, window=300, shadow=True, seed=1)
    assert rep.decision == "rolled_back" and rep.exposed == 0 and rep.candidate_seen == 300
    bad = rollout(*_setup(cand_noise=0.2)[:1], "churn", 2, X, y, stages=(1.0,), window=300, baseline_error=0.01,
                  seed=1)
    assert bad.decision == "rolled_back" and bad.exposed == 300
    assert rep.user_errors < bad.user_errors


def test_a_slow_candidate_is_rolled_back_on_the_latency_budget():
    reg, v1, v2, X, y = _setup(cand_latency=50.0)
    rep = rollout(reg, "churn", v2, X, y, window=300, max_p99_ms=60.0, seed=1)
    assert rep.decision == "rolled_back" and "p99 latency" in rep.reason


def test_noise_alone_seldom_rolls_back_an_equal_candidate():
    rolled = 0
    for seed in range(20):
        reg, v1, v2, X, y = _setup()
        rolled += rollout(reg, "churn", v2, X[:4000], y[:4000], stages=(0.5,), window=500,
                          seed=seed).decision == "rolled_back"
    assert rolled <= 2


def test_a_bad_candidate_is_rolled_back_at_a_full_stage_against_the_earlier_champion_traffic():
    reg, v1, v2, X, y = _setup(cand_noise=0.2)
    rep = rollout(reg, "churn", v2, X, y, stages=(1.0, 1.0), window=300, baseline_error=0.01, seed=1)
    assert rep.decision == "rolled_back" and rep.exposed == 300


def test_bad_stages_are_one_clear_error():
    reg, v1, v2, X, y = _setup()
    with pytest.raises(ValueError, match="increasing traffic shares"):
        rollout(reg, "churn", v2, X, y, stages=(0.5, 0.1))
    with pytest.raises(ValueError, match="no champion traffic to compare with"):
        rollout(reg, "churn", v2, X, y, stages=(1.0,))


# --- time, exposure and measured rates (Section 7) ---

def test_exposed_requests_grow_with_the_share_as_the_model_says():
    """A bad version answers window + s * rate * reaction_s requests on average and serves for
    window / (s * rate) + reaction_s seconds: measured over seeded per-request rollouts."""
    X, y = classification(20000, 5, classes=2, separation=100.0, seed=0)
    rate, reaction, window, seeds = 50.0, 20.0, 200, 6
    means = []
    for share in (0.05, 0.25, 0.5):
        exposed, times = [], []
        for seed in range(seeds):
            reg, v1, v2, _, _ = _setup(cand_noise=0.3)
            rep = rollout(reg, "churn", v2, X, y, stages=(share,), window=window, rate=rate, reaction_s=reaction,
                          seed=seed)
            assert rep.decision == "rolled_back" and reg.aliases("churn") == {"champion": v1}
            exposed.append(rep.exposed)
            times.append(rep.time_s)
        e_model, t_model = canary_exposure(share, window, rate, reaction)
        late_sd = np.sqrt(share * rate * reaction / seeds)  # Poisson requests during the reaction
        assert abs(np.mean(exposed) - e_model) < 4 * late_sd + 1, (share, np.mean(exposed), e_model)
        t_sd = np.sqrt(window) / (share * rate) / np.sqrt(seeds)  # Gamma(window, 1 / (s rate)) decision time
        assert abs(np.mean(times) - t_model) < 4 * t_sd, (share, np.mean(times), t_model)
        means.append(np.mean(exposed))
    assert means[0] < means[1] < means[2]
    assert canary_exposure(0.5, window, rate, reaction)[0] - canary_exposure(0.05, window, rate, reaction)[0] == \
        pytest.approx(0.45 * rate * reaction)


def test_without_a_reaction_delay_every_share_exposes_exactly_the_window():
    X, y = classification(20000, 5, classes=2, separation=100.0, seed=0)
    for share in (0.05, 0.5):
        reg, v1, v2, _, _ = _setup(cand_noise=0.3)
        assert rollout(reg, "churn", v2, X, y, stages=(share,), window=150, rate=10.0, seed=1).exposed == 150


def test_canary_trials_decide_as_the_per_request_rollout_does():
    """The vectorized model's rollback rate lies in the 99% Wilson interval of per-request rollouts."""
    X, y = classification(20000, 5, classes=2, separation=100.0, seed=0)
    trials, n = 100, 0
    for seed in range(trials):
        reg, v1, v2, _, _ = _setup()
        n += rollout(reg, "churn", v2, X, y, stages=(0.5,), window=200, max_error_increase=0.0, z=1.0,
                     seed=seed).decision == "rolled_back"
    model = canary_trials(0.01, 0.01, 0.5, 200, 40000, max_error_increase=0.0, z=1.0, seed=0).rate
    lo, hi = wilson_interval(n, trials, z=2.58)
    assert lo <= model <= hi and 0.05 < model < 0.3, (n, model)


@pytest.mark.parametrize("share", [0.05, 0.25, 0.5])
def test_a_clearly_bad_version_is_detected_with_rate_near_one(share):
    ct = canary_trials(0.01, 0.21, share, 400, 20000, rate=100.0, reaction_s=30.0, seed=1)
    assert wilson_interval(ct.rolled_back.sum(), 20000)[0] > 0.999
    assert ct.exposed.mean() == pytest.approx(canary_exposure(share, 400, 100.0, 30.0)[0], rel=0.01)
    assert ct.time_s.mean() == pytest.approx(canary_exposure(share, 400, 100.0, 30.0)[1], rel=0.01)


@pytest.mark.parametrize("z", [1.64, 2.33])
@pytest.mark.parametrize("share", [0.1, 0.5])
def test_false_rollback_rate_of_an_equal_version_is_within_its_interval_at_alpha(z, share):
    """With 80 expected errors per window the z-test holds its level: alpha = P(Z > z) lies in the 99%
    Wilson interval of 20000 trials. With the default margin (2 points) equal versions are never rolled back."""
    ct = canary_trials(0.2, 0.2, share, 400, 20000, max_error_increase=0.0, z=z, seed=3)
    lo, hi = wilson_interval(ct.rolled_back.sum(), 20000, z=2.58)
    alpha = 0.5 * math.erfc(z / math.sqrt(2))
    assert lo <= alpha <= hi, (lo, alpha, hi)
    assert canary_trials(0.01, 0.01, share, 400, 20000, z=z, seed=3).rolled_back.sum() == 0


def test_wilson_interval_matches_known_values_and_covers_the_truth():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    rng = np.random.default_rng(0)  # coverage of the 95% interval at n = 200, p = 0.1: about 95%
    k = rng.binomial(200, 0.1, 4000)
    lo, hi = wilson_interval(k, np.full(4000, 200))
    assert 0.93 < np.mean((lo <= 0.1) & (0.1 <= hi)) < 0.97
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="share must lie in"):
        canary_trials(0.01, 0.01, 1.0, 100, 10)
