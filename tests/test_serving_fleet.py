"""The registry's aliases and the rollout's rule: a good candidate is promoted, a bad one rolled back."""
import numpy as np
import pytest

from scaleoutai.datasets import classification
from scaleoutai.serving.fleet import ModelRegistry, classifier_model, rollout


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
