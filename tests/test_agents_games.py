"""Chapter 28: normal-form games, equilibria (against nashpy), fictitious play and regret matching, the last
also as a protocol with one player per rank, bit for bit equal to the one-machine reference."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import equilibria as eq
from scaleoutai.agents import games as g

NAMED_NONDEGENERATE = ["matching pennies", "prisoner's dilemma", "battle of the sexes", "rock-paper-scissors",
                       "Shapley's game"]


def _nashpy(A, B):
    nash = pytest.importorskip("nashpy")
    return nash.Game(A, B)


def _quiet(it):  # nashpy warns when it returns an even number of equilibria; we compare, not read warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(it)


def test_bad_payoffs_and_games_raise_one_clear_value_error():
    with pytest.raises(ValueError, match="shape"):
        g.check_payoffs(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="one shape"):
        g.bimatrix(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        g.check_payoffs(np.array([[np.nan, 1.0]]))  # one player, two actions
    with pytest.raises(ValueError, match="label"):
        eq.lemke_howson(*g.matching_pennies(), label=4)
    with pytest.raises(cluster.RankError, match="one player per rank"):  # raised on the ranks, reported here
        cluster.run(g.train_regret_matching, 2, args=(g.random_nplayer_game([2, 2, 2]), 3), timeout=10)


def test_action_values_equal_the_einsum_of_the_payoff_tensor_for_three_players():
    U = g.random_nplayer_game([2, 3, 4], seed=3)
    rng = np.random.default_rng(0)
    s = [rng.dirichlet(np.ones(n)) for n in (2, 3, 4)]
    np.testing.assert_allclose(g.action_values(U, s, 0), np.einsum("abc,b,c->a", U[0], s[1], s[2]), atol=1e-14)
    np.testing.assert_allclose(g.action_values(U, s, 1), np.einsum("abc,a,c->b", U[1], s[0], s[2]), atol=1e-14)
    np.testing.assert_allclose(g.action_values(U, s, 2), np.einsum("abc,a,b->c", U[2], s[0], s[1]), atol=1e-14)
    assert g.nash_conv(U, s) >= 0


@pytest.mark.parametrize("name,x,y", [
    ("matching pennies", [0.5, 0.5], [0.5, 0.5]), ("prisoner's dilemma", [0, 1], [0, 1]),
    ("battle of the sexes", [0.6, 0.4], [0.4, 0.6]), ("battle of the sexes", [1, 0], [1, 0]),
    ("rock-paper-scissors", [1 / 3] * 3, [1 / 3] * 3), ("Shapley's game", [1 / 3] * 3, [1 / 3] * 3)])
def test_known_equilibria_have_zero_nash_conv_and_a_pure_deviation_from_them_does_not(name, x, y):
    U = g.bimatrix(*g.GAMES[name]())
    s = [np.array(x, float), np.array(y, float)]
    assert g.is_nash(U, s) and g.nash_conv(U, s) <= 1e-12
    assert g.nash_conv(U, [np.eye(len(x))[int(np.argmin(x))], s[1]]) > 1e-3 or name == "prisoner's dilemma"


@pytest.mark.parametrize("m,n,seed", [(2, 2, 0), (3, 3, 1), (4, 4, 2), (3, 5, 3), (5, 3, 4), (6, 6, 5)])
def test_support_and_vertex_enumeration_and_lemke_howson_agree_on_non_degenerate_games(m, n, seed):
    A, B = g.random_game(m, n, seed=seed)
    assert eq.is_nondegenerate(A, B)
    se, ve = eq.support_enumeration(A, B), eq.vertex_enumeration(A, B)
    assert eq.same_equilibria(se, ve) and len(eq.sort_equilibria(se)) % 2 == 1  # an odd number of them
    U = g.bimatrix(A, B)
    assert all(g.is_nash(U, [x, y]) for x, y in se)
    for x, y in eq.lemke_howson_all(A, B):  # every label's path ends at one of the enumerated equilibria
        assert eq.same_equilibria([(x, y)], [e for e in se if np.allclose(e[0], x) and np.allclose(e[1], y)])


def test_the_degenerate_game_has_a_segment_whose_ends_vertex_enumeration_finds():
    A, B = g.degenerate_game()
    assert not eq.is_nondegenerate(A, B)
    ve = eq.vertex_enumeration(A, B)
    U = g.bimatrix(A, B)
    assert eq.same_equilibria(ve, [(np.array([0, 1 / 3, 2 / 3]), np.array([1 / 3, 2 / 3])),
                                   (np.array([1.0, 0, 0]), np.array([2 / 3, 1 / 3])),
                                   (np.array([1.0, 0, 0]), np.array([1.0, 0]))], tol=1e-12)
    for lam in np.linspace(0, 1, 5):  # the whole segment between the two ends is in equilibrium
        assert g.is_nash(U, [np.array([1.0, 0, 0]), lam * np.array([2 / 3, 1 / 3]) + (1 - lam) * np.array([1.0, 0])])
    assert all(g.is_nash(U, list(e)) for e in eq.lemke_howson_all(A, B))


# --- nashpy, the production library ---------------------------------------------------------------------

@pytest.mark.parametrize("game", NAMED_NONDEGENERATE + [f"random 4x4 seed {s}" for s in range(4)])
def test_support_enumeration_and_lemke_howson_equal_nashpys_on_non_degenerate_games(game):
    A, B = g.random_game(4, 4, seed=int(game[-1])) if game.startswith("random") else g.GAMES[game]()
    G = _nashpy(A, B)
    assert eq.is_nondegenerate(A, B)
    assert eq.same_equilibria(eq.support_enumeration(A, B), _quiet(G.support_enumeration()))
    for k in range(sum(A.shape)):  # the same dropped label follows the same path to the same equilibrium
        x, y = eq.lemke_howson(A, B, k)
        tx, ty = G.lemke_howson(initial_dropped_label=k)
        np.testing.assert_allclose(x, tx, atol=1e-10)
        np.testing.assert_allclose(y, ty, atol=1e-10)


@pytest.mark.parametrize("game", ["degenerate 3x2", "integers 4x4 seed 0", "integers 3x4 seed 1", "random 3x5 seed 1"])
def test_vertex_enumeration_equals_nashpys_on_degenerate_and_other_games(game):
    if game == "degenerate 3x2":
        A, B = g.degenerate_game()
    elif game.startswith("integers"):
        m, n = int(game[9]), int(game[11])
        A, B = g.random_game(m, n, seed=int(game[-1]), integers=3)
    else:
        A, B = g.random_game(3, 5, seed=1)
    assert eq.same_equilibria(eq.vertex_enumeration(A, B), _quiet(_nashpy(A, B).vertex_enumeration()))


@pytest.mark.parametrize("m,n,seed", [(3, 5, 1), (3, 5, 3), (3, 5, 4), (4, 4, 4)])
def test_nashpys_support_enumeration_finds_a_subset_of_ours_where_it_misses_some(m, n, seed):
    # nashpy tests "is a best response" with exact float equality, so it can miss an equilibrium that its
    # own vertex enumeration confirms; every one it does find is one of ours
    A, B = g.random_game(m, n, seed=seed)
    G = _nashpy(A, B)
    ours, theirs = eq.support_enumeration(A, B), _quiet(G.support_enumeration())
    assert all(eq.same_equilibria([e], [o for o in ours if np.allclose(o[0], e[0]) and np.allclose(o[1], e[1])])
               for e in theirs)
    assert eq.same_equilibria(ours, _quiet(G.vertex_enumeration()))


@pytest.mark.parametrize("seed", range(4))
def test_fictitious_play_equals_nashpys_play_counts_when_there_are_no_ties(seed):
    A, B = g.random_game(4, 3, seed=seed)
    c0 = [np.array([1, 0, 0, 0]), np.array([0, 0, 1])]  # a first move breaks the all-zero tie nashpy randomises
    ours, _ = g.fictitious_play(A, B, 150, counts=c0)
    theirs = list(_nashpy(A, B).fictitious_play(iterations=150, play_counts=[c.astype(float) for c in c0]))[-1]
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


# --- learning dynamics -------------------------------------------------------------------------------------

def test_fictitious_play_converges_in_zero_sum_games_and_cycles_in_shapleys_game():
    _, curve = g.fictitious_play(*g.rock_paper_scissors(), 3000, track=True)
    assert curve[-1] < 0.05 and curve[-1] < curve[99] / 3  # O(1/t) here, O(t^-1/2) at worst
    _, cyc = g.fictitious_play(*g.shapley_game(), 3000, track=True)
    assert cyc[1000:].min() > 0.1  # the empirical frequencies never settle at the uniform equilibrium


@pytest.mark.parametrize("name", ["matching pennies", "rock-paper-scissors"])
def test_regret_matching_averages_approach_the_equilibrium_of_zero_sum_games(name):
    U = g.bimatrix(*g.GAMES[name]())
    U[0] += 0.01 * np.arange(U.shape[2])  # break the symmetry so the uniform start is not already the answer
    U[1] = -U[0]
    avg, curve = g.reference_regret_matching(U, 4000, track=True)
    assert curve[-1] < 0.05 and curve[-1] < curve[9] / 10  # O(1/sqrt(T))
    assert g.nash_conv(U, avg) == pytest.approx(curve[-1], abs=1e-15)


@pytest.mark.parametrize("actions", [[4], [2, 3], [3, 2, 4], [2, 2, 3, 2, 2], [3, 1, 2, 2, 1, 2]])
def test_regret_matching_protocol_equals_the_reference_bit_for_bit_for_every_number_of_players(actions):
    U = g.random_nplayer_game(actions, seed=len(actions))
    T, N = 60, len(actions)
    avg, missed, res = g.run_regret_matching(U, T, timeout=30)
    ref, _ = g.reference_regret_matching(U, T)
    assert missed == set()
    for a, r in zip(avg, ref):
        np.testing.assert_array_equal(a, r)
    for i in range(N):  # N - 1 strategies out per round, n_i doubles each
        assert res.stats[i].messages_sent == T * (N - 1)
        assert res.stats[i].bytes_sent == T * (N - 1) * actions[i] * 8


@pytest.mark.parametrize("faults", [cluster.Faults(loss=0.1, seed=3), cluster.Faults(drop={0: {1, 5}, 2: {4}}),
                                    cluster.Faults(crash={1: 17})])
def test_regret_matching_protocol_equals_the_reference_that_misses_the_same_messages(faults):
    U = g.random_nplayer_game([3, 2, 3], seed=7)
    avg, missed, _ = g.run_regret_matching(U, 40, faults=faults, timeout=30)
    assert missed  # the fault really happened
    ref, _ = g.reference_regret_matching(U, 40, missed=missed)
    for a, r in zip(avg, ref):
        if a is not None:  # a crashed player has no average to report
            np.testing.assert_array_equal(a, r)
    assert (avg[1] is None) == (faults.crash == {1: 17})
