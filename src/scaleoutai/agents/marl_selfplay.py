"""Self-play on a two-player matrix game: two copies of one learning rule, a player per rank (Chapter 30).

Hedge (multiplicative weights) plays x_{t+1} proportional to exp(lr sum_{s<=t} u_s), u_s = R x_opp,s the
payoff of each action against what the opponent played. In a zero-sum game its *average* policy
(1/T) sum_t x_t goes to a Nash equilibrium (exploitability O(1/sqrt T) with lr ~ 1/sqrt T: the folk
theorem of no-regret learning), while its *last iterate* spirals away from an interior equilibrium
(Bailey and Piliouras 2018). Optimistic Hedge, x_{t+1} proportional to exp(lr (sum_{s<=t} u_s + u_t)),
converges in the last iterate too (Daskalakis and Panageas 2019).

Protocol: rank 0 is the referee (hosts the game); players 0 and 1 sit on ranks as ``block_bounds(2, K)``
puts them. Per round a player commits its play (its mixed strategy when ``samples`` = 0, else that many
sampled actions from its own generator), the referee receives both and sends each player the other's;
a player then scores every action against it and updates. Equal to ``reference_self_play`` bit for bit.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds
from .marl_envs import MatrixGame

__all__ = ["Hedge", "exploitability", "train_self_play", "reference_self_play", "run_self_play"]


class Hedge:
    """Multiplicative weights on cumulative payoffs; ``optimistic`` counts the last payoff twice."""

    def __init__(self, n_actions: int, lr: float = 0.1, optimistic: bool = False,
                 start: np.ndarray | None = None) -> None:
        self.cum, self.last = np.zeros(int(n_actions)), np.zeros(int(n_actions))
        if start is not None:  # begin at the policy ``start``: cum = log(start) / lr
            self.cum = np.log(np.asarray(start, dtype=np.float64)) / float(lr)
        self.lr, self.optimistic = float(lr), bool(optimistic)
        self.played, self.t = np.zeros(int(n_actions)), 0

    def policy(self) -> np.ndarray:
        z = self.lr * (self.cum + self.last if self.optimistic else self.cum)
        p = np.exp(z - z.max())
        return p / p.sum()

    def play(self, samples: int, rng: np.random.Generator) -> np.ndarray:
        """The committed play: the policy itself (samples = 0) or ``samples`` sampled actions."""
        x = self.policy()
        self.played += x
        self.t += 1
        if samples == 0:
            return x
        return np.minimum((rng.random(samples)[:, None] > np.cumsum(x)).sum(axis=1), len(x) - 1).astype(np.float64)

    def update(self, u: np.ndarray) -> None:
        self.cum += u
        self.last = u

    def average(self) -> np.ndarray:
        return self.played / max(1, self.t)


def exploitability(game: MatrixGame, x: np.ndarray, y: np.ndarray) -> float:
    """NashConv: sum over the two players of what a best response would gain, 0 exactly at a Nash equilibrium."""
    R0, R1 = game.payoffs
    return float((R0 @ y).max() - x @ R0 @ y + (x @ R1).max() - x @ R1 @ y)


def _payoff_vector(game: MatrixGame, i: int, opp_play: np.ndarray, samples: int) -> np.ndarray:
    n = game.n_actions
    q = opp_play if samples == 0 else np.bincount(opp_play.astype(np.int64), minlength=n) / samples
    return game.payoffs[0] @ q if i == 0 else q @ game.payoffs[1]


def _check(game: Any, rounds: int, samples: int, start: Any) -> None:
    if not isinstance(game, MatrixGame):
        raise ValueError("self-play needs a two-player MatrixGame (see marl_envs)")
    if start is not None:
        s = np.asarray(start, dtype=np.float64)
        if s.shape != (2, game.n_actions) or (s <= 0).any() or not np.allclose(s.sum(axis=1), 1):
            raise ValueError(f"start must be two positive policies of shape (2, {game.n_actions}) summing to 1")
    if int(rounds) != rounds or rounds < 0 or int(samples) != samples or samples < 0:
        raise ValueError(f"need rounds >= 0 and samples >= 0 (0: exchange mixed strategies), got {rounds}, {samples}")


def train_self_play(comm: Comm, game: MatrixGame, rounds: int, lr: float = 0.1, samples: int = 0,
                    optimistic: bool = False, start: Any = None, seed: int = 0) -> dict[str, Any]:
    """Per rank: the players it owns play ``rounds`` rounds through the referee on rank 0. Chapter 30, Section 4.

    Per round each player rank sends one play and receives one (A or ``samples`` float64 each way).
    Returns each owned player's policy per round (rounds, A) and its average policy.
    """
    _check(game, rounds, samples, start)
    owned = [range(lo, hi) for lo, hi in block_bounds(2, comm.size)]
    mine = list(owned[comm.rank])
    rngs = [np.random.default_rng([seed, 1, i]) for i in range(2)]
    players = {i: Hedge(game.n_actions, lr, optimistic, None if start is None else start[i]) for i in mine}
    trace = {i: np.zeros((rounds, game.n_actions)) for i in mine}
    peers = [r for r in range(1, comm.size) if len(owned[r])]
    for t in range(rounds):
        plays = {}
        for i in mine:
            trace[i][t] = players[i].policy()
            plays[i] = players[i].play(samples, rngs[i])
        if comm.rank == 0:
            for r in peers:
                got = comm.recv(r)
                plays.update({i: got[j] for j, i in enumerate(owned[r])})
            for r in peers:
                comm.send(np.stack([plays[1 - i] for i in owned[r]]), r)
            opp = {i: plays[1 - i] for i in mine}
        elif mine:
            comm.send(np.stack([plays[i] for i in mine]), 0)
            got = comm.recv(0)
            opp = {i: got[j] for j, i in enumerate(mine)}
        for i in mine:
            players[i].update(_payoff_vector(game, i, opp[i], samples))
    return {"policies": trace, "average": {i: p.average() for i, p in players.items()}}


def reference_self_play(game: MatrixGame, rounds: int, lr: float = 0.1, samples: int = 0,
                        optimistic: bool = False, start: Any = None, seed: int = 0) -> dict[str, Any]:
    """Both players in one plain loop on one machine."""
    _check(game, rounds, samples, start)
    rngs = [np.random.default_rng([seed, 1, i]) for i in range(2)]
    players = [Hedge(game.n_actions, lr, optimistic, None if start is None else start[i]) for i in range(2)]
    trace = {i: np.zeros((rounds, game.n_actions)) for i in range(2)}
    for t in range(rounds):
        plays = []
        for i in range(2):
            trace[i][t] = players[i].policy()
            plays.append(players[i].play(samples, rngs[i]))
        for i in range(2):
            players[i].update(_payoff_vector(game, i, plays[1 - i], samples))
    return {"policies": trace, "average": {i: p.average() for i, p in enumerate(players)}}


def run_self_play(game: MatrixGame, K: int, rounds: int, timeout: float = 120.0, **kw: Any
                  ) -> tuple[dict[str, Any], Any]:
    """Driver: K ranks (the referee on rank 0); returns both players' policies and averages, and the run."""
    res = cluster.run(train_self_play, K, args=(game, rounds), kwargs=kw, timeout=timeout)
    out: dict[str, Any] = {"policies": {}, "average": {}}
    for v in res.values:
        out["policies"].update(v["policies"])
        out["average"].update(v["average"])
    return out, res
