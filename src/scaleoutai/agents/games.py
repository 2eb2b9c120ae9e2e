"""Normal-form games, best responses, fictitious play and regret matching (Chapter 28).

A game of N players is a payoff tensor U of shape (N, n_1, ..., n_N): U[i][a_1, ..., a_N] is what player i
gets when player j plays a_j. A two-player (bimatrix) game (A, B) is U = stack([A, B]). With mixed strategies
s_j (points of the simplex), player i's value of its action a is

    u_i(a, s_-i) = sum_{a_-i} U[i][a, a_-i] prod_{j != i} s_j(a_j),

and NashConv(s) = sum_i (max_a u_i(a, s_-i) - s_i . u_i(., s_-i)) >= 0 is zero exactly at a Nash
equilibrium. For a two-player zero-sum game it is the duality gap max_i (A y)_i - min_j (x^T A)_j, and
exploitability = NashConv / 2 (OpenSpiel's convention). Regret matching also runs as a protocol, one
player per rank (``train_regret_matching``); equilibria by enumeration and Lemke-Howson are in
``equilibria``, CFR on Kuhn poker in ``cfr``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm

__all__ = ["bimatrix", "check_payoffs", "matching_pennies", "prisoners_dilemma", "battle_of_the_sexes",
           "rock_paper_scissors", "shapley_game", "degenerate_game", "random_game", "random_nplayer_game",
           "GAMES", "action_values", "expected_payoffs", "best_responses", "nash_conv", "exploitability",
           "is_nash", "fictitious_play", "regret_matching_strategy", "regret_matching_update",
           "reference_regret_matching", "train_regret_matching", "run_regret_matching"]


def check_payoffs(payoffs: np.ndarray) -> np.ndarray:
    """A float64 payoff tensor of shape (N, n_1, ..., n_N), every n_i >= 1; else one clear ValueError."""
    U = np.asarray(payoffs, dtype=np.float64)
    if U.ndim < 2 or U.shape[0] != U.ndim - 1 or min(U.shape[1:]) < 1:
        raise ValueError(f"payoffs must have shape (N, n_1, ..., n_N) with N players, got {U.shape}: "
                         "for a bimatrix game pass bimatrix(A, B)")
    if not np.all(np.isfinite(U)):
        raise ValueError("payoffs must be finite numbers")
    return U


def bimatrix(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The payoff tensor stack([A, B]) of the game where the row player gets A and the column player B."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape:
        raise ValueError(f"A and B must be matrices of one shape (m, n), got {A.shape} and {B.shape}")
    return check_payoffs(np.stack([A, B]))


# --- a catalogue of games (row player's A, column player's B) ----------------------------------------

def matching_pennies() -> tuple[np.ndarray, np.ndarray]:
    """Zero-sum; the unique equilibrium is (1/2, 1/2) for both, value 0."""
    A = np.array([[1.0, -1.0], [-1.0, 1.0]])
    return A, -A


def prisoners_dilemma() -> tuple[np.ndarray, np.ndarray]:
    """Actions (cooperate, defect); defecting is dominant, the unique equilibrium (defect, defect) pays 1 each."""
    A = np.array([[3.0, 0.0], [5.0, 1.0]])
    return A, A.T.copy()


def battle_of_the_sexes() -> tuple[np.ndarray, np.ndarray]:
    """Two pure equilibria and one mixed one, (3/5, 2/5) and (2/5, 3/5)."""
    return np.array([[3.0, 0.0], [0.0, 2.0]]), np.array([[2.0, 0.0], [0.0, 3.0]])


def rock_paper_scissors() -> tuple[np.ndarray, np.ndarray]:
    """Zero-sum; the unique equilibrium is uniform for both, value 0."""
    A = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    return A, -A


def shapley_game() -> tuple[np.ndarray, np.ndarray]:
    """Shapley (1964): the unique equilibrium is uniform, and fictitious play cycles around it for ever."""
    return np.eye(3), np.roll(np.eye(3), 1, axis=1)


def degenerate_game() -> tuple[np.ndarray, np.ndarray]:
    """Von Stengel's degenerate 3 x 2 example: against the first row both columns pay the column player 3, so
    x = (1, 0, 0) with any y from (2/3, 1/3) to (1, 0) is an equilibrium (a segment: vertex enumeration finds
    its two ends), beside the isolated ((0, 1/3, 2/3), (1/3, 2/3))."""
    return np.array([[3.0, 3.0], [2.0, 5.0], [0.0, 6.0]]), np.array([[3.0, 3.0], [2.0, 6.0], [3.0, 1.0]])


def random_game(m: int, n: int, seed: int = 0, zero_sum: bool = False, integers: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal payoffs (non-degenerate with probability 1), or integers 0..integers-1 when
    ``integers`` > 0 (small ranges give degenerate games); ``zero_sum`` sets B = -A."""
    if m < 1 or n < 1:
        raise ValueError(f"a game needs m, n >= 1 actions, got {m} x {n}")
    rng = np.random.default_rng(seed)
    draw = (lambda: rng.integers(0, integers, (m, n)).astype(np.float64)) if integers > 0 else \
        (lambda: rng.standard_normal((m, n)))
    A = draw()
    return (A, -A) if zero_sum else (A, draw())


def random_nplayer_game(actions: Sequence[int], seed: int = 0) -> np.ndarray:
    """A payoff tensor of shape (N, *actions) with standard-normal entries: N = len(actions) players."""
    if len(actions) < 1 or min(actions) < 1:
        raise ValueError(f"every player needs at least one action, got {list(actions)}")
    return np.random.default_rng(seed).standard_normal((len(actions), *actions))


GAMES = {"matching pennies": matching_pennies, "prisoner's dilemma": prisoners_dilemma,
         "battle of the sexes": battle_of_the_sexes, "rock-paper-scissors": rock_paper_scissors,
         "Shapley's game": shapley_game, "degenerate 3x2": degenerate_game}


# --- values, best responses, NashConv -----------------------------------------------------------------

def action_values(payoffs: np.ndarray, strategies: Sequence[np.ndarray], i: int) -> np.ndarray:
    """u_i(a, s_-i) for every action a of player i: U[i] contracted with s_j, the last player first.

    One fixed order of contraction, so the reference and every rank of the protocol get the same bits.
    """
    T = payoffs[i]
    for j in range(payoffs.shape[0] - 1, -1, -1):
        if j != i:
            T = np.tensordot(T, strategies[j], axes=([j], [0]))
    return T


def expected_payoffs(payoffs: np.ndarray, strategies: Sequence[np.ndarray]) -> np.ndarray:
    """u_i(s) = s_i . u_i(., s_-i) for every player i."""
    return np.array([strategies[i] @ action_values(payoffs, strategies, i) for i in range(payoffs.shape[0])])


def best_responses(payoffs: np.ndarray, strategies: Sequence[np.ndarray], i: int, tol: float = 1e-12
                   ) -> np.ndarray:
    """The pure best responses of player i to s_-i: every a with u_i(a, s_-i) >= max - tol."""
    v = action_values(payoffs, strategies, i)
    return np.flatnonzero(v >= v.max() - tol)


def nash_conv(payoffs: np.ndarray, strategies: Sequence[np.ndarray]) -> float:
    """sum_i (max_a u_i(a, s_-i) - u_i(s)): what all players together gain by deviating alone."""
    total = 0.0
    for i in range(payoffs.shape[0]):
        v = action_values(payoffs, strategies, i)
        total += float(v.max() - strategies[i] @ v)
    return total


def exploitability(payoffs: np.ndarray, strategies: Sequence[np.ndarray]) -> float:
    """NashConv / N, as OpenSpiel reports it."""
    return nash_conv(payoffs, strategies) / payoffs.shape[0]


def is_nash(payoffs: np.ndarray, strategies: Sequence[np.ndarray], tol: float = 1e-9) -> bool:
    """Every s_i is a probability vector and no player gains more than tol by deviating."""
    ok = all(np.all(s >= -tol) and abs(s.sum() - 1.0) <= tol for s in strategies)
    return bool(ok and nash_conv(payoffs, strategies) <= tol)


# --- learning in games ------------------------------------------------------------------------------

def fictitious_play(A: np.ndarray, B: np.ndarray, iterations: int, counts: Sequence[np.ndarray] | None = None,
                    track: bool = False) -> tuple[list[np.ndarray], np.ndarray]:
    """Simultaneous fictitious play (Brown 1951): each round both players play a pure best response to the
    other's empirical frequencies (lowest index on ties) and add it to their counts.

    Returns the play counts [row, column] and, with ``track``, NashConv of the empirical frequencies after
    every round. The empirical frequencies converge to an equilibrium in zero-sum games (Robinson 1951);
    in Shapley's game they cycle.
    """
    U = bimatrix(A, B)
    c = [np.zeros(U.shape[1], np.int64), np.zeros(U.shape[2], np.int64)] if counts is None else \
        [np.array(counts[0], np.int64), np.array(counts[1], np.int64)]
    curve = []
    for _ in range(int(iterations)):
        row = int(np.argmax(U[0] @ c[1]))  # the same products as nashpy's, so no-tie games agree with it
        col = int(np.argmax(U[1].T @ c[0]))
        c[0][row] += 1
        c[1][col] += 1
        if track:
            curve.append(nash_conv(U, [c[0] / c[0].sum(), c[1] / c[1].sum()]))
    return c, np.array(curve)


def regret_matching_strategy(regret: np.ndarray) -> np.ndarray:
    """Hart and Mas-Colell (2000): play a with probability R+(a) / sum_b R+(b); uniform when no regret is positive."""
    pos = np.maximum(regret, 0.0)
    total = pos.sum()
    return pos / total if total > 0 else np.full(regret.shape, 1.0 / regret.size)


def regret_matching_update(payoffs: np.ndarray, views: Sequence[np.ndarray], i: int, regret: np.ndarray,
                           total: np.ndarray) -> None:
    """One round for player i, in place: R_i += u_i(., s_-i) - u_i(s), S_i += s_i (views[i] is s_i)."""
    v = action_values(payoffs, views, i)
    regret += v - views[i] @ v
    total += views[i]


def reference_regret_matching(payoffs: np.ndarray, iterations: int, missed: Iterable[tuple[int, int, int]] = (),
                              track: bool = False) -> tuple[list[np.ndarray], np.ndarray]:
    """Every player runs regret matching against the others' current mixed strategies, on one machine.

    Returns the average strategies S_i / T and, with ``track``, NashConv of the averages after every round.
    ``missed`` holds (round t, receiver i, sender j): player i did not hear s_j in round t and keeps the last
    s_j it heard (the uniform strategy before any), which is what ``train_regret_matching`` does after a lost
    message or a crash. In two-player zero-sum games the averages converge to an equilibrium, NashConv
    O(1/sqrt(T)); in general games to the set of coarse correlated equilibria.
    """
    U = check_payoffs(payoffs)
    N, T, miss = U.shape[0], int(iterations), set(missed)
    regret = [np.zeros(n) for n in U.shape[1:]]
    total = [np.zeros(n) for n in U.shape[1:]]
    heard = [[np.full(n, 1.0 / n) for n in U.shape[1:]] for _ in range(N)]  # heard[i][j]: i's view of s_j
    curve = []
    for t in range(T):
        s = [regret_matching_strategy(r) for r in regret]
        for i in range(N):
            for j in range(N):
                if j == i or (t, i, j) not in miss:
                    heard[i][j] = s[j]
            regret_matching_update(U, heard[i], i, regret[i], total[i])
        if track:
            curve.append(nash_conv(U, [x / (t + 1) for x in total]))
    return [x / T if T else np.full(x.shape, 1.0 / x.size) for x in total], np.array(curve)


# --- regret matching as a protocol: player i is rank i ----------------------------------------------

def train_regret_matching(comm: Comm, payoffs: np.ndarray, iterations: int, seconds_per_round: float = 0.0
                          ) -> dict:
    """Per rank (player i = comm.rank): each round announce s_i to every other player and hear theirs.

    Round t: s_i from the regrets; for d = 1..N-1 one ``sendrecv`` (s_i to rank i+d, s_j from rank i-d), so
    every rank knows whom it waits for and the N - 1 exchanges never deadlock; then the update. A lost
    message (``MessageLostError``) or a crashed peer (``PeerCrashedError``) leaves the last s_j heard in
    place; a crashed peer is not waited for again. Messages per rank: T (N - 1); bytes: T (N - 1) n_i 8.
    Returns the average strategy and the rounds it missed, [(t, j)], for ``reference_regret_matching``.
    """
    U = check_payoffs(payoffs)
    N, i, T = U.shape[0], comm.rank, int(iterations)
    if comm.size != N:
        raise ValueError(f"the game has {N} players but the communicator has {comm.size} ranks: one player per rank")
    regret, total = np.zeros(U.shape[1 + i]), np.zeros(U.shape[1 + i])
    heard = [np.full(n, 1.0 / n) for n in U.shape[1:]]
    dead: set[int] = set()
    missed: list[tuple[int, int]] = []
    for t in range(T):
        s = regret_matching_strategy(regret)
        heard[i] = s
        for d in range(1, N):
            dst, src = (i + d) % N, (i - d) % N
            if src in dead:  # nothing more will come from it
                if dst not in dead:
                    comm.send(s, dst)
                missed.append((t, src))
                continue
            try:
                heard[src] = comm.sendrecv(s, dst, src) if dst not in dead else comm.recv(src)
            except cluster.MessageLostError:
                missed.append((t, src))
            except cluster.PeerCrashedError:
                dead.add(src)
                missed.append((t, src))
        if seconds_per_round:
            comm.compute(seconds_per_round)
        regret_matching_update(U, heard, i, regret, total)
    return {"average": total / T if T else np.full(total.shape, 1.0 / total.size), "missed": missed}


def run_regret_matching(payoffs: np.ndarray, iterations: int, network: cluster.Network | None = None,
                        faults: cluster.Faults | None = None, timeout: float = 120.0, backend: str = "sim",
                        seconds_per_round: float = 0.0) -> tuple[list[np.ndarray | None], set, cluster.RunResult]:
    """Driver: N ranks for N players. Returns each player's average strategy (None for a crashed rank),
    the set of (t, receiver, sender) messages that were not heard, and the run (messages, bytes, time)."""
    U = check_payoffs(payoffs)
    res = cluster.run(train_regret_matching, U.shape[0], backend=backend, args=(U, int(iterations)),
                      kwargs={"seconds_per_round": seconds_per_round}, network=network, faults=faults,
                      timeout=timeout)
    averages, missed = [], set()
    for r, v in enumerate(res.values):
        if isinstance(v, dict):
            averages.append(v["average"])
            missed.update((t, r, j) for t, j in v["missed"])
        else:
            averages.append(None)
    return averages, missed, res
