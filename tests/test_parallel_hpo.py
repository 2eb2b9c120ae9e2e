"""Chapter 21 HPO: ASHA/SH/PBT decisions on hand-built results, and the distributed driver equals its serial twin."""
import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import hpo

SPACE = {"lr": (1e-4, 1.0, "log"), "momentum": (0.0, 0.99), "width": (8, 64)}


def test_random_search_samples_within_bounds_and_repeats_with_its_seed():
    a, b, c = (hpo.RandomSearch(SPACE, 200, 9.0, seed=s) for s in (3, 3, 4))
    jobs = [a.next_job() for _ in range(200)]
    assert a.next_job() is None and all(j.r_from == 0 and j.r_to == 9.0 for j in jobs)
    for k, (lo, hi, *_) in SPACE.items():
        vals = np.array([j.config[k] for j in jobs])
        assert vals.min() >= lo and vals.max() <= hi
    logs = np.log10([j.config["lr"] for j in jobs])  # log-uniform: every decade is hit about equally
    assert np.histogram(logs, bins=4, range=(-4, 0))[0].min() > 30
    assert [b.next_job().config for _ in range(200)] == [j.config for j in jobs]
    assert c.next_job().config != jobs[0].config


def test_bad_spaces_and_rungs_get_one_readable_error():
    with pytest.raises(ValueError, match="low > 0 for 'log'"):
        hpo.RandomSearch({"lr": (0.0, 1.0, "log")}, 3, 1.0)
    with pytest.raises(ValueError, match="empty"):
        hpo.RandomSearch({}, 3, 1.0)
    with pytest.raises(ValueError, match="integer eta >= 2"):
        hpo.rung_resources(1, 9, 1)
    assert hpo.rung_resources(1, 9, 3) == [1, 3, 9] and hpo.rung_resources(2, 20, 2) == [2, 4, 8, 16]


def test_asha_promotes_exactly_the_right_trials_on_a_hand_built_sequence():
    s = hpo.ASHA(SPACE, eta=3, min_r=1, max_r=9, max_trials=6, seed=0)
    jobs = [s.next_job() for _ in range(3)]
    assert [(j.trial, j.rung, j.r_from, j.r_to) for j in jobs] == [(0, 0, 0, 1), (1, 0, 0, 1), (2, 0, 0, 1)]
    assert s.on_result(0, 0, 0.5) == "continue"      # n_0 = 1: top floor(1/3) = nobody
    assert s.on_result(1, 0, 0.9) == "continue"
    assert s.on_result(2, 0, 0.1) == "continue"      # n_0 = 3: trial 1 (0.9) is now promotable
    j = s.next_job()
    assert (j.trial, j.rung, j.r_from, j.r_to) == (1, 1, 1, 3)
    assert s.next_job().trial == 3                   # nothing promotable: a new trial at rung 0
    assert s.on_result(3, 0, 0.95) == "promote"      # n_0 = 4, top 1 = trial 3
    assert s.on_result(1, 1, 0.92) == "continue"
    assert (s.next_job().trial, s.next_job().trial, s.next_job().trial) == (3, 4, 5)
    assert s.next_job() is None                      # all 6 trials started, nothing promotable
    assert s.on_result(4, 0, 0.99) == "promote"      # n_0 = 5, top 1 = trial 4
    j = s.next_job()
    assert (j.trial, j.rung) == (4, 1)
    assert s.on_result(5, 0, 0.7) == "continue"      # n_0 = 6: top 2 = {4, 3}, both promoted already
    assert s.on_result(3, 1, 0.96) == "continue"
    assert s.on_result(4, 1, 0.97) == "promote"      # n_1 = 3: top 1 = trial 4
    j = s.next_job()
    assert (j.trial, j.rung, j.r_from, j.r_to) == (4, 2, 3, 9)
    assert s.on_result(4, 2, 0.98) == "stop" and s.next_job() is None
    # trial 1 was promoted on partial information and is no longer in the final top 2: ASHA's price
    assert s.promoted == [{1, 3, 4}, {4}, set()]
    assert s.best() == (4, s.configs[4], 0.98)


def test_successive_halving_keeps_the_top_floor_n_over_eta_each_rung_behind_a_barrier():
    s = hpo.SuccessiveHalving(SPACE, n_trials=10, eta=3, min_r=1, max_r=9, seed=1)
    scores = np.random.default_rng(0).permutation(10) / 10.0
    jobs = [s.next_job() for _ in range(10)]
    assert s.next_job() is None and {j.rung for j in jobs} == {0}
    for j in jobs[:-1]:
        assert s.on_result(j.trial, 0, scores[j.trial]) == "continue"
        assert s.next_job() is None                   # the barrier: rung 1 waits for the last result
    s.on_result(jobs[-1].trial, 0, scores[jobs[-1].trial])
    top3 = list(np.argsort(-scores)[:3])
    assert s.survivors[1] == top3
    rung1 = [s.next_job() for _ in range(3)]
    assert [j.trial for j in rung1] == top3 and all((j.r_from, j.r_to) == (1, 3) for j in rung1)
    for j, sc in zip(rung1, [0.2, 0.8, 0.5]):
        s.on_result(j.trial, 1, sc)
    assert s.survivors[2] == [top3[1]]                # max(1, floor(3/3)) = 1 survivor
    j = s.next_job()
    assert (j.trial, j.rung, j.r_to) == (top3[1], 2, 9) and s.on_result(j.trial, 2, 0.9) == "stop"
    assert s.next_job() is None and s.best()[0] == top3[1]


def test_pbt_exploit_copies_a_top_member_and_explore_multiplies_by_a_factor():
    configs = [{"h0": 0.4, "h1": 0.4}, {"h0": 0.3, "h1": 0.6}, {"h0": 0.2, "h1": 0.2}, {"h0": 0.1, "h1": 0.9}]
    s = hpo.PBT(hpo.TOY_SPACE, 4, generations=2, interval=5, quantile=0.25, factors=(0.5, 2.0), seed=0,
                configs=configs)
    jobs = [s.next_job() for _ in range(4)]
    assert [(j.trial, j.rung, j.r_from, j.r_to) for j in jobs] == [(m, 0, 0, 5) for m in range(4)]
    assert s.on_result(0, 0, 1.0, np.array([1.0])) == "continue"  # alone: nobody to compare with
    assert s.on_result(1, 0, 3.0, np.array([3.0])) == "continue"  # the best is never replaced
    assert s.on_result(2, 0, 0.5, np.array([5.0])) == "exploit"   # bottom 1 of {1: 3, 0: 1, 2: 0.5}
    assert s.exploits == [(2, 0, 1)]
    np.testing.assert_array_equal(s.states[2], [3.0])             # weights of member 1 ...
    assert s.states[2] is not s.states[1]                         # ... copied, not shared
    for k in ("h0", "h1"):                                        # hyperparameters of member 1 times 0.5 or 2
        assert s.configs[2][k] in (configs[1][k] * 0.5, min(configs[1][k] * 2.0, 1.0))
    assert s.on_result(3, 0, 2.0, np.array([7.0])) == "continue"  # 2.0 is not in the bottom quantile
    j = s.next_job()
    assert (j.trial, j.rung, j.r_from, j.r_to) == (0, 1, 5, 10)
    assert s.on_result(0, 1, 0.0, np.array([0.0])) == "stop"      # last generation: no more exploiting


def _final_mean(s):
    last = {t: sc for t, _, sc in s.results}
    return np.mean(list(last.values()))


def test_pbt_population_beats_the_same_population_without_exploit_on_the_toy():
    kw = dict(population=8, generations=10, interval=2, seed=2, init_state=[0.9, 0.9])
    pbt, alone = hpo.PBT(hpo.TOY_SPACE, quantile=0.25, **kw), hpo.PBT(hpo.TOY_SPACE, quantile=0.0, **kw)
    best = hpo.run_serial(pbt, 4, hpo.toy_trainable)["best"]
    best_alone = hpo.run_serial(alone, 4, hpo.toy_trainable)["best"]
    assert len(pbt.exploits) > 0 and alone.exploits == []
    assert best[2] >= best_alone[2] and best[2] <= 1.2
    assert _final_mean(pbt) > _final_mean(alone) + 0.2


def _schedulers():
    return {"asha": lambda: hpo.ASHA(hpo.CURVE_SPACE, 3, 1, 27, 27, seed=0),
            "sh": lambda: hpo.SuccessiveHalving(hpo.CURVE_SPACE, 27, 3, 1, 27, seed=0),
            "random": lambda: hpo.RandomSearch(hpo.CURVE_SPACE, 20, 27, seed=0),
            "pbt": lambda: hpo.PBT(hpo.TOY_SPACE, 6, 5, 3, seed=0, init_state=[0.9, 0.9])}


@pytest.mark.parametrize("K", [2, 3, 5, 8])
@pytest.mark.parametrize("name", ["asha", "sh", "random", "pbt"])
def test_distributed_driver_equals_the_serial_schedule_on_the_simulator(K, name):
    trainable = hpo.toy_trainable if name == "pbt" else hpo.curve_trainable
    res = cluster.run(hpo.hpo_run, K, args=(_schedulers()[name](), trainable), timeout=60)
    ref = hpo.run_serial(_schedulers()[name](), K - 1, trainable)
    out = res.values[0]
    assert out["history"] == ref["history"] and out["best"] == ref["best"]
    assert sum(v["jobs"] for v in res.values[1:]) == len(ref["history"])
    assert out["makespan"] <= res.sim_time < out["makespan"] + 0.01  # virtual times are the sim's clocks


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_distributed_asha_finds_the_best_sampled_config_near_the_known_optimum(K):
    sched = hpo.ASHA(hpo.CURVE_SPACE, 3, 1, 27, 27, seed=0)
    best = cluster.run(hpo.hpo_run, K, args=(sched,), timeout=60).values[0]["best"]
    quality = {t: hpo.curve_quality(c) for t, c in sched.configs.items()}
    assert len(quality) == 27 and best[0] == max(quality, key=quality.get)
    assert best[2] == pytest.approx(hpo.curve_score(best[1], 27))
    assert quality[best[0]] > 0.9  # optimum 1 at lr = 0.01, momentum = 0.9
    assert abs(np.log10(best[1]["lr"]) + 2) < 0.6 and abs(best[1]["momentum"] - 0.9) < 0.3


def test_asha_finds_the_same_best_trial_as_synchronous_halving_in_less_simulated_time():
    asha = hpo.run_serial(hpo.ASHA(hpo.CURVE_SPACE, 3, 1, 27, 27, seed=0), 7)
    sh = hpo.run_serial(hpo.SuccessiveHalving(hpo.CURVE_SPACE, 27, 3, 1, 27, seed=0), 7)
    assert asha["best"][0] == sh["best"][0]
    assert asha["makespan"] < sh["makespan"]


def test_driver_rejects_a_world_without_workers():
    with pytest.raises(cluster.RankError, match="K >= 2"):
        cluster.run(hpo.hpo_run, 1, args=(_schedulers()["asha"](),), timeout=30)


@pytest.mark.timeout(120)
def test_distributed_asha_on_real_processes_equals_the_serial_schedule():
    res = cluster.run(hpo.hpo_run, 2, backend="process", args=(_schedulers()["asha"](),),
                      kwargs=dict(time_per_unit=1e-4), timeout=100, quiet=True)
    ref = hpo.run_serial(_schedulers()["asha"](), 1, time_per_unit=1e-4)
    assert res.values[0]["history"] == ref["history"] and res.values[0]["best"] == ref["best"]
