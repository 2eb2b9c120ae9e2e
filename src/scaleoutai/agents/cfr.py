"""Counterfactual regret minimisation (CFR) on Kuhn poker (Chapter 28, Sections 2 and 4).

Kuhn poker: three cards J < Q < K, each player antes 1 and gets one card, player 0 acts first. Actions are
p (pass or fold) and b (bet or call); the terminal histories are pp, bp (player 1 folds), pbp (player 0
folds), bb and pbb (showdowns for 2). An information set is the acting player's card and the public
history, e.g. "Qpb": 12 of them, 6 per player. A policy is a (12, 2) array of [P(p), P(b)] rows in the
order of ``INFOSETS``.

CFR (Zinkevich et al. 2007) keeps at every information set I the counterfactual regret

    R_T(I, a) = sum_t pi_{-i}^t(I) (v_i^t(I, a) - v_i^t(I)),

plays regret matching on it and averages the policies weighted by the player's own reach pi_i^t(I). The
average policy's exploitability falls as O(1/sqrt(T)) (in practice much faster). The game's value for
player 0 is -1/18. Updates alternate between the players as OpenSpiel's CFRSolver does, so the two run
the same arithmetic. The traversal is vectorised over the 6 deals: one pass visits the 9 histories once.
"""
from __future__ import annotations

from itertools import product
from typing import Any

import numpy as np

__all__ = ["CARDS", "DEALS", "DECISIONS", "TERMINALS", "INFOSETS", "uniform_policy", "check_policy", "utility",
           "expected_value", "best_response_value", "exploitability", "nash_conv", "reference_best_response_value",
           "kuhn_nash_policy", "cfr_iteration", "average_policy", "cfr", "to_openspiel_key", "to_openspiel_policy",
           "from_openspiel_policy"]

CARDS = ("J", "Q", "K")
DEALS = np.array([(a, b) for a in range(3) for b in range(3) if a != b])  # (6, 2), chance 1/6 each
CHANCE = 1.0 / 3.0 * 0.5  # the same product OpenSpiel's chance nodes form
DECISIONS = ("", "p", "b", "pb")  # the acting player is len(h) % 2
TERMINALS = ("pp", "bp", "pbp", "bb", "pbb")
INFOSETS = [f"{c}{h}" for h in DECISIONS for c in CARDS]
_INDEX = {k: n for n, k in enumerate(INFOSETS)}
# the information set of the acting player at history h, for each of the 6 deals
_AT = {h: np.array([_INDEX[CARDS[d[len(h) % 2]] + h] for d in DEALS]) for h in DECISIONS}
_SHOWDOWN = np.where(DEALS[:, 0] > DEALS[:, 1], 1.0, -1.0)


def utility(h: str) -> np.ndarray:
    """Player 0's payoff at terminal history h for each deal (player 1 gets its negative)."""
    if h == "bp":
        return np.ones(len(DEALS))
    if h == "pbp":
        return -np.ones(len(DEALS))
    if h in ("pp", "bb", "pbb"):
        return _SHOWDOWN * (1.0 if h == "pp" else 2.0)
    raise ValueError(f"{h!r} is not a terminal history of Kuhn poker; the terminals are {TERMINALS}")


def uniform_policy() -> np.ndarray:
    """Every information set plays p and b with probability 1/2."""
    return np.full((len(INFOSETS), 2), 0.5)


def check_policy(policy: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """A (12, 2) array of probability rows in the order of INFOSETS; else one clear ValueError."""
    P = np.asarray(policy, dtype=np.float64)
    if P.shape != (len(INFOSETS), 2) or np.any(P < -tol) or np.any(np.abs(P.sum(axis=1) - 1.0) > tol):
        raise ValueError(f"a Kuhn policy is a ({len(INFOSETS)}, 2) array of [P(pass), P(bet)] rows summing to 1 "
                         f"in the order of cfr.INFOSETS, got shape {P.shape}")
    return P


def _value(policy: np.ndarray, h: str = "") -> np.ndarray:
    """Player 0's expected payoff below h for each deal, both players following ``policy``."""
    if h in TERMINALS:
        return utility(h)
    sigma = policy[_AT[h]]
    return sigma[:, 0] * _value(policy, h + "p") + sigma[:, 1] * _value(policy, h + "b")


def expected_value(policy: np.ndarray) -> float:
    """Player 0's expected payoff when both play ``policy`` (-1/18 at every equilibrium)."""
    return float(CHANCE * _value(check_policy(policy)).sum())


def _br(policy: np.ndarray, i: int, card: int, h: str, r: np.ndarray) -> float:
    """Player i's best-response value below h holding ``card``; r[c] = chance x opponent reach with card c."""
    if h in TERMINALS:
        cards = [(card, c) if i == 0 else (c, card) for c in range(3)]
        u = np.array([0.0 if a == b else utility(h)[_deal_index(a, b)] for a, b in cards]) * (1 - 2 * i)
        return float(r @ u)
    if len(h) % 2 == i:  # player i knows its card and h: one choice for the whole information set
        return max(_br(policy, i, card, h + a, r) for a in "pb")
    sigma = policy[[_INDEX[CARDS[c] + h] for c in range(3)]]
    return _br(policy, i, card, h + "p", r * sigma[:, 0]) + _br(policy, i, card, h + "b", r * sigma[:, 1])


def _deal_index(a: int, b: int) -> int:
    return int(np.flatnonzero((DEALS[:, 0] == a) & (DEALS[:, 1] == b))[0])


def best_response_value(policy: np.ndarray, i: int) -> float:
    """max over player i's strategies of its expected payoff against the other player's part of ``policy``."""
    P = check_policy(policy)
    total = 0.0
    for card in range(3):
        r = np.full(3, CHANCE)
        r[card] = 0.0
        total += _br(P, i, card, "", r)
    return total


def nash_conv(policy: np.ndarray) -> float:
    """sum_i (BR_i - u_i) = BR_0 + BR_1 in this zero-sum game; 0 exactly at an equilibrium."""
    return best_response_value(policy, 0) + best_response_value(policy, 1)


def exploitability(policy: np.ndarray) -> float:
    """NashConv / 2, OpenSpiel's ``exploitability``: what a best responder wins on average beyond the value."""
    return nash_conv(policy) / 2.0


def reference_best_response_value(policy: np.ndarray, i: int) -> float:
    """The same maximum by brute force: evaluate all 2^6 pure strategies of player i and keep the best."""
    P = check_policy(policy)
    mine = [n for n, k in enumerate(INFOSETS) if (len(k) - 1) % 2 == i]
    best = -np.inf
    for bits in product((0, 1), repeat=len(mine)):
        Q = P.copy()
        Q[mine] = np.eye(2)[list(bits)]
        best = max(best, (1 - 2 * i) * expected_value(Q))
    return float(best)


def kuhn_nash_policy(alpha: float = 0.0) -> np.ndarray:
    """Kuhn's (1950) equilibria: player 0 bets J with alpha in [0, 1/3], K with 3 alpha, calls Q with alpha + 1/3;
    player 1 calls Q with 1/3, bets J after a pass with 1/3, always bets or calls K and folds J to a bet."""
    if not 0.0 <= alpha <= 1.0 / 3.0:
        raise ValueError(f"alpha must lie in [0, 1/3], got {alpha}")
    bet = {"J": alpha, "Q": 0.0, "K": 3 * alpha, "Jpb": 0.0, "Qpb": alpha + 1 / 3, "Kpb": 1.0,
           "Jp": 1 / 3, "Qp": 0.0, "Kp": 1.0, "Jb": 0.0, "Qb": 1 / 3, "Kb": 1.0}
    return np.array([[1.0 - bet[k], bet[k]] for k in INFOSETS])


def _regret_matching(regret: np.ndarray) -> np.ndarray:
    """Row-wise: R+ / sum R+, uniform where no regret is positive."""
    pos = np.maximum(regret, 0.0)
    total = pos.sum(axis=1, keepdims=True)
    return np.where(total > 0, pos / np.where(total > 0, total, 1.0), 0.5)


def _traverse(h: str, reach: np.ndarray, policy: np.ndarray, player: int, regret: np.ndarray,
              cum: np.ndarray) -> np.ndarray:
    """Player 0's values below h per deal; at ``player``'s information sets add regrets and the reach-weighted
    policy. reach is (2, 6): each player's own reach probability per deal."""
    if h in TERMINALS:
        return utility(h)
    p, idx = len(h) % 2, _AT[h]
    sigma = policy[idx]
    child = []
    for a, act in enumerate("pb"):
        r = reach.copy()
        r[p] = r[p] * sigma[:, a]
        child.append(_traverse(h + act, r, policy, player, regret, cum))
    v = sigma[:, 0] * child[0] + sigma[:, 1] * child[1]
    if p == player:
        cf = CHANCE * reach[1 - p] * (1.0 if p == 0 else -1.0)  # counterfactual reach, in player p's payoffs
        for a in range(2):
            np.add.at(regret[:, a], idx, cf * (child[a] - v))
            np.add.at(cum[:, a], idx, reach[p] * sigma[:, a])
    return v


def cfr_iteration(regret: np.ndarray, cum: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """One CFR iteration with alternating updates, in place on ``regret`` and ``cum`` (both (12, 2)):
    player 0 updates against the current policy, the policy is re-matched, then player 1. Returns the policy."""
    for player in (0, 1):
        _traverse("", np.ones((2, len(DEALS))), policy, player, regret, cum)
        policy = _regret_matching(regret)
    return policy


def average_policy(cum: np.ndarray) -> np.ndarray:
    """The average policy: the reach-weighted policy sums normalised per information set (uniform where 0)."""
    total = cum.sum(axis=1, keepdims=True)
    return np.where(total > 0, cum / np.where(total > 0, total, 1.0), 0.5)


def cfr(iterations: int, track: tuple[int, ...] | list[int] = ()) -> tuple[np.ndarray, dict[int, float]]:
    """Run CFR for ``iterations`` from the uniform policy. Returns the average policy and the exploitability
    of the average policy after each iteration count listed in ``track``."""
    if int(iterations) < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    regret, cum = np.zeros((len(INFOSETS), 2)), np.zeros((len(INFOSETS), 2))
    policy, curve, marks = uniform_policy(), {}, set(int(t) for t in track)
    for t in range(1, int(iterations) + 1):
        policy = cfr_iteration(regret, cum, policy)
        if t in marks:
            curve[t] = exploitability(average_policy(cum))
    return average_policy(cum), curve


# --- OpenSpiel's names for the same information sets ------------------------------------------------------

def to_openspiel_key(key: str) -> str:
    """Our "Qpb" is OpenSpiel's "1pb": the card as its index 0, 1, 2, then the same history (0 = Pass, 1 = Bet)."""
    if key not in _INDEX:
        raise ValueError(f"{key!r} is not a Kuhn information set; they are {INFOSETS}")
    return str(CARDS.index(key[0])) + key[1:]


def to_openspiel_policy(policy: np.ndarray, game: Any) -> Any:
    """Our (12, 2) policy as an ``open_spiel.python.policy.TabularPolicy`` of ``game`` (kuhn_poker)."""
    from open_spiel.python import policy as os_policy

    P = check_policy(policy)
    tab = os_policy.TabularPolicy(game)
    for n, key in enumerate(INFOSETS):
        tab.action_probability_array[tab.state_lookup[to_openspiel_key(key)]] = P[n]
    return tab


def from_openspiel_policy(tab: Any) -> np.ndarray:
    """An OpenSpiel TabularPolicy of kuhn_poker as our (12, 2) array."""
    return np.array([tab.action_probability_array[tab.state_lookup[to_openspiel_key(k)]] for k in INFOSETS])
