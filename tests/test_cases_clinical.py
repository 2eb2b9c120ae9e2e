"""Chapter 37: the synthetic clinical sites, the AUROC and calibration metrics against scikit-learn, and
federated training across sites over the communicator against its one-machine reference."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import roc_auc_score

from scaleoutai import cluster, nn
from scaleoutai.cases import clinical_fl as cf
from scaleoutai.datasets import clinical
from scaleoutai.infra import robust_agg
from scaleoutai.ml import federated as fd
from scaleoutai.ml import secure_agg as sa

SIZES = [240, 160, 110, 70]


def _setup(sizes=SIZES, dtype=np.float64, seed=1):
    sites = [(cf.standardise(X).astype(dtype), y) for X, y in clinical.clinical_sites(sizes, seed=seed)]
    like = nn.mlp_init([len(clinical.FEATURES), 2], seed=0, dtype=dtype)

    def local(w, X, y, t, k):
        return fd.client_update(w, like, X, y, 2, 0.1, 32, [3, t, k, 3])
    return sites, like, nn.flatten(like), local


# --- the data set -----------------------------------------------------------------------------------------

def test_sites_are_a_pure_function_of_the_seed_with_the_promised_shapes_and_dtypes():
    a, b, c = (clinical.clinical_sites(SIZES, seed=s) for s in (4, 4, 5))
    assert all(np.array_equal(x, y) for (xa, ya), (xb, yb) in zip(a, b) for x, y in ((xa, xb), (ya, yb)))
    assert not all(np.array_equal(xa, xc) for (xa, _), (xc, _) in zip(a, c))
    for (X, y), n in zip(a, SIZES):
        assert X.shape == (n, len(clinical.FEATURES)) and X.dtype == np.float64 and y.dtype == np.int64
        assert set(np.unique(y)) == {0, 1} and np.all(np.isfinite(X))
    X32, _ = clinical.clinical_sites([50], seed=0, dtype=np.float32)[0]
    assert X32.dtype == np.float32


def test_label_priors_differ_by_the_stated_amount_and_are_met_exactly():
    sites = clinical.clinical_sites([1000] * 5, seed=0)
    prev = [float(np.mean(y)) for _, y in sites]
    assert prev == pytest.approx([0.10, 0.175, 0.25, 0.325, 0.40], abs=1e-3)  # round(pi_k n_k) positives
    assert max(prev) - min(prev) >= 0.30 - 1e-3
    own = clinical.clinical_sites([400, 400], seed=0, prevalence=[0.05, 0.5])
    assert [int(y.sum()) for _, y in own] == [20, 200]


def test_covariate_shift_and_measurement_offsets_are_present_and_vanish_with_shift_zero():
    skewed = clinical.clinical_sites([3000] * 4, seed=2)
    ages = [X[:, 0].mean() for X, _ in skewed]
    assert max(ages) - min(ages) > 5.0  # years between the youngest and the oldest site
    prof = clinical.clinical_profiles(4, seed=2)
    assert len({round(float(p["offsets"][2]), 6) for p in prof}) == 4  # every glucose meter has its own bias
    flat = clinical.clinical_profiles(4, seed=2, shift=0.0)
    assert all(np.all(p["offsets"] == 0) and p["age_mean"] == 55.0 and p["bmi_shift"] == 0 for p in flat)
    same = clinical.clinical_sites([3000] * 2, seed=2, shift=0.0, prevalence=[0.25, 0.25])
    assert abs(same[0][0][:, 0].mean() - same[1][0][:, 0].mean()) < 1.5


def test_the_outcome_follows_the_logistic_truth():
    X, y = clinical.clinical_sites([4000], seed=0)[0]
    assert roc_auc_score(y, cf.standardise(X) @ clinical.COEF) > 0.72  # measured values still carry the risk
    assert clinical.true_logit(np.tile(clinical.REFERENCE[:, 0], (1, 1)))[0] == pytest.approx(clinical.INTERCEPT)


def test_split_is_stratified_disjoint_and_complete():
    sites = clinical.clinical_sites([200, 90], seed=0)
    train, test = clinical.clinical_split(sites, 0.25, seed=1)
    for (X, y), (Xa, ya), (Xb, yb) in zip(sites, train, test):
        assert len(ya) + len(yb) == len(y)
        assert np.array_equal(np.sort(np.concatenate([Xa, Xb]), axis=0), np.sort(X, axis=0))
        for c in (0, 1):
            assert (yb == c).sum() == int(np.floor(0.25 * (y == c).sum()))
    _, test = clinical.clinical_split(sites, [0.5, 0.2], seed=1)  # one fraction per site
    assert [len(y) for _, y in test] == [100, 17]


@pytest.mark.parametrize("call, match", [
    (lambda: clinical.clinical_sites([]), "one patient count"),
    (lambda: clinical.clinical_sites([10, 0]), "one patient count"),
    (lambda: clinical.clinical_sites([10, 10], prevalence=[0.2]), "2 outcome rates"),
    (lambda: clinical.clinical_sites([10], prevalence=[1.0]), "strictly between 0 and 1"),
    (lambda: clinical.clinical_sites([10], shift=-1), "shift must be >= 0"),
    (lambda: clinical.clinical_profiles(0), "sites must be an integer >= 1"),
    (lambda: clinical.clinical_split([(np.zeros((3, 8)), np.zeros(3))], 1.0), "test_fraction"),
    (lambda: clinical.clinical_split([(np.zeros((3, 8)), np.zeros(3))], [0.2, 0.2]), "one per site"),
    (lambda: cf.standardise(np.zeros((3, 5))), "FEATURES"),
])
def test_bad_input_is_refused_with_one_clear_line(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- metrics --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, ties", [(7, False), (200, False), (500, True)])
def test_auroc_equals_scikit_learn_and_the_pairwise_definition(n, ties):
    rng = np.random.default_rng(n)
    y = (rng.random(n) < 0.3).astype(np.int64)
    y[:2] = [0, 1]
    s = y + rng.standard_normal(n)
    if ties:
        s = np.round(s, 1)  # many tied scores: the midrank rule
    assert abs(cf.auroc(s, y) - roc_auc_score(y, s)) <= 1e-12
    assert abs(cf.naive_auroc(s, y) - roc_auc_score(y, s)) <= 1e-12
    with pytest.raises(ValueError, match="one class only"):
        cf.auroc(s, np.zeros(n))


def test_calibration_error_equals_the_gaps_of_scikit_learns_calibration_curve():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(997), [0.1, 0.5, 0.9]])  # values on inner bin edges too
    y = (rng.random(1000) < p ** 1.5).astype(int)
    true, pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, 11)[1:-1], p), minlength=10)
    want = float(np.sum(counts[counts > 0] * np.abs(true - pred)) / len(p))
    assert abs(cf.calibration_error(p, y, 10) - want) <= 1e-12
    assert cf.calibration_error(np.full(10, 0.3), np.r_[np.ones(3), np.zeros(7)]) == pytest.approx(0.0, abs=1e-15)


# --- the federated protocol ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_train_sites_equals_the_reference_for_every_K_with_uneven_sites(K, dtype):
    sites, like, w0, local = _setup(dtype=dtype)
    want, hist = cf.reference_sites(w0, sites, 3, local)
    got, got_hist, _ = cf.run_sites(w0, sites, 3, local, K=K)
    assert got.dtype == dtype and got_hist == hist
    np.testing.assert_array_equal(got, want)
    if dtype == np.float64:  # and the rule on updates is FedAvg's weighted average of models
        ref, _ = fd.reference_fedavg(w0, like, sites, 3, epochs=2, lr=0.1, batch_size=32, seed=3)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def test_a_crashed_site_is_excluded_from_then_on_and_a_lost_report_for_one_round():
    sites, _, w0, local = _setup()
    got, hist, _ = cf.run_sites(w0, sites, 4, local, faults=cluster.Faults(crash={2: 1}))
    want, ref_hist = cf.reference_sites(w0, sites, 4, local, crashed={1: 1})
    np.testing.assert_array_equal(got, want)
    assert hist == ref_hist and hist[-1]["dead"] == [1] and hist[-1]["reported"] == [0, 2, 3]
    # rank 3's second report is lost, and rank 0's third send (the model to rank 3 in round 0) too
    got, hist, _ = cf.run_sites(w0, sites, 3, local, faults=cluster.Faults(drop={3: {1}, 0: {2}}))
    want, ref_hist = cf.reference_sites(w0, sites, 3, local, lost={(2, 0), (2, 1)})
    np.testing.assert_array_equal(got, want)
    assert hist == ref_hist and [h["reported"] for h in hist] == [[0, 1, 3], [0, 1, 3], [0, 1, 2, 3]]


@pytest.mark.parametrize("rule", ["median", "trimmed_mean", "krum"])
def test_robust_rules_over_the_communicator_equal_the_reference_and_resist_a_broken_scanner(rule):
    sites, like, w0, local = _setup(sizes=[150, 130, 120, 110, 100, 90])
    combine = lambda D, n: robust_agg.aggregate(D, rule, 1)  # noqa: E731
    broken = {0: lambda w, w_k: w - 20.0 * (w_k - w)}  # sign-flipped and scaled update
    for K in (1, 3, 7):
        got, _, _ = cf.run_sites(w0, sites, 3, local, K=K, combine=combine, corrupt=broken)
        np.testing.assert_array_equal(got, cf.reference_sites(w0, sites, 3, local, combine=combine, corrupt=broken)[0])
    clean, _ = cf.reference_sites(w0, sites, 3, local)
    mean_hit, _ = cf.reference_sites(w0, sites, 3, local, corrupt=broken)
    assert np.linalg.norm(got - clean) < 0.2 * np.linalg.norm(mean_hit - clean)


def test_secure_aggregation_gives_the_weighted_mean_and_the_coordinator_sees_noise():
    sites, _, w0, local = _setup()
    want, _ = cf.reference_sites(w0, sites, 3, local)
    secure = lambda comm, x, t: sa.secure_aggregate(comm, x, session=t)  # noqa: E731
    got, hist, _ = cf.run_sites(w0, sites, 3, local, secure_sum=secure)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)  # 16 fractional bits of fixed point
    seen = np.concatenate([v for h in hist for v in h["masked"].values()]).astype(np.float64)
    assert abs(seen.mean() / 2 ** 32 - 0.5) < 0.1 and seen.std() / 2 ** 32 > 0.2  # uniform-looking words
    with pytest.raises(cluster.RankError, match="one site per rank"):
        cf.run_sites(w0, sites, 1, local, K=3, secure_sum=secure)


def test_evaluate_sites_reports_every_site_and_the_worst():
    sites, like, w0, local = _setup()
    w, _ = cf.reference_sites(w0, sites, 3, local)
    ev = cf.evaluate_sites(w, like, sites)
    assert [r["site"] for r in ev["sites"]] == [0, 1, 2, 3]
    assert ev["worst_auroc"] == min(r["auroc"] for r in ev["sites"]) and 0.5 < ev["pooled"]["auroc"] <= 1
    assert np.allclose(cf.risk_scores(w, like, sites[0][0]), ev["sites"][0]["scores"])
