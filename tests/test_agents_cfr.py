"""Chapter 28: CFR on Kuhn poker, its best responses against brute force, and OpenSpiel's CFRSolver and
exploitability beside ours (the same information sets under OpenSpiel's names)."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.agents import cfr as C


def _random_policy(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet([1.0, 1.0], size=len(C.INFOSETS))


@pytest.fixture(scope="module")
def kuhn():
    pyspiel = pytest.importorskip("pyspiel")
    return pyspiel.load_game("kuhn_poker")


def test_bad_policies_and_histories_raise_one_clear_value_error():
    with pytest.raises(ValueError, match="INFOSETS"):
        C.check_policy(np.full((12, 3), 1 / 3))
    with pytest.raises(ValueError, match="summing to 1"):
        C.expected_value(np.ones((12, 2)))
    with pytest.raises(ValueError, match="terminal"):
        C.utility("pb")
    with pytest.raises(ValueError, match="alpha"):
        C.kuhn_nash_policy(0.5)


def test_kuhn_has_twelve_information_sets_six_per_player():
    assert len(C.INFOSETS) == 12 and len(set(C.INFOSETS)) == 12
    assert sum((len(k) - 1) % 2 == 0 for k in C.INFOSETS) == 6


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.25, 1 / 3])
def test_kuhns_equilibria_have_value_minus_one_eighteenth_and_zero_exploitability(alpha):
    P = C.kuhn_nash_policy(alpha)
    assert C.expected_value(P) == pytest.approx(-1 / 18, abs=1e-15)
    assert abs(C.exploitability(P)) <= 1e-15
    assert C.best_response_value(P, 0) == pytest.approx(-1 / 18, abs=1e-15)  # no deviation gains anything


@pytest.mark.parametrize("seed", range(5))
def test_best_response_values_equal_brute_force_over_all_64_pure_strategies(seed):
    P = _random_policy(seed)
    for i in (0, 1):
        assert C.best_response_value(P, i) == pytest.approx(C.reference_best_response_value(P, i), abs=1e-14)
    assert C.exploitability(P) > 0


def test_cfr_average_policy_converges_to_an_equilibrium_of_value_minus_one_eighteenth():
    avg, curve = C.cfr(2000, track=(10, 100, 1000, 2000))
    assert curve[10] > curve[100] > curve[1000] > curve[2000]
    assert curve[2000] < 6e-4
    assert C.expected_value(avg) == pytest.approx(-1 / 18, abs=2e-3)
    assert curve[2000] == C.exploitability(avg)
    # the known family: player 0 never bets a Q first, player 1 always bets or calls a K
    Q, Kb = C.INFOSETS.index("Q"), C.INFOSETS.index("Kb")
    assert avg[Q, 1] < 0.01 and avg[Kb, 1] > 0.99


# --- OpenSpiel, the production library -------------------------------------------------------------------

def test_our_information_sets_are_exactly_openspiels(kuhn):
    from open_spiel.python import policy as os_policy

    tab = os_policy.TabularPolicy(kuhn)
    assert sorted(C.to_openspiel_key(k) for k in C.INFOSETS) == sorted(tab.state_lookup)
    P = _random_policy(9)
    np.testing.assert_array_equal(C.from_openspiel_policy(C.to_openspiel_policy(P, kuhn)), P)


@pytest.mark.parametrize("seed", range(4))
def test_openspiels_exploitability_of_our_policy_equals_ours(kuhn, seed):
    from open_spiel.python.algorithms import exploitability

    P = C.kuhn_nash_policy(0.2) if seed == 0 else _random_policy(seed)
    tab = C.to_openspiel_policy(P, kuhn)
    assert exploitability.exploitability(kuhn, tab) == pytest.approx(C.exploitability(P), abs=1e-13)
    assert exploitability.nash_conv(kuhn, tab) == pytest.approx(C.nash_conv(P), abs=1e-13)


def test_openspiels_cfr_solver_and_ours_reach_the_same_policy_and_exploitability(kuhn):
    from open_spiel.python.algorithms import cfr, exploitability

    ours, curve = C.cfr(300, track=(30, 300))
    solver = cfr.CFRSolver(kuhn)
    seen = {}
    for t in range(1, 301):
        solver.evaluate_and_update_policy()
        if t in (30, 300):
            seen[t] = exploitability.exploitability(kuhn, solver.average_policy())
    for t in (30, 300):  # the same algorithm (alternating updates), so within 1e-9 rather than a loose factor
        assert curve[t] == pytest.approx(seen[t], rel=1e-9)
    np.testing.assert_allclose(ours, C.from_openspiel_policy(solver.average_policy()), atol=1e-10)
    # and OpenSpiel's judgement of our policy is our own
    assert exploitability.exploitability(kuhn, C.to_openspiel_policy(ours, kuhn)) == pytest.approx(curve[300], abs=1e-13)
